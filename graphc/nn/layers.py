"""Layers with PyTorch's constructor signatures, defaults, parameter names and layouts."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError, ShapeError
from . import functional as F
from . import init
from .module import Module, Parameter


def _count(name: str, value, minimum: int = 1) -> int:
    """Sizes must be ints (bool is not) of at least ``minimum``: a clear error, not numpy's."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GraphcError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _pair_of_counts(name: str, value, minimum: int):
    pair = F._pair(value, name)
    for v in pair:
        _count(name, v, minimum)
    return pair


class Linear(Module):
    """``y = x @ weight.T + bias``; weight is ``(out_features, in_features)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Linear(3, 2).weight.shape
    (2, 3)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features, self.out_features = _count("in_features", in_features), _count("out_features", out_features)
        self.weight = Parameter(init.kaiming_uniform((out_features, in_features)))
        self.bias = Parameter(init.bias_uniform((out_features, in_features), out_features)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    """2-D convolution over NCHW input; weight ``(out, in/groups, kH, kW)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros"):
        super().__init__()
        if padding_mode != "zeros":
            raise GraphcError(f"Conv2d padding_mode={padding_mode!r} is not supported (only 'zeros')")
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            _count(name, value)
        _pair_of_counts("kernel_size", kernel_size, 1)
        _pair_of_counts("stride", stride, 1)
        _pair_of_counts("dilation", dilation, 1)
        if not isinstance(padding, str):
            _pair_of_counts("padding", padding, 0)
        if in_channels % groups or out_channels % groups:
            raise GraphcError(f"Conv2d: in_channels {in_channels} and out_channels {out_channels} "
                              f"must be divisible by groups {groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = F._pair(kernel_size, "kernel_size")
        self.stride, self.dilation = F._pair(stride, "stride"), F._pair(dilation, "dilation")
        self.padding = padding if isinstance(padding, str) else F._pair(padding, "padding")
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(init.kaiming_uniform(shape))
        self.bias = Parameter(init.bias_uniform(shape, out_channels)) if bias else None

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class _BatchNorm(Module):
    _ranks: tuple = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__()
        if momentum is None:
            raise GraphcError(f"{type(self).__name__}(momentum=None) is not supported; pass a float")
        _count("num_features", num_features)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(np.ones(num_features, np.float32)) if affine else None
        self.bias = Parameter(np.zeros(num_features, np.float32)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, np.float32))
            self.register_buffer("running_var", np.ones(num_features, np.float32))
            self.register_buffer("num_batches_tracked", np.array(0, np.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x):
        if x.ndim not in self._ranks:
            raise ShapeError(f"{type(self).__name__} expects a {' or '.join(f'{r}-D' for r in self._ranks)} "
                             f"input, got {x.ndim}-D {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}({self.num_features}) got {x.shape[1]} channels")
        use_batch_stats = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            F.assign(self.num_batches_tracked, self.num_batches_tracked + 1)
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_batch_stats, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input."""
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input."""
    _ranks = (4,)


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, x):
        return F.relu(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return F.flatten(x, self.start_dim, self.end_dim)


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training (scaled by 1/(1-p)); identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise GraphcError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode
        F._no_ceil(ceil_mode, "MaxPool2d")

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override
        F._no_ceil(ceil_mode, "AvgPool2d")

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


