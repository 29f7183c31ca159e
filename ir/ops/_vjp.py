"""Small helpers the vjp rules share (they emit IR through a Builder)."""
from __future__ import annotations

import numpy as np

from ..types import DType


def scalar(b, value, dtype: DType):
    """A 0-d constant of ``dtype`` (printed inline)."""
    return b.constant(np.array(value, dtype=dtype.numpy), dtype)


def keep_shape(shape, axes) -> list:
    return [1 if i in axes else d for i, d in enumerate(shape)]

