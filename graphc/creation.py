"""Creating tensors (``gc.tensor``, ``zeros``, ``randn`` ...) and free functions on them."""
from __future__ import annotations

import numpy as np

from .dispatch import apply
from .ir.errors import GraphcError
from .ir.types import DType
from .random import generator
from .tensor import Tensor, shape_args

_DEFAULT_FLOAT = np.float32


def _dtype(dtype, default=_DEFAULT_FLOAT):
    return DType.from_any(dtype).numpy if dtype is not None else np.dtype(default)


def tensor(data, dtype=None) -> Tensor:
    """An eager tensor from array-like data (Python floats become float32, ints int64).

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0]).dtype
    <DType.float32: 'f32'>
    """
    if isinstance(data, Tensor):
        array = data.numpy()
    else:
        array = np.array(data)
    if dtype is not None:
        array = array.astype(_dtype(dtype))
    elif array.dtype == np.float64 and not isinstance(data, np.ndarray):
        array = array.astype(_DEFAULT_FLOAT)
    DType.from_any(array.dtype)  # refuse dtypes graphc has no kernels for
    return Tensor(np.ascontiguousarray(array) if array.ndim else array)


def from_numpy(array: np.ndarray) -> Tensor:
    """Wrap a numpy array without copying (its dtype is kept)."""
    if not isinstance(array, np.ndarray):
        raise GraphcError(f"from_numpy expects a numpy array, got {type(array).__name__}")
    DType.from_any(array.dtype)
    return Tensor(array)


def zeros(*shape, dtype=None) -> Tensor:
    return Tensor(np.zeros(shape_args(shape), dtype=_dtype(dtype)))


def ones(*shape, dtype=None) -> Tensor:
    return Tensor(np.ones(shape_args(shape), dtype=_dtype(dtype)))


def full(shape, value, dtype=None) -> Tensor:
    return Tensor(np.full(tuple(shape), value, dtype=_dtype(dtype)))


def rand(*shape, dtype=None) -> Tensor:
    """Uniform [0, 1) samples from graphc's seeded generator."""
    return Tensor(generator().random(shape_args(shape)).astype(_dtype(dtype)))


def randn(*shape, dtype=None) -> Tensor:
    """Standard normal samples from graphc's seeded generator."""
    return Tensor(generator().standard_normal(shape_args(shape)).astype(_dtype(dtype)))


def zeros_like(t: Tensor, dtype=None) -> Tensor:
    return zeros(*t.shape, dtype=dtype if dtype is not None else t.dtype)


def ones_like(t: Tensor, dtype=None) -> Tensor:
    return ones(*t.shape, dtype=dtype if dtype is not None else t.dtype)


def arange(start, stop=None, step=1, dtype=None) -> Tensor:
    """Like ``torch.arange``: ints give int64, floats float32."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is None:
        dtype = DType.int64 if values.dtype.kind in "iu" else DType.float32
    return Tensor(values.astype(_dtype(dtype)))


def stack(tensors, dim: int = 0) -> Tensor:
    tensors = list(tensors)
    return cat([t.unsqueeze(dim) for t in tensors], dim=dim)


class no_grad:
    """Accepted for PyTorch compatibility: eager graphc never records gradients."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def cat(tensors, dim: int = 0) -> Tensor:
    return apply("concat", list(tensors), {"dim": dim})


concat = cat


