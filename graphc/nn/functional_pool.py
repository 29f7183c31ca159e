"""``F.`` pooling with PyTorch's signatures: ``max_pool1d/2d`` (``ceil_mode``, ``dilation``,
``return_indices``), ``avg_pool1d/2d`` (``ceil_mode``, ``count_include_pad``,
``divisor_override``), ``adaptive_avg_pool1d``, ``adaptive_max_pool1d/2d`` (``return_indices``),
``lp_pool1d/2d`` and ``max_unpool1d/2d``. The 1-D forms run the 2-D ops on a height-1 image (an
index is then the position along L, as PyTorch's); ``lp_pool`` is a composite over
``avg_pool2d``. Unbatched inputs ((C, L) / (C, H, W)) work as in PyTorch.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> y, i = F.max_pool1d(gc.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2, ceil_mode=True, return_indices=True)
>>> y.numpy().tolist(), i.numpy().tolist()
([[[3.0, 5.0, 4.0]]], [[[1, 3, 4]]])
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..ops.functions import abs as _abs, relu, sign
from ..ops.functions_nn import _pair
from ..ops.surface import torchsymbol

_F_ONLY = {"method": False, "top": False}


def _single(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise GraphcError(f"{what} must be an int or a 1-tuple, got {v!r}")
        return int(v[0])
    return int(v)


def _batched(input, rank, what):
    """``(input with a batch dim, whether one was added)`` for an op on ``rank``-D batches."""
    if input.ndim == rank:
        return input, False
    if input.ndim == rank - 1:
        return input.unsqueeze(0), True
    raise ShapeError(f"{what}: expected {rank - 1}D or {rank}D input, got {input.ndim}D {tuple(input.shape)}")


def _done(outs, added, dims=(0,)):
    def fix(t):
        for d in sorted(dims, reverse=True):
            t = t.squeeze(d)
        return t
    if isinstance(outs, tuple):
        return tuple(fix(t) for t in outs) if added or dims != (0,) else outs
    return fix(outs) if added or dims != (0,) else outs


def _window_attrs(kernel_size, stride, padding, ceil_mode):
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else stride
    pads = _pair(padding, "padding")
    if pads[0] > kernel[0] // 2 or pads[1] > kernel[1] // 2:
        raise ShapeError(f"pad should be at most half of effective kernel size, but got pad={padding}, "
                         f"kernel_size={kernel_size}")
    return {"kernel_size": kernel, "stride": _pair(stride, "stride"), "padding": pads, "ceil_mode": bool(ceil_mode)}


def max_pool2d_attrs(kernel_size, stride, padding, dilation, ceil_mode):
    return {**_window_attrs(kernel_size, stride, padding, ceil_mode), "dilation": _pair(dilation, "dilation")}


def _max_pool(x, attrs, return_indices):
    y = apply("max_pool2d", [x], attrs)
    return (y, apply("max_pool2d_indices", [x], attrs)) if return_indices else y


@torchsymbol(**_F_ONLY)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of (N, C, H, W) or (C, H, W); ``ceil_mode`` keeps a last partial window;
    ``return_indices`` also gives each maximum's flat ``h * W + w`` index (for ``max_unpool2d``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.max_pool2d(gc.tensor([[[[1.0, 3.0, 2.0]]]]), (1, 2), ceil_mode=True).numpy().tolist()
    [[[[3.0, 2.0]]]]
    """
    x, added = _batched(input, 4, "max_pool2d")
    return _done(_max_pool(x, max_pool2d_attrs(kernel_size, stride, padding, dilation, ceil_mode), return_indices),
                 added)


@torchsymbol(**_F_ONLY)
def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """``F.max_pool2d`` giving ``(values, indices)``, as PyTorch's ``F.max_pool2d_with_indices``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.max_pool2d_with_indices(gc.arange(4.0).reshape(1, 1, 2, 2), 2)[1].numpy().tolist()
    [[[[3]]]]
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


@torchsymbol(**_F_ONLY)
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of (N, C, L) or (C, L); indices (``return_indices``) are positions along L.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.max_pool1d(gc.tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2).numpy().tolist()
    [[[3.0, 5.0]]]
    """
    x, added = _batched(input, 3, "max_pool1d")
    stride = kernel_size if stride is None else stride
    attrs = max_pool2d_attrs((1, _single(kernel_size, "kernel_size")), (1, _single(stride, "stride")),
                             (0, _single(padding, "padding")), (1, _single(dilation, "dilation")), ceil_mode)
    return _done(_max_pool(x.unsqueeze(2), attrs, return_indices), added, (0, 2) if added else (2,))


def avg_pool2d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if divisor_override is not None and (isinstance(divisor_override, bool) or int(divisor_override) <= 0):
        raise GraphcError(f"avg_pool2d: divisor must be not zero, got {divisor_override!r}")
    return {**_window_attrs(kernel_size, stride, padding, ceil_mode), "count_include_pad": bool(count_include_pad),
            "divisor_override": None if divisor_override is None else int(divisor_override)}


@torchsymbol(**_F_ONLY)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows of (N, C, H, W) or (C, H, W): padding counted (``count_include_pad``) or
    not, a last partial window (``ceil_mode``), or a fixed ``divisor_override``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.avg_pool2d(gc.tensor([[[[1.0, 3.0, 2.0]]]]), (1, 2), ceil_mode=True).numpy().tolist()
    [[[[2.0, 2.0]]]]
    """
    x, added = _batched(input, 4, "avg_pool2d")
    attrs = avg_pool2d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return _done(apply("avg_pool2d", [x], attrs), added)


@torchsymbol(**_F_ONLY)
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of (N, C, L) or (C, L).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.avg_pool1d(gc.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 2).numpy().tolist()
    [[[2.0, 4.0]]]
    """
    x, added = _batched(input, 3, "avg_pool1d")
    stride = kernel_size if stride is None else stride
    attrs = avg_pool2d_attrs((1, _single(kernel_size, "kernel_size")), (1, _single(stride, "stride")),
                             (0, _single(padding, "padding")), ceil_mode, count_include_pad, None)
    return _done(apply("avg_pool2d", [x.unsqueeze(2)], attrs), added, (0, 2) if added else (2,))


def _adaptive_size(input, output_size, n):
    size = (output_size,) * n if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(size) != n:
        raise GraphcError(f"adaptive pooling: output_size must have {n} entries, got {output_size!r}")
    return tuple(int(input.shape[input.ndim - n + i]) if s is None else int(s) for i, s in enumerate(size))


@torchsymbol(**_F_ONLY)
def adaptive_avg_pool1d(input, output_size):
    """Mean over PyTorch's adaptive bins along L of (N, C, L) or (C, L).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.adaptive_avg_pool1d(gc.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 1).numpy().tolist()
    [[[3.0]]]
    """
    x, added = _batched(input, 3, "adaptive_avg_pool1d")
    size = (1,) + _adaptive_size(x, output_size, 1)
    return _done(apply("adaptive_avg_pool2d", [x.unsqueeze(2)], {"output_size": size}), added,
                 (0, 2) if added else (2,))


def _adaptive_max(x, size, return_indices):
    y = apply("adaptive_max_pool2d", [x], {"output_size": size})
    return (y, apply("adaptive_max_pool2d_indices", [x], {"output_size": size})) if return_indices else y


@torchsymbol(**_F_ONLY)
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive bins of (N, C, H, W) or (C, H, W) (``None`` keeps a size);
    ``return_indices`` also gives each maximum's flat ``h * W + w`` index.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.adaptive_max_pool2d(gc.tensor([[[[1.0, 3.0], [4.0, 2.0]]]]), 1).numpy().tolist()
    [[[[4.0]]]]
    """
    x, added = _batched(input, 4, "adaptive_max_pool2d")
    return _done(_adaptive_max(x, _adaptive_size(x, output_size, 2), return_indices), added)


@torchsymbol(**_F_ONLY)
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive bins along L of (N, C, L) or (C, L).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.adaptive_max_pool1d(gc.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 2).numpy().tolist()
    [[[3.0, 6.0]]]
    """
    x, added = _batched(input, 3, "adaptive_max_pool1d")
    size = (1,) + _adaptive_size(x, output_size, 1)
    return _done(_adaptive_max(x.unsqueeze(2), size, return_indices), added, (0, 2) if added else (2,))


def _lp_finish(out, norm_type, count):
    return ((sign(out) * relu(_abs(out))) * float(count)) ** (1.0 / float(norm_type))


@torchsymbol(**_F_ONLY)
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over each window of x ** p) ** (1 / p)`` (PyTorch's formula: an average pool of
    ``x ** p`` times the window size, no padding).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.lp_pool2d(gc.tensor([[[[3.0, 4.0]]]]), 2, (1, 2)).numpy().tolist()
    [[[[5.0]]]]
    """
    kh, kw = _pair(kernel_size, "kernel_size")
    out = avg_pool2d(input ** float(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


@torchsymbol(**_F_ONLY)
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over each window of x ** p) ** (1 / p)`` along L.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.lp_pool1d(gc.tensor([[[3.0, 4.0]]]), 2, 2).numpy().tolist()
    [[[5.0]]]
    """
    k = _single(kernel_size, "kernel_size")
    out = avg_pool1d(input ** float(norm_type), k, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


def _unpool_size(x, kernel, stride, padding, output_size, n):
    default = [(x.shape[x.ndim - n + i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(n)]
    if output_size is None:
        return default
    size = [int(s) for s in output_size]
    size = size[2:] if len(size) == n + 2 else size
    if len(size) != n:
        raise GraphcError(f"max_unpool: output_size must have {n} (or {n + 2}) entries, got {output_size!r}")
    for s, d, st in zip(size, default, stride):
        if not d - st < s < d + st:
            raise GraphcError(f"max_unpool: invalid output_size {output_size!r} (it should be between {d - st} "
                              f"and {d + st}, exclusive)")
    return size


@torchsymbol(**_F_ONLY)
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Max pooling's partial inverse: zeros with each value written at its index (``return_indices``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> y, i = F.max_pool2d(gc.tensor([[[[1.0, 3.0], [4.0, 2.0]]]]), 2, return_indices=True)
    >>> F.max_unpool2d(y, i, 2).numpy().tolist()
    [[[[0.0, 0.0], [4.0, 0.0]]]]
    """
    x, added = _batched(input, 4, "max_unpool2d")
    idx = indices if not added else indices.unsqueeze(0)
    kernel = _pair(kernel_size, "kernel_size")
    stride = _pair(kernel if stride is None else stride, "stride")
    size = _unpool_size(x, kernel, stride, _pair(padding, "padding"), output_size, 2)
    return _done(apply("max_unpool2d", [x, idx], {"output_size": size}), added)


@torchsymbol(**_F_ONLY)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_pool1d``'s partial inverse along L.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> y, i = F.max_pool1d(gc.tensor([[[1.0, 3.0]]]), 2, return_indices=True)
    >>> F.max_unpool1d(y, i, 2).numpy().tolist()
    [[[0.0, 3.0]]]
    """
    x, added = _batched(input, 3, "max_unpool1d")
    idx = indices if not added else indices.unsqueeze(0)
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None else _single(stride, "stride")
    size = _unpool_size(x, (k,), (s,), (_single(padding, "padding"),), output_size, 1)
    out = apply("max_unpool2d", [x.unsqueeze(2), idx.unsqueeze(2)], {"output_size": [1, size[0]]})
    return _done(out, added, (0, 2) if added else (2,))
