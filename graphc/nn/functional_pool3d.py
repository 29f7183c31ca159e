"""3-D pooling (``F.avg_pool3d``, ``max_pool3d``, ``adaptive_avg_pool3d``, ``adaptive_max_pool3d``,
``max_unpool3d``) on (N, C, D, H, W) or (C, D, H, W) inputs, written on the 2-D kernels: a box
window is separable, so one 2-D pass over (H, W) of the (N, C*D, H, W) view, then one over
(D, 1) of the (N, C, D, Ho*Wo) view give PyTorch's result. Means: the divisor of a 3-D window
is the product of the per-dim counts (padding counted or not, ``ceil_mode``), which is what the
two passes divide by in turn; ``divisor_override`` divides the two passes' sum. Maxima: the max
of maxima, and the 3-D flat index ``d * H * W + h * W + w`` recovered from the two passes'
indices. The unpool writes through ``max_unpool2d`` on a (1, D*H*W) plane, whose flat index is
the 3-D one.
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..ops.surface import torchsymbol
from .functional_pool import _batched, _done, _unpool_size

_F_ONLY = {"method": False, "top": False}


def _triple(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise GraphcError(f"{what} must be an int or a 3-tuple, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * 3


def _views(x):
    """(N, C, D, H, W) -> (N, C*D, H, W) for the first pass."""
    n, c, d, h, w = x.shape
    return x.reshape(n, c * d, h, w)


def _depth_view(y, c, d):
    """The first pass's (N, C*D, Ho, Wo) -> (N, C, D, Ho*Wo) for the second pass."""
    n, _, ho, wo = y.shape
    return y.reshape(n, c, d, ho * wo), (ho, wo)


def _finish(z, hw):
    n, c, do, _ = z.shape
    return z.reshape(n, c, do, *hw)


@torchsymbol(**_F_ONLY)
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over 3-D windows, with ``avg_pool2d``'s options.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.avg_pool3d(gc.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten().numpy().tolist()
    [3.5]
    """
    from .functional_pool import avg_pool2d
    x, added = _batched(input, 5, "avg_pool3d")
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _triple(stride, "stride")
    p = _triple(padding, "padding")
    one = None if divisor_override is None else 1
    c, d = x.shape[1], x.shape[2]
    y = avg_pool2d(_views(x), k[1:], s[1:], p[1:], ceil_mode, count_include_pad, one)
    y, hw = _depth_view(y, c, d)
    z = avg_pool2d(y, (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad, one)
    out = _finish(z, hw)
    if divisor_override is not None:
        out = out / float(divisor_override)
    return _done(out, added)


def _index_3d(i1, i2, c, d, h, w, hw):
    """The flat ``d * H * W + h * W + w`` index of each 3-D maximum from the (H, W) pass's indices
    ``i1`` (N, C*D, Ho, Wo) and the depth pass's ``i2`` (N, C, Do, Ho*Wo) (``d * Ho*Wo + col``)."""
    cols = hw[0] * hw[1]
    depth = i2.floor_divide(cols)  # (N, C, Do, cols): the depth each maximum came from
    planes = i1.reshape(i1.shape[0], c, d, cols).transpose(2, 3).unsqueeze(2)  # (N, C, 1, cols, D)
    from ..ops.creation import arange
    which = depth.unsqueeze(-1) == arange(d)  # (N, C, Do, cols, D)
    inner = apply("where", [which, planes, 0]).sum(-1)
    return _finish(depth * (h * w) + inner, hw)


@torchsymbol(**_F_ONLY)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over 3-D windows; ``return_indices`` also gives the flat ``d * H * W + h * W + w`` index.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> y, i = F.max_pool3d(gc.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)
    >>> y.flatten().numpy().tolist(), i.flatten().numpy().tolist()
    ([7.0], [7])
    """
    from .functional_pool import max_pool2d
    x, added = _batched(input, 5, "max_pool3d")
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _triple(stride, "stride")
    p, dil = _triple(padding, "padding"), _triple(dilation, "dilation")
    n, c, d, h, w = x.shape
    first = max_pool2d(_views(x), k[1:], s[1:], p[1:], dil[1:], ceil_mode, return_indices)
    y1, i1 = first if return_indices else (first, None)
    y, hw = _depth_view(y1, c, d)
    second = max_pool2d(y, (k[0], 1), (s[0], 1), (p[0], 0), (dil[0], 1), ceil_mode, return_indices)
    if not return_indices:
        return _done(_finish(second, hw), added)
    z, i2 = second
    return _done((_finish(z, hw), _index_3d(i1, i2, c, d, h, w, hw)), added)


def _adaptive_avg_pool2d(x, size):
    return apply("adaptive_avg_pool2d", [x], {"output_size": tuple(int(s) for s in size)})


def _adaptive_size(x, output_size):
    size = (output_size,) * 3 if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(size) != 3:
        raise ShapeError(f"adaptive_pool3d: output_size must be an int or 3 entries, got {output_size!r}")
    return tuple(int(x.shape[2 + i]) if s is None else int(s) for i, s in enumerate(size))


@torchsymbol(**_F_ONLY)
def adaptive_avg_pool3d(input, output_size):
    """Mean over the adaptive windows giving ``output_size`` (D, H, W) (None keeps that dim).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.adaptive_avg_pool3d(gc.arange(8.0).reshape(1, 1, 2, 2, 2), 1).flatten().numpy().tolist()
    [3.5]
    """
    x, added = _batched(input, 5, "adaptive_avg_pool3d")
    size = _adaptive_size(x, output_size)
    c, d = x.shape[1], x.shape[2]
    y, hw = _depth_view(_adaptive_avg_pool2d(_views(x), size[1:]), c, d)
    return _done(_finish(_adaptive_avg_pool2d(y, (size[0], hw[0] * hw[1])), hw), added)


@torchsymbol(**_F_ONLY)
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over the adaptive windows giving ``output_size`` (D, H, W); ``return_indices`` as
    ``max_pool3d``'s.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.adaptive_max_pool3d(gc.arange(8.0).reshape(1, 1, 2, 2, 2), 1).flatten().numpy().tolist()
    [7.0]
    """
    from .functional_pool import adaptive_max_pool2d
    x, added = _batched(input, 5, "adaptive_max_pool3d")
    size = _adaptive_size(x, output_size)
    n, c, d, h, w = x.shape
    first = adaptive_max_pool2d(_views(x), size[1:], return_indices)
    y1, i1 = first if return_indices else (first, None)
    y, hw = _depth_view(y1, c, d)
    second = adaptive_max_pool2d(y, (size[0], hw[0] * hw[1]), return_indices)
    if not return_indices:
        return _done(_finish(second, hw), added)
    z, i2 = second
    return _done((_finish(z, hw), _index_3d(i1, i2, c, d, h, w, hw)), added)


@torchsymbol(**_F_ONLY)
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_pool3d``'s partial inverse: zeros with each value written at its flat index.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> y, i = F.max_pool3d(gc.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)
    >>> F.max_unpool3d(y, i, 2).flatten().numpy().tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0]
    """
    x, added = _batched(input, 5, "max_unpool3d")
    idx = indices if not added else indices.unsqueeze(0)
    k = _triple(kernel_size, "kernel_size")
    s = _triple(k if stride is None else stride, "stride")
    size = _unpool_size(x, k, s, _triple(padding, "padding"), output_size, 3)
    n, c = x.shape[0], x.shape[1]
    flat = lambda t: t.reshape(n, c, 1, -1)  # noqa: E731 - (N, C, 1, D*H*W): the flat index is the 3-D one
    out = apply("max_unpool2d", [flat(x), flat(idx)], {"output_size": [1, size[0] * size[1] * size[2]]})
    return _done(out.reshape(n, c, *size), added)
