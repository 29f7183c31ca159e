"""Vector geometry of issue #34 as composites (autodiff gives the gradients): ``cross``
(``torch.linalg.cross`` is it with ``dim=-1``), ``cdist`` and ``dist``, both from the
differences (exact for equal rows, with PyTorch's zero gradient at zero distance).
"""
from __future__ import annotations

import math

from ..core.dispatch import apply
from ..ir.errors import ShapeError
from ._pinning import pin_broadcast, pin_equal
from .functions_blas import _reshape
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _part(x, axis, start, stop):
    slices = [(None, None, 1)] * x.ndim
    slices[axis] = (start, stop, 1)
    return apply("slice", [x], {"slices": slices, "drop": []})


@torchsymbol(**_METHOD_AND_TOP)
def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (None: the first dim of size 3, as
    ``torch.cross``; ``torch.linalg.cross`` is this with dim=-1). Operands broadcast.

    >>> import graphc as gc
    >>> gc.cross(gc.tensor([1.0, 0.0, 0.0]), gc.tensor([0.0, 1.0, 0.0])).numpy().tolist()
    [0.0, 0.0, 1.0]
    """
    pin_broadcast(input, other)
    rank = max(input.ndim, other.ndim)
    a, b = (_reshape(t, [1] * (rank - t.ndim) + list(t.dims)) if t.ndim < rank else t for t in (input, other))
    if dim is None:
        dim = next((i for i in range(rank) if a.dims[i] == 3 and b.dims[i] == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dim of size 3 in shapes {input.dims} and {other.dims}")
    if not -rank <= dim < rank:
        raise ShapeError(f"cross: dim {dim} is out of range for rank {rank}")
    axis = dim % rank
    if a.dims[axis] != 3 or b.dims[axis] != 3:
        raise ShapeError(f"cross: dim {dim} must have size 3 in both, got {a.dims[axis]} and {b.dims[axis]}")
    ai = [_part(a, axis, i, i + 1) for i in range(3)]
    bi = [_part(b, axis, i, i + 1) for i in range(3)]
    parts = [ai[(i + 1) % 3] * bi[(i + 2) % 3] - ai[(i + 2) % 3] * bi[(i + 1) % 3] for i in range(3)]
    return apply("concat", parts, {"dim": axis})


def _safe_root(s, p):
    """``s ** (1/p)`` with a zero gradient where s is 0 (PyTorch's cdist/dist backward)."""
    zero = apply("eq", [s, 0])
    root = apply("pow", [apply("where", [zero, 1.0, s]), 1.0 / p])
    return apply("where", [zero, 0.0, root])


def _p_norm(diff, p, dims):
    """The p-norm of ``diff`` over ``dims`` as PyTorch's cdist/dist: p = 0 counts non-zeros."""
    absd = diff.abs()
    if p == 0:  # sign keeps a (zero) gradient path, as PyTorch's zero gradient
        counted = apply("where", [apply("isnan", [diff]), 1.0, apply("sign", [absd])])
        return apply("sum", [counted], {"dims": dims, "keepdim": False})
    if p == math.inf:
        return apply("max", [absd], {"dims": dims, "keepdim": False})
    if p == 1:
        return apply("sum", [absd], {"dims": dims, "keepdim": False})
    power = absd * absd if p == 2 else apply("pow", [absd, float(p)])
    return _safe_root(apply("sum", [power], {"dims": dims, "keepdim": False}), p)


@torchsymbol(method=False, functional=False)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 ``(..., P, M)`` and each row of x2
    ``(..., R, M)``: ``(..., P, R)``. Computed from the differences (``compute_mode`` is
    accepted; graphc never takes PyTorch's matmul shortcut), so it is exact for equal rows.

    >>> import graphc as gc
    >>> gc.cdist(gc.tensor([[0.0, 0.0]]), gc.tensor([[3.0, 4.0], [0.0, 1.0]])).numpy().tolist()
    [[5.0, 1.0]]
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist takes tensors of at least 2 dims, got {x1.ndim}-d and {x2.ndim}-d")
    if p < 0:
        raise ShapeError(f"cdist: p must be >= 0, got {p}")
    pin_equal(x1, -1, x2, -1)
    pin_broadcast(x1.unsqueeze(-2), x2.unsqueeze(-3))
    diff = apply("sub", [x1.unsqueeze(-2), x2.unsqueeze(-3)])
    return _p_norm(diff, p, (-1,))


@torchsymbol(**_METHOD_AND_TOP)
def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast), a 0-d tensor.

    >>> import graphc as gc
    >>> gc.dist(gc.tensor([0.0, 0.0]), gc.tensor([3.0, 4.0])).item()
    5.0
    """
    pin_broadcast(input, other)
    return _p_norm(apply("sub", [input, other]), float(p), None)

