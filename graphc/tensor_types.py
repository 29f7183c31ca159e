"""PyTorch's legacy tensor constructors: ``torch.Tensor(2, 3)`` (sizes) or ``torch.Tensor([1, 2])``
(data), and ``FloatTensor``, ``DoubleTensor``, ``LongTensor``, ``BoolTensor`` the same way with
their dtype; ``isinstance(t, gc.FloatTensor)`` checks the dtype, as PyTorch's does. A tensor
made from sizes holds zeros (PyTorch leaves it uninitialized: fill it before reading it).
``get_default_dtype``/``set_default_dtype``: graphc's default is float32 and stays so.

>>> import graphc as gc
>>> gc.Tensor(2, 3).shape, gc.Tensor([1, 2]).dtype, gc.LongTensor([1, 2]).numpy().tolist()
((2, 3), <DType.float32: 'f32'>, [1, 2])
>>> isinstance(gc.DoubleTensor(2), gc.DoubleTensor), isinstance(gc.zeros(2), gc.LongTensor)
(True, False)
"""
from __future__ import annotations

from .core.legacy import legacy_array
from .core.tensor import Tensor
from .ir.errors import GraphcError
from .ir.types import DType


class _LegacyType(type):
    def __call__(cls, *args):
        return Tensor(legacy_array(cls.dtype, args))

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype


class FloatTensor(metaclass=_LegacyType):
    """``torch.FloatTensor(2, 3)`` (zeros of that shape) or ``torch.FloatTensor([1, 2])``: float32."""
    dtype = DType.float32


class DoubleTensor(metaclass=_LegacyType):
    """``torch.DoubleTensor(...)``: float64, from sizes or data."""
    dtype = DType.float64


class LongTensor(metaclass=_LegacyType):
    """``torch.LongTensor(...)``: int64, from sizes or data."""
    dtype = DType.int64


class BoolTensor(metaclass=_LegacyType):
    """``torch.BoolTensor(...)``: bool, from sizes (False) or data."""
    dtype = DType.bool


def get_default_dtype():
    """graphc's default floating-point dtype: float32.

    >>> import graphc as gc
    >>> gc.get_default_dtype()
    <DType.float32: 'f32'>
    """
    return DType.float32


def set_default_dtype(dtype) -> None:
    """Accepts float32 (the default, which stays); any other dtype is refused with a GraphcError,
    since graphc's factories and layers create float32.

    >>> import graphc as gc
    >>> gc.set_default_dtype(gc.float32)
    """
    if DType.from_any(dtype) is not DType.float32:
        raise GraphcError(f"set_default_dtype({dtype!r}): graphc's default dtype is float32 and cannot be changed; "
                          "pass dtype= to the factory or call module.to(dtype) instead")
