"""Scans and reductions of issue #34: cummax/cummin and logcumsumexp (the ``cummax``,
``cummax_indices`` and ``cumulative`` primitives of ir/ops/cumulative.py, which work along a
symbolic batch dim), and composites over existing ops: diff, gradient, trapezoid/trapz, cumulative_trapezoid,
renorm, aminmax, nansum, nanmean.
"""
from __future__ import annotations

import math
from collections import namedtuple

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from ._pinning import pin_broadcast, pin_dim
from .reductions import _dims, amax
from .reductions_more import amin
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
MinMax = namedtuple("MinMax", ["min", "max"])


def _axis(input, dim, what):
    rank = max(input.ndim, 1)
    if not -rank <= dim < rank:
        raise ShapeError(f"{what}: dim {dim} is out of range for a rank-{input.ndim} tensor")
    return dim % rank


def _cumulative(x, dim, kind, what):
    return apply("cumulative", [x], {"kind": kind, "dim": _axis(x, dim, what), "reverse": False})


@torchsymbol(**_METHOD_AND_TOP)
def logcumsumexp(input, dim):
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow (a scan: works along a
    symbolic batch dim).

    >>> import graphc as gc
    >>> [round(v, 4) for v in gc.logcumsumexp(gc.tensor([0.0, 0.0]), 0).tolist()]
    [0.0, 0.6931]
    """
    x = input if input.dtype.is_float else input.cast("float32")
    return _cumulative(x, dim, "logsumexp", "logcumsumexp")


def _cumextreme(input, dim, largest, what):
    attrs = {"dim": _axis(input, dim, what), "largest": largest}
    return ValuesIndices(apply("cummax", [input], attrs), apply("cummax_indices", [input], attrs))


@torchsymbol(**_METHOD_AND_TOP)
def cummax(input, dim):
    """Running maxima along ``dim`` and the index each came from (the latest on ties; NaN
    propagates), as ``(values, indices)``.

    >>> import graphc as gc
    >>> v, i = gc.cummax(gc.tensor([1.0, 3.0, 2.0, 3.0]), 0)
    >>> v.numpy().tolist(), i.numpy().tolist()
    ([1.0, 3.0, 3.0, 3.0], [0, 1, 1, 3])
    """
    return _cumextreme(input, dim, True, "cummax")


@torchsymbol(**_METHOD_AND_TOP)
def cummin(input, dim):
    """Running minima along ``dim`` and the index each came from, as ``(values, indices)``.

    >>> import graphc as gc
    >>> gc.cummin(gc.tensor([2.0, 1.0, 3.0]), 0).values.numpy().tolist()
    [2.0, 1.0, 1.0]
    """
    return _cumextreme(input, dim, False, "cummin")


def _part(x, axis, start, stop):
    """x[start:stop] along axis; a symbolic dim is pinned first (graphc/ops/_pinning.py): the
    compiled graph cannot slice the batch dim with bounds, so the plan holds at its size."""
    pin_dim(x, axis)
    slices = [(None, None, 1)] * x.ndim
    slices[axis] = (start, stop, 1)
    return apply("slice", [x], {"slices": slices, "drop": []})


def _along(t, axis, like):
    """A prepend/append operand: a number becomes a size-1 slice of ``like``'s shape."""
    if isinstance(t, Tensor):
        return t if t.ndim else t.reshape(*[1 if i == axis else d for i, d in enumerate(like.shape)])
    zero = apply("mul", [_part(like, axis, 0, 1).detach(), 0])
    return apply("add", [zero, t])


@torchsymbol(**_METHOD_AND_TOP)
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along ``dim`` (bools: ``!=``), after joining ``prepend`` and
    ``append`` to the input along it.

    >>> import graphc as gc
    >>> gc.diff(gc.tensor([1.0, 4.0, 9.0]), prepend=gc.tensor([0.0])).numpy().tolist()
    [1.0, 3.0, 5.0]
    """
    if input.ndim == 0:
        raise ShapeError("diff needs a tensor of at least one dim (as PyTorch)")
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative, got {n}")
    axis = _axis(input, dim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    if len(parts) > 1:
        pin_dim(input, axis)  # a compiled concat along the batch dim needs its size
    x = input if len(parts) == 1 else apply("concat", [_along(p, axis, input) for p in parts], {"dim": axis})
    op = "logical_xor" if x.dtype.name == "bool" else "sub"
    for _ in range(n):
        size = x.shape[axis]
        if size == 0:
            break
        x = apply(op, [_part(x, axis, 1, None), _part(x, axis, 0, -1)])
    return x


def _trapezoid_pieces(y, x, dx, axis):
    """The areas of the trapezoids along ``axis`` (``dx`` a number or None with x a tensor)."""
    heights = apply("add", [_part(y, axis, 1, None), _part(y, axis, 0, -1)])
    if x is None:
        return apply("mul", [heights, (1.0 if dx is None else dx) / 2.0])
    if x.ndim == 1:  # spacing along the dim, broadcast over the others
        widths = diff(x).reshape(*[-1 if i == axis else 1 for i in range(y.ndim)])
    else:
        pin_broadcast(x, y)
        widths = diff(x, dim=axis - y.ndim)
    return apply("div", [apply("mul", [widths, heights]), 2.0])


def _trapezoid_args(y, x, dx, dim):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x, dx = None, float(x)  # trapezoid(y, 0.5): the second argument is the spacing
    if x is not None and dx is not None:
        raise ShapeError("trapezoid takes x or dx, not both")
    if y.ndim == 0:
        raise ShapeError("trapezoid needs a tensor of at least one dim")
    return x, dx, _axis(y, dim, "trapezoid")


@torchsymbol(method=False, functional=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``: sample points ``x`` (a tensor) or spacing ``dx``.

    >>> import graphc as gc
    >>> gc.trapezoid(gc.tensor([1.0, 2.0, 3.0])).item()
    4.0
    >>> gc.trapezoid(gc.tensor([1.0, 2.0, 3.0]), gc.tensor([0.0, 1.0, 3.0])).item()
    6.5
    """
    x, dx, axis = _trapezoid_args(y, x, dx, dim)
    if y.shape[axis] == 0:
        return apply("sum", [y], {"dims": (axis,), "keepdim": False})
    return apply("sum", [_trapezoid_pieces(y, x, dx, axis)], {"dims": (axis,), "keepdim": False})


@torchsymbol(method=False, functional=False)
def trapz(y, x=None, *, dx=None, dim=-1):
    """``trapezoid`` (NumPy's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@torchsymbol(method=False, functional=False)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoidal integrals along ``dim`` (one fewer element than y there).

    >>> import graphc as gc
    >>> gc.cumulative_trapezoid(gc.tensor([1.0, 2.0, 3.0])).numpy().tolist()
    [1.5, 4.0]
    """
    x, dx, axis = _trapezoid_args(y, x, dx, dim)
    return _cumulative(_trapezoid_pieces(y, x, dx, axis), axis, "sum", "cumulative_trapezoid")


def _spacings(spacing, dims, input):
    """One spacing per dim: a number, or a 1-d tensor of coordinates."""
    if spacing is None:
        return [1.0] * len(dims)
    if isinstance(spacing, (int, float)) or (isinstance(spacing, Tensor) and spacing.ndim == 0):
        spacing = [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise ShapeError(f"gradient: {len(spacing)} spacings for {len(dims)} dims")
    return spacing


def _gradient_uniform(x, axis, h, edge_order):
    interior = apply("div", [apply("sub", [_part(x, axis, 2, None), _part(x, axis, 0, -2)]), 2.0 * h])
    if edge_order == 1:
        first = apply("div", [apply("sub", [_part(x, axis, 1, 2), _part(x, axis, 0, 1)]), h])
        last = apply("div", [apply("sub", [_part(x, axis, -1, None), _part(x, axis, -2, -1)]), h])
    else:
        first = (_part(x, axis, 0, 1) * -1.5 + _part(x, axis, 1, 2) * 2.0 - _part(x, axis, 2, 3) * 0.5) / h
        last = (_part(x, axis, -3, -2) * 0.5 - _part(x, axis, -2, -1) * 2.0 + _part(x, axis, -1, None) * 1.5) / h
    return apply("concat", [first, interior, last], {"dim": axis})


def _gradient_coordinates(x, axis, coords, edge_order):
    """NumPy's second-order interior formula for uneven spacing; first-order edges."""
    if edge_order != 1:
        raise ShapeError("gradient with coordinate tensors takes edge_order=1 in graphc")
    shape = [-1 if i == axis else 1 for i in range(x.ndim)]
    h = diff(coords).reshape(*shape)
    h1, h2 = _part(h, axis, 0, -1), _part(h, axis, 1, None)
    a = -h2 / (h1 * (h1 + h2))
    b = (h2 - h1) / (h1 * h2)
    c = h1 / (h2 * (h1 + h2))
    interior = a * _part(x, axis, 0, -2) + b * _part(x, axis, 1, -1) + c * _part(x, axis, 2, None)
    first = (_part(x, axis, 1, 2) - _part(x, axis, 0, 1)) / _part(h, axis, 0, 1)
    last = (_part(x, axis, -1, None) - _part(x, axis, -2, -1)) / _part(h, axis, -1, None)
    return apply("concat", [first, interior, last], {"dim": axis})


@torchsymbol(method=False, functional=False)
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Central differences in the interior, one-sided (``edge_order`` 1 or 2) at the edges,
    along each dim in ``dim`` (None: all): a tuple of tensors, as ``torch.gradient``. The dims
    need at least ``edge_order + 1`` elements.

    >>> import graphc as gc
    >>> gc.gradient(gc.tensor([1.0, 2.0, 4.0, 8.0]))[0].numpy().tolist()
    [1.0, 1.5, 3.0, 4.0]
    """
    if edge_order not in (1, 2):
        raise ShapeError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    axes = [_axis(input, d, "gradient") for d in dims]
    x = input if input.dtype.is_float else input.cast("float32")
    out = []
    for axis, h in zip(axes, _spacings(spacing, dims, input)):
        if input.shape[axis] < edge_order + 1:
            raise ShapeError(f"gradient: dim {axis} has {input.shape[axis]} elements; edge_order={edge_order} "
                             f"needs at least {edge_order + 1}")
        if isinstance(h, Tensor) and h.ndim == 1:
            out.append(_gradient_coordinates(x, axis, h, edge_order))
        else:
            out.append(_gradient_uniform(x, axis, h.item() if isinstance(h, Tensor) else float(h), edge_order))
    return tuple(out)


@torchsymbol(**_METHOD_AND_TOP)
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm
    ``maxnorm`` (PyTorch's ``maxnorm / (norm + 1e-7)``).

    >>> import graphc as gc
    >>> gc.renorm(gc.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=gc.float64), 2, 0, 1.0).numpy().round(4).tolist()
    [[0.6, 0.8], [0.3, 0.4]]
    """
    if p <= 0:
        raise ShapeError(f"renorm: p must be positive, got {p}")
    if maxnorm < 0:
        raise ShapeError(f"renorm: maxnorm must be non-negative, got {maxnorm}")
    axis = _axis(input, dim, "renorm")
    others = tuple(i for i in range(input.ndim) if i != axis)
    absx = input.abs()
    if p == math.inf:
        norm = apply("max", [absx], {"dims": others, "keepdim": True}) if others else absx
    else:
        powered = absx * absx if p == 2 else absx if p == 1 else apply("pow", [absx, float(p)])
        total = apply("sum", [powered], {"dims": others, "keepdim": True}) if others else powered
        norm = total if p == 1 else apply("pow", [total, 1.0 / p])
    scale = apply("where", [apply("gt", [norm, maxnorm]), apply("div", [maxnorm, apply("add", [norm, 1e-7])]), 1.0])
    return apply("mul", [input, scale])


@torchsymbol(**_METHOD_AND_TOP)
def aminmax(input, *, dim=None, keepdim=False):
    """``(amin, amax)`` along ``dim`` (None: all), as a named tuple ``(min, max)``.

    >>> import graphc as gc
    >>> gc.aminmax(gc.tensor([[1.0, 5.0], [-2.0, 3.0]]), dim=1).max.numpy().tolist()
    [5.0, 3.0]
    """
    return MinMax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def _no_nan(input):
    return apply("where", [apply("isnan", [input]), 0.0, input]) if input.dtype.is_float else input


@torchsymbol(**_METHOD_AND_TOP)
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum treating NaN as 0 (its gradient is 0 there, as PyTorch's).

    >>> import graphc as gc
    >>> gc.nansum(gc.tensor([1.0, float("nan"), 2.0])).item()
    3.0
    """
    x = _no_nan(input)
    if dtype is not None:
        x = x.cast(dtype)
    return apply("sum", [x], {"dims": _dims(dim), "keepdim": keepdim})


@torchsymbol(**_METHOD_AND_TOP)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements (NaN where all are NaN).

    >>> import graphc as gc
    >>> gc.nanmean(gc.tensor([1.0, float("nan"), 2.0])).item()
    1.5
    """
    if not input.dtype.is_float:
        raise ShapeError(f"nanmean needs a floating-point input, got {input.dtype.name} (as PyTorch)")
    count = apply("sum", [apply("logical_not", [apply("isnan", [input])])], {"dims": _dims(dim), "keepdim": keepdim})
    return apply("div", [nansum(input, dim, keepdim, dtype=dtype), count])


def _in_place_variants():
    from ..core.inplace import _arithmetic

    _arithmetic("renorm", lambda x, *args, **kwargs: x.renorm(*args, **kwargs))


_in_place_variants()  # Tensor.renorm_
