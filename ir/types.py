"""Dtypes, symbolic dims and tensor types.

A dim is an ``int`` or a symbolic string. The only symbol is ``N`` (the batch size);
flattening the batch dim with others gives products such as ``"N*64"``. Internally a
dim is the monomial ``coef * N**power``; these helpers convert and do arithmetic.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .errors import ShapeError

BATCH = "N"


class DType(enum.Enum):
    """Element types a graph value can have. float16 is reserved for later backends; uint8
    is for raw data such as images (cast it to float in the model, as PyTorch code does)."""

    float32 = "f32"
    float64 = "f64"
    int64 = "i64"
    bool = "b1"
    float16 = "f16"
    uint8 = "u8"

    @property
    def short(self) -> str:
        return self.value

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY_NAMES[self])

    @property
    def is_float(self) -> bool:
        return self in (DType.float32, DType.float64, DType.float16)

    @property
    def category(self) -> int:
        """PyTorch's dtype category: 0 bool < 1 integer < 2 float (what a 0-d operand and an
        in-place result are judged by)."""
        return 2 if self.is_float else 0 if self is DType.bool else 1

    @classmethod
    def from_any(cls, dtype) -> "DType":
        """Accept a DType, its name (``"float32"``), short name (``"f32"``) or numpy dtype."""
        if isinstance(dtype, DType):
            return dtype
        if isinstance(dtype, str) and dtype in _BY_NAME:
            return _BY_NAME[dtype]
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = None
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise ShapeError(f"unsupported dtype {dtype!r}; graphc supports float32, float64, int64, uint8, bool")


_NUMPY_NAMES = {DType.float32: "float32", DType.float64: "float64", DType.int64: "int64",
                DType.bool: "bool", DType.float16: "float16", DType.uint8: "uint8"}
_BY_NAME = {**{d.name: d for d in DType}, **{d.value: d for d in DType}}
_RANK = {DType.bool: 0, DType.uint8: 1, DType.int64: 2, DType.float16: 3, DType.float32: 4, DType.float64: 5}


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op (bool < uint8 < int64 < float16 < float32 < float64)."""
    return a if _RANK[a] >= _RANK[b] else b


# ---- symbolic dims -------------------------------------------------------------

def dim_poly(d) -> tuple[int, int]:
    """``64 -> (64, 0)``, ``"N" -> (1, 1)``, ``"N*64" -> (64, 1)``."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d), 0
    if isinstance(d, str):
        coef, power = 1, 0
        for part in d.split("*"):
            part = part.strip()
            if part == BATCH:
                power += 1
            elif part.isdigit():
                coef *= int(part)
            else:
                raise ShapeError(f"bad symbolic dim {d!r}")
        return coef, power
    raise ShapeError(f"bad dim {d!r}: expected int or symbolic string")


def poly_dim(coef: int, power: int):
    """Inverse of :func:`dim_poly`: ``(64, 1) -> "N*64"``, ``(5, 0) -> 5``."""
    if power == 0:
        return int(coef)
    sym = "*".join([BATCH] * power)
    return sym if coef == 1 else f"{sym}*{coef}"


def dim_mul(a, b):
    ca, pa = dim_poly(a)
    cb, pb = dim_poly(b)
    return poly_dim(ca * cb, pa + pb)


def dim_div(a, b):
    """Exact division of dims, or None when it does not divide."""
    ca, pa = dim_poly(a)
    cb, pb = dim_poly(b)
    if cb == 0 or ca % cb or pa < pb:
        return None
    return poly_dim(ca // cb, pa - pb)


def numel(shape) -> object:
    out = 1
    for d in shape:
        out = dim_mul(out, d)
    return out


def is_static(d) -> bool:
    return dim_poly(d)[1] == 0


def bind_dim(d, n: int) -> int:
    coef, power = dim_poly(d)
    return coef * n ** power


@dataclass(frozen=True)
class TensorType:
    """Shape (ints and symbolic dims) plus dtype, e.g. ``f32[N,128]``.

    >>> str(TensorType(("N", 128), DType.float32))
    'f32[N,128]'
    """

    shape: tuple
    dtype: DType

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(d if isinstance(d, str) else int(d) for d in self.shape))
        object.__setattr__(self, "dtype", DType.from_any(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(is_static(d) for d in self.shape)

    def bind(self, n: int) -> "TensorType":
        """The concrete type at batch size ``n``."""
        return TensorType(tuple(bind_dim(d, n) for d in self.shape), self.dtype)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(str(d) for d in self.shape)}]"
