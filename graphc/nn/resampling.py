"""Resampling modules with PyTorch's names, signatures and reprs: ``Upsample``,
``UpsamplingNearest2d``, ``UpsamplingBilinear2d``, ``PixelShuffle`` and ``PixelUnshuffle``
(calls of ``F.interpolate`` / ``F.pixel_shuffle`` / ``F.pixel_unshuffle``).

>>> import graphc as gc
>>> from graphc import nn
>>> nn.Upsample(scale_factor=2, mode="bilinear")(gc.zeros(1, 3, 4, 4)).shape
(1, 3, 8, 8)
"""
from __future__ import annotations

from . import functional_resample as R
from .module import Module


class Upsample(Module):
    """``F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor)``
    as a module (PyTorch's ``nn.Upsample``; a float ``scale_factor`` is stored as a float).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Upsample(scale_factor=2)(gc.tensor([[[1.0, 2.0]]])).numpy()
    array([[[1., 1., 2., 2.]]], dtype=float32)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return R.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest 2-D upsampling (``Upsample(mode='nearest')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.UpsamplingNearest2d(scale_factor=3)(gc.zeros(1, 1, 2, 2)).shape
    (1, 1, 6, 6)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with ``align_corners=True`` (PyTorch's ``nn.UpsamplingBilinear2d``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.UpsamplingBilinear2d(scale_factor=2)(gc.tensor([[[[0.0, 3.0]]]])).numpy()[0, 0]
    array([[0., 1., 2., 3.],
           [0., 1., 2., 3.]], dtype=float32)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """``(*, C * r * r, H, W)`` -> ``(*, C, H * r, W * r)`` (``F.pixel_shuffle``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.PixelShuffle(3)(gc.zeros(1, 9, 4, 4)).shape
    (1, 1, 12, 12)
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return R.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r)`` -> ``(*, C * r * r, H, W)`` (``F.pixel_unshuffle``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.PixelUnshuffle(2)(gc.zeros(1, 1, 4, 4)).shape
    (1, 4, 2, 2)
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return R.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
