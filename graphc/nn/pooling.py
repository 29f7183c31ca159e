"""Pooling modules with PyTorch's constructor signatures and defaults; each calls its ``F.``
function (graphc/nn/functional_pool.py): MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d,
AdaptiveMaxPool1d/2d, LPPool1d/2d and MaxUnpool1d/2d. None holds parameters or buffers.

>>> import graphc as gc
>>> from graphc import nn
>>> nn.MaxPool2d(2, ceil_mode=True)(gc.zeros(1, 1, 5, 5)).shape
(1, 1, 3, 3)
"""
from __future__ import annotations

from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max over windows along L of (N, C, L) or (C, L).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.MaxPool1d(2)(gc.tensor([[[1.0, 3.0, 2.0, 5.0]]])).numpy().tolist()
    [[[3.0, 5.0]]]
    """

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """Max over windows of (N, C, H, W) or (C, H, W); ``return_indices`` also returns the flat
    ``h * W + w`` index of each maximum (for :class:`MaxUnpool2d`).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> y, i = nn.MaxPool2d(2, return_indices=True)(gc.tensor([[[[1.0, 3.0], [4.0, 2.0]]]]))
    >>> y.numpy().tolist(), i.numpy().tolist()
    ([[[[4.0]]]], [[[[2]]]])
    """

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool1d(Module):
    """Mean over windows along L of (N, C, L) or (C, L).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AvgPool1d(2)(gc.tensor([[[1.0, 3.0, 2.0, 6.0]]])).numpy().tolist()
    [[[2.0, 4.0]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(Module):
    """Mean over windows of (N, C, H, W) or (C, H, W) (``count_include_pad``, ``ceil_mode``,
    ``divisor_override`` as in PyTorch).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AvgPool2d(2, divisor_override=1)(gc.ones(1, 1, 2, 2)).item()
    4.0
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool1d(Module):
    """Mean over PyTorch's adaptive bins along L.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool1d(1)(gc.tensor([[[1.0, 3.0]]])).numpy().tolist()
    [[[2.0]]]
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """Mean over PyTorch's adaptive bins of (N, C, H, W) (``None`` keeps that size).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool2d((1, None))(gc.zeros(2, 3, 4, 5)).shape
    (2, 3, 1, 5)
    """

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool1d(Module):
    """Max over PyTorch's adaptive bins along L (``return_indices`` as MaxPool1d's).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveMaxPool1d(2)(gc.tensor([[[1.0, 3.0, 2.0, 6.0]]])).numpy().tolist()
    [[[3.0, 6.0]]]
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x):
        return F.adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """Max over PyTorch's adaptive bins of (N, C, H, W) or (C, H, W).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveMaxPool2d(1)(gc.tensor([[[[1.0, 3.0], [4.0, 2.0]]]])).numpy().tolist()
    [[[[4.0]]]]
    """

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self) -> str:
        return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, " \
               f"ceil_mode={self.ceil_mode}"


class LPPool1d(_LPPoolNd):
    """``(sum of x ** p over each window) ** (1 / p)`` along L.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.LPPool1d(2, 2)(gc.tensor([[[3.0, 4.0]]])).numpy().tolist()
    [[[5.0]]]
    """

    def forward(self, x):
        return F.lp_pool1d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """``(sum of x ** p over each window) ** (1 / p)`` over (H, W).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.LPPool2d(1, 2)(gc.ones(1, 1, 2, 2)).item()
    4.0
    """

    def forward(self, x):
        return F.lp_pool2d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class _MaxUnpoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding = padding

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """MaxPool1d's partial inverse: zeros with each value at its index along L.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> y, i = nn.MaxPool1d(2, return_indices=True)(gc.tensor([[[1.0, 3.0]]]))
    >>> nn.MaxUnpool1d(2)(y, i).numpy().tolist()
    [[[0.0, 3.0]]]
    """

    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """MaxPool2d's partial inverse: zeros with each value at its flat ``h * W + w`` index.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> y, i = nn.MaxPool2d(2, return_indices=True)(gc.tensor([[[[1.0, 3.0], [4.0, 2.0]]]]))
    >>> nn.MaxUnpool2d(2)(y, i).numpy().tolist()
    [[[[0.0, 0.0], [4.0, 0.0]]]]
    """

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)
