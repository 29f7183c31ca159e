"""The 3-D layers with PyTorch's constructor signatures, parameter names and init: Conv3d,
ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d, MaxUnpool3d and
Dropout3d, plus AlphaDropout / FeatureAlphaDropout. Each calls its ``F.`` function
(graphc/ops/functions_conv3d.py, graphc/nn/functional_pool3d.py, functional_more.py).

>>> import graphc as gc
>>> from graphc import nn
>>> nn.Conv3d(2, 4, 3, padding=1)(gc.ones(1, 2, 4, 4, 4)).shape
(1, 4, 4, 4, 4)
"""
from __future__ import annotations

from . import functional as F
from .conv import _ConvTransposeNd
from .layers import Dropout, _ConvNd
from .module import Module
from .pooling import AdaptiveAvgPool1d, AdaptiveMaxPool1d, _MaxPoolNd, _MaxUnpoolNd


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W); weight ``(out, in/groups, kD, kH, kW)``; ``padding``
    ints, 'same' or 'valid'; ``padding_mode`` as Conv2d's.

    >>> from graphc import nn
    >>> nn.Conv3d(3, 8, (1, 3, 3), groups=1).weight.shape
    (8, 3, 1, 3, 3)
    """

    dims = 3

    def forward(self, x):
        return self._conv(F.conv3d, x)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C_in, D, H, W); weight ``(in, out/groups, kD, kH, kW)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ConvTranspose3d(4, 2, 2, stride=2)(gc.ones(1, 4, 2, 3, 3)).shape
    (1, 2, 4, 6, 6)
    """

    dims = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class MaxPool3d(_MaxPoolNd):
    """Max over windows of (N, C, D, H, W) or (C, D, H, W); ``return_indices`` gives flat
    ``d * H * W + h * W + w`` indices (for :class:`MaxUnpool3d`).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.MaxPool3d(2)(gc.arange(8.0).reshape(1, 1, 2, 2, 2)).flatten().numpy().tolist()
    [7.0]
    """

    def forward(self, x):
        return F.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool3d(Module):
    """Mean over windows of (N, C, D, H, W) or (C, D, H, W), with ``avg_pool3d``'s options.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AvgPool3d(2)(gc.arange(8.0).reshape(1, 1, 2, 2, 2)).flatten().numpy().tolist()
    [3.5]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Mean over the adaptive windows giving ``output_size`` (D, H, W).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveAvgPool3d((1, 2, None))(gc.ones(2, 3, 4, 4, 5)).shape
    (2, 3, 1, 2, 5)
    """

    def forward(self, x):
        return F.adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    """Max over the adaptive windows giving ``output_size`` (D, H, W); ``return_indices`` as MaxPool3d's.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AdaptiveMaxPool3d(1)(gc.arange(8.0).reshape(1, 1, 2, 2, 2)).flatten().numpy().tolist()
    [7.0]
    """

    def forward(self, x):
        return F.adaptive_max_pool3d(x, self.output_size, self.return_indices)


class MaxUnpool3d(_MaxUnpoolNd):
    """MaxPool3d's partial inverse: zeros with each value at its flat ``d * H * W + h * W + w`` index.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> y, i = nn.MaxPool3d(2, return_indices=True)(gc.arange(8.0).reshape(1, 1, 2, 2, 2))
    >>> nn.MaxUnpool3d(2)(y, i).flatten().numpy().tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0]
    """

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class Dropout3d(Dropout):
    """Zeroes whole channels of (N, C, D, H, W) (or (C, D, H, W)) with probability ``p`` in training.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Dropout3d(0.5).eval()(gc.ones(1, 2, 1, 1, 1)).flatten().numpy().tolist()
    [1.0, 1.0]
    """

    def forward(self, x):
        return F.dropout3d(x, self.p, self.training)


class AlphaDropout(Dropout):
    """Dropout keeping SELU's self-normalizing mean and variance (``F.alpha_dropout``) in training.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.AlphaDropout(0.2)(gc.ones(3, 4)).shape
    (3, 4)
    """

    def forward(self, x):
        return F.alpha_dropout(x, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    """``AlphaDropout`` of whole channels (``F.feature_alpha_dropout``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.FeatureAlphaDropout(0.2)(gc.ones(3, 4, 5)).shape
    (3, 4, 5)
    """

    def forward(self, x):
        return F.feature_alpha_dropout(x, self.p, self.training)
