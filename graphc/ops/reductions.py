"""Reductions declared once for ``Tensor.x`` and ``gc.x`` (PyTorch has no ``F.sum``):
sum, mean over one dim or a list of dims; max/min (values and indices with a dim, as
PyTorch); amax; argmax/argmin.
"""
from __future__ import annotations

import operator

import numpy as np

from collections import namedtuple

from ..core.dispatch import apply
from ..ir.errors import ShapeError, TraceError
from ..ir.types import is_static
from .surface import torchsymbol
from ..core.tensor import Tensor

MaxResult = namedtuple("MaxResult", ["values", "indices"])
_METHOD_AND_TOP = dict(functional=False)


def _dims(dim):
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        return tuple(dim)
    return (operator.index(dim),)  # an int, a numpy int, or a traced Python int (the plan specialises on it)


@torchsymbol(**_METHOD_AND_TOP)
def sum(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Sum over ``dim`` (an int, a list/tuple of dims, or None for all). bool and uint8 sum
    in int64, as in PyTorch.

    >>> import graphc as gc
    >>> gc.ones(2, 3, 4).sum((0, 2)).numpy().tolist()
    [8.0, 8.0, 8.0]
    """
    return apply("sum", [input], {"dims": _dims(dim), "keepdim": keepdim})


@torchsymbol(**_METHOD_AND_TOP)
def mean(input, dim=None, keepdim=False):
    """Mean over ``dim`` (an int, a list/tuple of dims, or None for all); floats only.

    >>> import graphc as gc
    >>> gc.ones(2, 3).mean([0, 1], keepdim=True).shape
    (1, 1)
    """
    return apply("mean", [input], {"dims": _dims(dim), "keepdim": keepdim})


@torchsymbol(**_METHOD_AND_TOP)
def max(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Like PyTorch: with ``dim`` returns ``(values, indices)``; without, the max element;
    with a tensor, the elementwise maximum.

    >>> import graphc as gc
    >>> values, indices = gc.tensor([[1.0, 5.0], [7.0, 2.0]]).max(1)
    >>> values.numpy().tolist(), indices.numpy().tolist()
    ([5.0, 7.0], [1, 0])
    """
    if isinstance(dim, Tensor):
        return apply("maximum", [input, dim])
    if dim is None:
        return apply("max", [input], {"dims": None, "keepdim": False})
    values = apply("max", [input], {"dims": (dim,), "keepdim": keepdim})
    return MaxResult(values, _indices_of_max(input, dim, keepdim))


def _indices_of_max(input, dim, keepdim):
    """``max(dim)``'s indices: bools too (PyTorch's max takes them, its argmax does not)."""
    return argmax(input.cast("uint8") if input.dtype.name == "bool" else input, dim, keepdim)


@torchsymbol(**_METHOD_AND_TOP)
def min(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Like ``max`` (``(values, indices)`` with a dim), through ``-max(-x)``.

    >>> import graphc as gc
    >>> gc.tensor([3.0, -1.0, 2.0]).min().item()
    -1.0
    """
    if isinstance(dim, Tensor):
        return apply("minimum", [input, dim])
    if dim is None:
        return _flip(apply("max", [_flip(input)], {"dims": None, "keepdim": False}))
    flipped = _flip(input)
    values = _flip(apply("max", [flipped], {"dims": (dim,), "keepdim": keepdim}))
    return MaxResult(values, _indices_of_max(flipped, dim, keepdim))


def _flip(x):
    """An order-reversing map that is its own inverse and never overflows: -x for floats, not x
    for bools, ~x (all ones minus x: 255 - x for uint8, -1 - x for int64) for integers, where
    -x wraps (the minimum of uint8 [0, 5] came out as 5)."""
    if x.dtype.is_float:
        return -x
    if x.dtype.name == "bool":
        return apply("logical_not", [x])
    info = np.iinfo(x.dtype.numpy)
    return apply("sub", [int(info.max) + int(info.min), x])  # a Python int: it takes x's dtype


@torchsymbol(**_METHOD_AND_TOP)
def amax(input, dim=None, keepdim=False):
    """Max over one or several dims (values only; ties share the gradient evenly)."""
    return apply("max", [input], {"dims": _dims(dim), "keepdim": keepdim})


@torchsymbol(**_METHOD_AND_TOP)
def argmax(input, dim=None, keepdim=False):
    """Index of the largest element along ``dim`` (of the flattened tensor when None); the
    first one at ties; NaN counts as the largest, as in PyTorch.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 5.0], [7.0, 2.0]]).argmax(dim=0).numpy().tolist()
    [1, 0]
    """
    return apply("argmax", [input], {"dim": dim, "keepdim": keepdim})


@torchsymbol(**_METHOD_AND_TOP)
def argmin(input, dim=None, keepdim=False):
    """Index of the smallest element along ``dim``: ``argmax(-x)`` (first at ties). bool
    tensors are refused, as PyTorch refuses them.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 5.0], [7.0, 2.0]]).argmin(1).numpy().tolist()
    [0, 1]
    """
    if input.dtype.name == "bool":
        raise ShapeError("argmin does not take bool tensors (as in PyTorch); cast first: x.long()")
    if input.dtype.name == "uint8":
        input = input.long()  # -x wraps around in uint8
    return argmax(-input, dim, keepdim)


TopKResult = namedtuple("TopKResult", ["values", "indices"])


@torchsymbol(**_METHOD_AND_TOP)
def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's names
    """The ``k`` largest elements along ``dim`` (the smallest with ``largest=False``) and their
    indices, as ``(values, indices)``, largest first (``sorted=False`` gives the same order, as
    PyTorch on CPU may). A composite: ``k`` rounds of argmax, each masking out the element it
    took (the first one at ties, as argmax), so the values' gradient reaches exactly the
    chosen elements, as PyTorch's. The dim must be static (not a traced batch dim).

    >>> import graphc as gc
    >>> values, indices = gc.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 9.0]]).topk(2)
    >>> values.numpy().tolist(), indices.numpy().tolist()
    ([[5.0, 3.0], [9.0, 7.0]], [[1, 2], [2, 0]])
    """
    from .creation import arange, cat  # creation imports the tensor module's neighbours; kept local

    if input.ndim == 0 or not -input.ndim <= dim < input.ndim:
        raise ShapeError(f"topk: dim {dim} is out of range for a rank-{input.ndim} tensor")
    dim %= input.ndim
    if not is_static(input.dims[dim]):
        raise TraceError(f"topk along a symbolic dim ({input.dims[dim]}) of a traced tensor: the positions it "
                         "masks need the dim's size; take topk along a static dim", input._tracer.user_location())
    size = int(input.shape[dim])
    if not 1 <= k <= size:
        raise ShapeError(f"topk: k = {k} is out of range for a dim of size {size} (graphc takes 1 <= k <= size)")
    work = input if largest else _flip(input)
    lowest = float("-inf") if input.dtype.is_float else int(np.iinfo(input.dtype.numpy).min)
    positions = arange(size).reshape(*[size if d == dim else 1 for d in range(input.ndim)])
    values, indices = [], []
    for _ in range(k):
        index = argmax(work, dim, keepdim=True)
        chosen = apply("eq", [positions, index])
        values.append(apply("sum", [apply("where", [chosen, input, 0])], {"dims": (dim,), "keepdim": True}))
        indices.append(index)
        work = apply("where", [chosen, lowest, work])
    return TopKResult(cat(values, dim), cat(indices, dim))


@torchsymbol(**_METHOD_AND_TOP)
def trace(input):
    """The sum of a 2-D tensor's main diagonal, as ``torch.trace`` (graphc's tracer is
    ``gc.jit.trace``). The diagonal is picked by a constant identity mask, so the gradient
    is ``g * I``, as PyTorch's.

    >>> import graphc as gc
    >>> gc.trace(gc.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
    5.0
    """
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    rows, cols = (int(d) for d in input.shape)  # a symbolic size is pinned: the mask is a constant
    mask = Tensor(np.eye(rows, cols, dtype=input.dtype.numpy if input.dtype.is_float else np.int64))
    return (input * mask).sum()
