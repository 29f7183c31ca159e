"""``graphc.masked``: PyTorch's ``torch.masked`` reductions and normalizations on dense tensors
with a boolean ``mask=`` (True: the element takes part). As in torch/masked/_ops.py, the
masked-out elements are replaced by the operation's identity (0 for sum, 1 for prod, -inf for
amax / softmax, +inf for amin / softmin, NaN for median) and the plain operation runs on the
result; ``mean``, ``var`` and ``std`` divide by the count of masked-in elements (NaN where there
is none). ``mask`` broadcasts to the input; ``mask=None`` is the plain operation. Each is a
composite: gradients, compile and export come from the ops, and masked-out elements get a zero
gradient (``where``).

>>> import graphc as gc
>>> x = gc.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> m = gc.tensor([[True, False, True], [False, False, True]])
>>> gc.masked.sum(x, 1, mask=m).numpy().tolist()
[4.0, 6.0]
>>> gc.masked.amax(x, 1, mask=m).numpy().tolist()
[3.0, 6.0]
"""
from __future__ import annotations

import math

from .core.dispatch import apply
from .ir.errors import GraphcError, ShapeError
from .ir.types import DType

__all__ = ["sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean", "median", "logsumexp",
           "logaddexp", "norm", "var", "std", "softmax", "log_softmax", "softmin", "normalize"]

_SMALL_INTS = ("bool", "uint8")


def _dims(dim, ndim):
    """PyTorch's ``_canonical_dim``: a sorted tuple (all dims for None or ``()``); a 0-d input
    accepts dim 0 / -1 and has nothing to reduce (the empty tuple)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    size = max(ndim, 1)
    out = []
    for d in dims:
        if not -size <= d < size:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, {size - 1}], but got {d})")
        if d % size in out:
            raise GraphcError(f"dim={d} appears multiple times in the list of dims")
        out.append(d % size)
    return tuple(sorted(out)) if ndim else ()


def _mask(input, mask):
    """The mask as bool, broadcast to the input's shape."""
    if mask.ndim > input.ndim:
        raise ShapeError("masked: expected a broadcastable mask (got mask dimensionality higher than of the input)")
    if mask.dtype is not DType.bool:
        mask = mask.cast("bool")
    return mask if tuple(mask.dims) == tuple(input.dims) else mask.expand(*input.shape)


def _fill(input, mask, value):
    """``where(mask, input, value)`` (the input itself without a mask)."""
    if mask is None:
        return input
    return apply("where", [_mask(input, mask), input, value])


def _cast(x, dtype):
    if dtype is None:
        return x
    name = dtype.name if isinstance(dtype, DType) else str(dtype)
    return x if x.dtype.name == name else x.cast(name)


def _reduce(x, dims, keepdim, how):
    return apply(how, [x], {"dims": list(dims), "keepdim": bool(keepdim)}) if dims else x


def _sum_dtype(input, dtype):
    return dtype if dtype is not None else ("int64" if input.dtype.name in _SMALL_INTS else input.dtype)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001 - PyTorch's name
    """The sum of the masked-in elements over ``dim`` (0 where none).

    >>> import graphc as gc
    >>> gc.masked.sum(gc.tensor([1.0, 2.0]), mask=gc.tensor([False, True])).item()
    2.0
    """
    x = _cast(_fill(input, mask, 0), _sum_dtype(input, dtype))
    return _reduce(x, _dims(dim, input.ndim), keepdim, "sum")


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product of the masked-in elements over ``dim`` (1 where none).

    >>> import graphc as gc
    >>> gc.masked.prod(gc.tensor([3.0, 2.0]), mask=gc.tensor([True, False])).item()
    3.0
    """
    x = _cast(_fill(input, mask, 1), _sum_dtype(input, dtype))
    for d in reversed(_dims(dim, input.ndim)):
        x = x.prod(d, keepdim=bool(keepdim))
    return x


def cumsum(input, dim, *, dtype=None, mask=None):
    """The cumulative sum along ``dim``, masked-out elements counted as 0.

    >>> import graphc as gc
    >>> gc.masked.cumsum(gc.tensor([1.0, 2.0, 3.0]), 0, mask=gc.tensor([True, False, True])).numpy().tolist()
    [1.0, 1.0, 4.0]
    """
    x = _cast(_fill(input, mask, 0), dtype)
    return x.cumsum(_dims(dim, input.ndim)[0]) if input.ndim else x


def cumprod(input, dim, *, dtype=None, mask=None):
    """The cumulative product along ``dim``, masked-out elements counted as 1.

    >>> import graphc as gc
    >>> gc.masked.cumprod(gc.tensor([2.0, 5.0, 3.0]), 0, mask=gc.tensor([True, False, True])).numpy().tolist()
    [2.0, 2.0, 6.0]
    """
    x = _cast(_fill(input, mask, 1), dtype)
    return x.cumprod(_dims(dim, input.ndim)[0]) if input.ndim else x


def _extreme(input, dim, keepdim, dtype, mask, largest):
    fill = -math.inf if largest else math.inf
    x = _fill(input, mask, fill)
    dims = _dims(dim, input.ndim)
    if not dims:
        return _cast(x, dtype)
    out = x.amax(dims, keepdim=bool(keepdim)) if largest else x.amin(dims, keepdim=bool(keepdim))
    return _cast(out, dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The largest masked-in element over ``dim`` (-inf where none).

    >>> import graphc as gc
    >>> gc.masked.amax(gc.tensor([3.0, 5.0]), mask=gc.tensor([True, False])).item()
    3.0
    """
    return _extreme(input, dim, keepdim, dtype, mask, largest=True)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The smallest masked-in element over ``dim`` (+inf where none).

    >>> import graphc as gc
    >>> gc.masked.amin(gc.tensor([3.0, 1.0]), mask=gc.tensor([True, False])).item()
    3.0
    """
    return _extreme(input, dim, keepdim, dtype, mask, largest=False)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest masked-in element, in ``dtype`` (default: the input's, as PyTorch).

    >>> import graphc as gc
    >>> gc.masked.argmax(gc.tensor([3.0, 5.0, 4.0]), mask=gc.tensor([True, False, True])).item()
    2.0
    """
    x = _fill(input, mask, -math.inf)
    return _cast(x.argmax(dim, keepdim=bool(keepdim)), dtype if dtype is not None else input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the smallest masked-in element, in ``dtype`` (default: the input's, as PyTorch).

    >>> import graphc as gc
    >>> gc.masked.argmin(gc.tensor([3.0, 1.0, 2.0]), mask=gc.tensor([True, False, True])).item()
    2.0
    """
    x = _fill(input, mask, math.inf)
    return _cast(x.argmin(dim, keepdim=bool(keepdim)), dtype if dtype is not None else input.dtype)


def _count(input, mask, dims, keepdim):
    """The number of masked-in elements over ``dims`` (int64, as PyTorch's ``mask.sum``)."""
    ones = _mask(input, mask).cast("int64") if mask is not None else (input == input).cast("int64") * 0 + 1
    return _reduce(ones, dims, keepdim, "sum")


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the masked-in elements (NaN where none).

    >>> import graphc as gc
    >>> gc.masked.mean(gc.tensor([1.0, 2.0, 6.0]), mask=gc.tensor([True, False, True])).item()
    3.5
    """
    dtype = dtype if dtype is not None else input.dtype
    name = dtype.name if isinstance(dtype, DType) else str(dtype)
    if not DType[name].is_float:
        raise GraphcError(f"mean(): Could not infer output dtype. dtype must be a floating point dtype. Got: {name}")
    dims = _dims(dim, input.ndim)
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return total / _count(input, mask, dims, keepdim).cast(name)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The lower median of the masked-in (and not NaN) elements along ``dim`` (NaN where none), as
    PyTorch's ``nanmedian``. Written without a sort: element ``i`` is the median where the number
    of valid elements below it is at most ``k = (m - 1) // 2`` and those at most it exceed ``k``;
    tied medians share the gradient (PyTorch gives it to one of them).

    >>> import graphc as gc
    >>> gc.masked.median(gc.tensor([4.0, 1.0, 9.0, 3.0]), 0, mask=gc.tensor([True, True, False, True])).item()
    3.0
    """
    x = input if input.dtype.is_float else input.cast("float32")
    if input.ndim == 0:
        return _fill(x, mask, math.nan)
    d = _dims(dim, input.ndim)[0]
    valid = apply("logical_not", [x.isnan()])
    if mask is not None:
        valid = apply("logical_and", [valid, _mask(x, mask)])
    v = valid.cast(x.dtype.name)
    xi, xj = x.unsqueeze(d + 1), x.unsqueeze(d)  # element i along d, element j along d + 1
    vj = v.unsqueeze(d)
    below = ((xj < xi).cast(x.dtype.name) * vj).sum(d + 1)  # valid j with x_j < x_i
    at_most = ((xj <= xi).cast(x.dtype.name) * vj).sum(d + 1)
    k = ((v.sum(d, keepdim=True) - 1.0) * 0.5).floor()
    chosen = apply("logical_and", [valid, apply("logical_and", [below <= k, at_most > k])])
    picked = apply("where", [chosen, x, 0.0]).sum(d, keepdim=bool(keepdim))
    out = picked / chosen.cast(x.dtype.name).sum(d, keepdim=bool(keepdim))
    if input.dtype.is_float:
        return out
    return _cast(out, dtype if dtype is not None else input.dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` of the masked-in elements (-inf where none).

    >>> import graphc as gc
    >>> gc.masked.logsumexp(gc.tensor([0.0, 5.0, 0.0]), mask=gc.tensor([True, False, True])).item() == 0.6931471824645996
    True
    """
    x = _fill(input, mask, -math.inf)
    dims = _dims(dim, input.ndim)
    return _cast(x.logsumexp(dims, keepdim=bool(keepdim)) if dims else x, dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` elementwise, masked-out elements of either read as -inf.

    >>> import graphc as gc
    >>> gc.masked.logaddexp(gc.tensor([0.0, 1.0]), gc.tensor([0.0, 2.0]),
    ...                     input_mask=gc.tensor([True, False])).double().numpy().round(4).tolist()
    [0.6931, 2.0]
    """
    a = _fill(input, input_mask, -math.inf)
    b = _fill(other, other_mask, -math.inf)
    # the larger one factored out (not differentiated: the gradient is exp(a - out)); infinite
    # maxima are not factored, so that -inf with -inf gives -inf and +inf gives +inf
    top = apply("maximum", [a, b]).detach()
    top = apply("where", [top.isinf(), 0.0, top])
    return _cast(top + ((a - top).exp() + (b - top).exp()).log(), dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ``ord``-norm of the masked-in elements (masked-out ones read as 0, as +inf for
    ``ord=-inf``).

    >>> import graphc as gc
    >>> gc.masked.norm(gc.tensor([3.0, 7.0, 4.0]), 2.0, mask=gc.tensor([True, False, True])).item()
    5.0
    """
    x = _cast(_fill(input, mask, math.inf if ord == -math.inf else 0.0), dtype)
    dims = _dims(dim, input.ndim)
    if not dims:
        return x.abs() if ord != 0 else (x != 0).cast(x.dtype.name)
    return x.norm(ord, dims, keepdim=bool(keepdim))


def _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction is not None:
        raise GraphcError("masked var/std: only one of unbiased and correction may be given")
    corr = 1.0 if unbiased is None else (1.0 if unbiased else 0.0)
    corr = float(correction) if correction is not None else corr
    dtype = dtype if dtype is not None else (input.dtype if input.dtype.is_float else DType.float32)
    name = dtype.name if isinstance(dtype, DType) else str(dtype)
    dims = _dims(dim, input.ndim)
    count = _count(input, mask, dims, True).cast(name)
    centred = _cast(input, name) - sum(input, dim, keepdim=True, dtype=dtype, mask=mask) / count
    total = sum(centred * centred, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    if not keepdim:
        count = _reduce(count, dims, False, "sum")  # drop the kept size-1 dims
    if corr != 0:
        count = apply("maximum", [count - corr, 0.0])
    out = total / count
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance of the masked-in elements (``correction`` 1 by default; NaN where none).

    >>> import graphc as gc
    >>> gc.masked.var(gc.tensor([1.0, 9.0, 3.0]), mask=gc.tensor([True, False, True])).item()
    2.0
    """
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation of the masked-in elements (``correction`` 1 by default).

    >>> import graphc as gc
    >>> gc.masked.std(gc.tensor([1.0, 9.0, 3.0]), mask=gc.tensor([True, False, True]), correction=0).item()
    1.0
    """
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=True)


def _normalization(input, dim, dtype, mask, fill, how):
    x = _cast(_fill(input, mask, fill), dtype)
    if input.ndim == 0:
        _dims(dim, 0)
        return getattr(x.unsqueeze(0), how)(0).squeeze(0)
    return getattr(x, how)(_dims(dim, input.ndim)[0])


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along ``dim`` over the masked-in elements (masked-out ones get 0).

    >>> import graphc as gc
    >>> gc.masked.softmax(gc.tensor([1.0, 9.0, 1.0]), 0, mask=gc.tensor([True, False, True])).numpy().tolist()
    [0.5, 0.0, 0.5]
    """
    return _normalization(input, dim, dtype, mask, -math.inf, "softmax")


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax along ``dim`` over the masked-in elements (masked-out ones get -inf).

    >>> import graphc as gc
    >>> gc.masked.log_softmax(gc.tensor([1.0, 9.0]), 0, mask=gc.tensor([True, False])).numpy().tolist()
    [0.0, -inf]
    """
    return _normalization(input, dim, dtype, mask, -math.inf, "log_softmax")


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin (softmax of ``-x``) along ``dim`` over the masked-in elements.

    >>> import graphc as gc
    >>> gc.masked.softmin(gc.tensor([1.0, -9.0, 1.0]), 0, mask=gc.tensor([True, False, True])).numpy().tolist()
    [0.5, 0.0, 0.5]
    """
    x = _cast(_fill(input, mask, math.inf), dtype)
    return _normalization(-x, dim, None, None, None, "softmax")


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """``x / max(norm(x), eps)`` along ``dim``, norm and numerator over the masked-in elements.

    >>> import graphc as gc
    >>> gc.masked.normalize(gc.tensor([3.0, 1.0, 4.0]), 2.0, 0, mask=gc.tensor([True, False, True])).numpy().tolist()
    [0.6000000238418579, 0.0, 0.800000011920929]
    """
    x = _cast(_fill(input, mask, 0.0), dtype)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return x / apply("maximum", [nrm, float(eps)])
