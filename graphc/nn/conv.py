"""Transposed convolutions and sliding-block modules with PyTorch's signatures, defaults,
parameter names, shapes and init: ConvTranspose1d/2d (weight ``(in, out/groups, *kernel)``,
``forward(input, output_size=None)``), Unfold and Fold."""
from __future__ import annotations

from ..ir.errors import GraphcError
from ..ops.functions_conv import ntuple
from . import functional as F
from . import init
from .layers import int_at_least
from .module import Module, Parameter


class _ConvTransposeNd(Module):
    """Shared by ConvTranspose1d/2d: weight ``(in, out/groups, *kernel)``, kaiming-uniform init
    with PyTorch's fan-in (``out/groups * prod(kernel)``)."""

    dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if padding_mode != "zeros":
            raise GraphcError(f'Only "zeros" padding mode is supported for {name}, got {padding_mode!r}')
        if isinstance(padding, str):
            raise GraphcError(f"{name} takes no string padding, got {padding!r}")
        for what, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            int_at_least(what, value)
        if in_channels % groups or out_channels % groups:
            raise GraphcError(f"{name}: in_channels {in_channels} and out_channels {out_channels} "
                              f"must be divisible by groups {groups}")
        n = self.dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(kernel_size, n, "kernel_size", 1)
        self.stride = ntuple(stride, n, "stride", 1)
        self.padding = ntuple(padding, n, "padding")
        self.output_padding = ntuple(output_padding, n, "output_padding")
        self.dilation = ntuple(dilation, n, "dilation", 1)
        self.padding_mode, self.transposed = padding_mode, True
        shape = (in_channels, out_channels // groups) + self.kernel_size
        self.weight = Parameter(init.kaiming_uniform(shape))
        self.bias = Parameter(init.bias_uniform(shape, out_channels)) if bias else None
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def _output_padding(self, input, output_size) -> tuple:
        """PyTorch's rule: the output_padding that gives ``output_size`` (its last dims)."""
        if output_size is None:
            return self.output_padding
        n = self.dims
        output_size = [int(s) for s in output_size]
        spatial = input.shape[-n:]
        if len(output_size) == n + (2 if input.ndim == n + 2 else 1):
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise GraphcError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} or "
                              f"{n + 2} elements (got {len(output_size)})")
        out = []
        for d in range(n):
            low = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                   + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            high = low + self.stride[d] - 1
            if not low <= output_size[d] <= high:
                raise GraphcError(f"requested an output size of {output_size}, but valid sizes range from "
                                  f"{low} to {high} (for an input of {list(spatial)})")
            out.append(output_size[d] - low)
        return tuple(out)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}")
        if any(self.padding):
            s += f", padding={self.padding}"
        if any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W); weight ``(in, out/groups, kH, kW)``.
    ``forward(input, output_size=None)`` picks the output_padding that gives ``output_size``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> up = nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1)
    >>> up.weight.shape, up(gc.ones(2, 64, 16, 16)).shape
    ((64, 32, 4, 4), (2, 32, 32, 32))
    >>> nn.ConvTranspose2d(2, 2, 3, stride=2)(gc.ones(1, 2, 4, 4), output_size=[10, 10]).shape
    (1, 2, 10, 10)
    """

    dims = 2

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C_in, L); weight ``(in, out/groups, k)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> up = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1)
    >>> up.weight.shape, up(gc.ones(3, 4, 10)).shape
    ((4, 2, 3), (3, 2, 20))
    """

    dims = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class Unfold(Module):
    """Extract sliding blocks (F.unfold): (N, C, H, W) -> (N, C * kH * kW, L).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Unfold(kernel_size=(2, 3))(gc.ones(2, 5, 3, 4)).shape
    (2, 30, 4)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Combine sliding blocks into an image, summing overlaps (F.fold): (N, C * kH * kW, L) ->
    (N, C, *output_size).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(gc.ones(1, 12, 12)).shape
    (1, 3, 4, 5)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")
