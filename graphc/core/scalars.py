"""PyTorch's rules for Python scalars next to tensors: the dtype a scalar takes, and its array
(unsigned ints wrap around). A leaf fact any room may import."""
from __future__ import annotations

import numpy as np

from ..ir.types import DType


def weak_dtype(scalar, others) -> DType:
    """The dtype a Python scalar takes next to tensors of dtypes ``others`` (PyTorch's rule)."""
    if isinstance(scalar, bool):
        return DType.bool
    if isinstance(scalar, int):
        numeric = [d for d in others if d is not DType.bool]
        return numeric[0] if numeric else DType.int64
    if isinstance(scalar, (complex, np.complexfloating)):  # float64 next to it makes complex128, as in PyTorch
        inexact = [d for d in others if d.is_float or d.is_complex]
        return inexact[0].to_complex if inexact else DType.complex64
    floats = [d for d in others if d.is_float or d.is_complex]
    return floats[0] if floats else DType.float32


def scalar_array(value, dtype: DType):
    """A Python scalar as a 0-d array of ``dtype``; an int out of an unsigned range wraps
    around as in PyTorch (``uint8_tensor + (-2)``), where numpy raises OverflowError."""
    if isinstance(value, int) and not isinstance(value, bool) and not dtype.is_float and dtype is not DType.bool:
        return np.array(value, np.int64).astype(dtype.numpy)
    return np.asarray(value, dtype.numpy)
