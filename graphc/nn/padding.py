"""Padding modules with PyTorch's names, signatures and reprs: ``ReflectionPad1d/2d/3d``,
``ReplicationPad1d/2d/3d``, ``CircularPad1d/2d/3d``, ``ConstantPad1d/2d/3d`` and
``ZeroPad1d/2d/3d``, each a call of ``F.pad`` in its mode. An int ``padding`` pads every
side by that amount; a tuple is ``(left, right[, top, bottom[, front, back]])``.

>>> import graphc as gc
>>> from graphc import nn
>>> nn.ReplicationPad1d((1, 2))(gc.tensor([[[1.0, 2.0]]])).numpy()
array([[[1., 1., 2., 2., 2.]]], dtype=float32)
"""
from __future__ import annotations

from ..ir.errors import GraphcError
from . import functional as F
from .module import Module


def _sides(padding, dims: int, name: str) -> tuple:
    if isinstance(padding, int):
        return (padding,) * (2 * dims)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * dims:
        raise GraphcError(f"{name}: padding must be an int or a tuple of {2 * dims} ints, got {padding!r}")
    return padding


class _PadNd(Module):
    mode = "constant"
    dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _sides(padding, self.dims, type(self).__name__)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ReflectionPad1d(_PadNd):
    """Mirror the last dim without repeating the edge (``F.pad(mode='reflect')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReflectionPad1d(2)(gc.tensor([[[1.0, 2.0, 3.0]]])).numpy()
    array([[[3., 2., 1., 2., 3., 2., 1.]]], dtype=float32)
    """
    mode, dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Mirror the last two dims without repeating the edge (``F.pad(mode='reflect')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReflectionPad2d(1)(gc.zeros(1, 3, 4, 4)).shape
    (1, 3, 6, 6)
    """
    mode, dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Mirror the last three dims without repeating the edge (``F.pad(mode='reflect')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReflectionPad3d(1)(gc.zeros(1, 2, 3, 3, 3)).shape
    (1, 2, 5, 5, 5)
    """
    mode, dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Repeat the edge of the last dim (``F.pad(mode='replicate')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReplicationPad1d((2, 0))(gc.tensor([[[1.0, 2.0]]])).numpy()
    array([[[1., 1., 1., 2.]]], dtype=float32)
    """
    mode, dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Repeat the edges of the last two dims (``F.pad(mode='replicate')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReplicationPad2d((1, 1, 2, 0))(gc.zeros(1, 3, 4, 4)).shape
    (1, 3, 6, 6)
    """
    mode, dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Repeat the edges of the last three dims (``F.pad(mode='replicate')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReplicationPad3d(1)(gc.zeros(1, 2, 3, 3, 3)).shape
    (1, 2, 5, 5, 5)
    """
    mode, dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Wrap the last dim around (``F.pad(mode='circular')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.CircularPad1d(1)(gc.tensor([[[1.0, 2.0, 3.0]]])).numpy()
    array([[[3., 1., 2., 3., 1.]]], dtype=float32)
    """
    mode, dims = "circular", 1


class CircularPad2d(_PadNd):
    """Wrap the last two dims around (``F.pad(mode='circular')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.CircularPad2d(1)(gc.zeros(1, 3, 4, 4)).shape
    (1, 3, 6, 6)
    """
    mode, dims = "circular", 2


class CircularPad3d(_PadNd):
    """Wrap the last three dims around (``F.pad(mode='circular')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.CircularPad3d(1)(gc.zeros(1, 2, 3, 3, 3)).shape
    (1, 2, 5, 5, 5)
    """
    mode, dims = "circular", 3


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value`` (``F.pad(mode='constant')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ConstantPad1d((1, 0), 7.0)(gc.tensor([[1.0, 2.0]])).numpy()
    array([[7., 1., 2.]], dtype=float32)
    """
    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value`` (``F.pad(mode='constant')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ConstantPad2d(1, 0.5)(gc.zeros(1, 2, 2)).numpy()[0, 0]
    array([0.5, 0.5, 0.5, 0.5], dtype=float32)
    """
    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value`` (``F.pad(mode='constant')``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ConstantPad3d(1, 0.0)(gc.zeros(1, 2, 2, 2)).shape
    (1, 4, 4, 4)
    """
    dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ZeroPad1d(1)(gc.tensor([[1.0]])).numpy()
    array([[0., 1., 0.]], dtype=float32)
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    """Pad the last two dims with zeros.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ZeroPad2d((1, 1, 2, 0))(gc.zeros(1, 1, 3, 3)).shape
    (1, 1, 5, 5)
    """
    dims = 2


class ZeroPad3d(ZeroPad1d):
    """Pad the last three dims with zeros.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ZeroPad3d(1)(gc.zeros(1, 1, 1, 1, 1)).shape
    (1, 1, 3, 3, 3)
    """
    dims = 3
