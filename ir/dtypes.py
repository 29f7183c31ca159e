"""Element types: :class:`DType` and the promotion rule (:func:`promote`).

Every element type numpy can hold is a graph dtype: numpy's own (bool, the signed and unsigned
integers of 8 to 64 bits, float16/32/64, complex64/128) and the low-precision types of
``ml_dtypes`` (bfloat16, the float8 and float4 formats, int4/uint4 and int2/uint2), which onnx
itself depends on and which ONNX models carry. ``ml_dtypes`` is imported only when one of its
types is used (``DType.numpy``), so graphc runs on numpy alone; a model or plan file that needs
it without it installed gets an error naming the extra (``pip install 'graphc[ml_dtypes]'``).

Compiled training keeps to float32/float64 (``graphc.tracing.refuse_low_precision``); the
narrower floats run in eager tensors and in imported (inference) plans.
"""
from __future__ import annotations

import enum
import functools

import numpy as np

from .errors import GraphcError, ShapeError


class DType(enum.Enum):
    """Element types a graph value can have (the value is the short name the IR prints).

    >>> DType.from_any("int32"), DType.from_any(np.uint16), DType.int8.short
    (<DType.int32: 'i32'>, <DType.uint16: 'u16'>, 'i8')
    """

    float32 = "f32"
    float64 = "f64"
    int64 = "i64"
    bool = "b1"
    float16 = "f16"
    uint8 = "u8"
    complex64 = "c64"
    complex128 = "c128"
    int8 = "i8"
    int16 = "i16"
    int32 = "i32"
    uint16 = "u16"
    uint32 = "u32"
    uint64 = "u64"
    bfloat16 = "bf16"  # the low-precision types below are ml_dtypes' (ONNX's 16, 17-26)
    float8_e4m3fn = "f8e4m3fn"
    float8_e4m3fnuz = "f8e4m3fnuz"
    float8_e5m2 = "f8e5m2"
    float8_e5m2fnuz = "f8e5m2fnuz"
    float8_e8m0fnu = "f8e8m0fnu"
    float4_e2m1fn = "f4e2m1fn"
    int4 = "i4"
    uint4 = "u4"
    int2 = "i2"
    uint2 = "u2"

    @property
    def short(self) -> str:
        return self.value

    @property
    def numpy(self) -> np.dtype:
        return numpy_dtype(self)

    @property
    def is_float(self) -> bool:
        return self in FLOATS

    @property
    def is_complex(self) -> bool:
        return self in (DType.complex64, DType.complex128)

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integers (not bool)."""
        return self in SIGNED or self in UNSIGNED

    @property
    def is_low_precision(self) -> bool:
        """The floats narrower than float32 (float16, bfloat16, float8, float4)."""
        return self in LOW_PRECISION

    @property
    def needs_ml_dtypes(self) -> bool:
        return self in ML_DTYPES

    @property
    def category(self) -> int:
        """PyTorch's dtype category: 0 bool < 1 integer < 2 float < 3 complex (what a 0-d
        operand and an in-place result are judged by)."""
        return 3 if self.is_complex else 2 if self.is_float else 0 if self is DType.bool else 1

    @property
    def to_complex(self) -> "DType":
        """The complex dtype of this precision (float64 -> complex128; others -> complex64)."""
        return DType.complex128 if self in (DType.float64, DType.complex128) else DType.complex64

    @property
    def to_real(self) -> "DType":
        """The real dtype of a complex one (complex64 -> float32); other dtypes are their own."""
        return {DType.complex64: DType.float32, DType.complex128: DType.float64}.get(self, self)

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
        raise ShapeError(f"unsupported dtype {dtype!r}; graphc supports {', '.join(d.name for d in DType)}")


_BY_NAME = {**{d.name: d for d in DType}, **{d.value: d for d in DType}}
SIGNED = (DType.int2, DType.int4, DType.int8, DType.int16, DType.int32, DType.int64)
UNSIGNED = (DType.uint2, DType.uint4, DType.uint8, DType.uint16, DType.uint32, DType.uint64)
LOW_PRECISION = (DType.float16, DType.bfloat16, DType.float8_e4m3fn, DType.float8_e4m3fnuz, DType.float8_e5m2,
                 DType.float8_e5m2fnuz, DType.float8_e8m0fnu, DType.float4_e2m1fn)
FLOATS = (DType.float32, DType.float64) + LOW_PRECISION
ML_DTYPES = frozenset(LOW_PRECISION[1:] + (DType.int4, DType.uint4, DType.int2, DType.uint2))
_FLOAT_BITS = {DType.float64: 64, DType.float32: 32, DType.float16: 16, DType.bfloat16: 16, DType.float4_e2m1fn: 4}


def ml_dtypes_module():
    """The ``ml_dtypes`` package (bfloat16, float8, int4, ...), or a GraphcError naming the extra."""
    try:
        import ml_dtypes
    except ImportError:
        raise GraphcError("this tensor's dtype comes from the ml_dtypes package, which is not installed: "
                          "pip install 'graphc[ml_dtypes]' (onnx installs it too)") from None
    return ml_dtypes


@functools.lru_cache(maxsize=None)
def numpy_dtype(dtype: DType) -> np.dtype:
    """The numpy dtype of ``dtype`` (``ml_dtypes``' for the low-precision types)."""
    if dtype in ML_DTYPES:
        return np.dtype(getattr(ml_dtypes_module(), dtype.name))
    return np.dtype(dtype.name)


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op, PyTorch's rule: bool < integers < floats < complex; among
    integers numpy's (and PyTorch's) widening (uint8 with int8 is int16); among floats the wider,
    and two different narrow floats (float16 with bfloat16) give float32; complex64 with float64
    is complex128.

    >>> promote(DType.uint8, DType.int8), promote(DType.float16, DType.bfloat16), promote(DType.int32, DType.float16)
    (<DType.int16: 'i16'>, <DType.float32: 'f32'>, <DType.float16: 'f16'>)
    """
    if a is b:
        return a
    if a.category != b.category:
        high, low = (a, b) if a.category > b.category else (b, a)
        if high is DType.complex64 and low is DType.float64:
            return DType.complex128
        return high
    if a.is_complex:
        return DType.complex128
    if a.is_float:
        bits_a, bits_b = _FLOAT_BITS.get(a, 8), _FLOAT_BITS.get(b, 8)
        if bits_a == bits_b or (a.is_low_precision and b.is_low_precision and bits_a < 16 and bits_b < 16):
            return DType.float32 if bits_a <= 16 else a  # two different narrow formats: neither holds the other
        return a if bits_a > bits_b else b
    return DType.from_any(np.promote_types(_standard_int(a), _standard_int(b)))


def _standard_int(dtype: DType) -> np.dtype:
    """int2/int4 promote as int8, uint2/uint4 as uint8 (numpy has no rule for ml_dtypes' ints)."""
    narrow = {DType.int2: DType.int8, DType.int4: DType.int8, DType.uint2: DType.uint8, DType.uint4: DType.uint8}
    return np.dtype(narrow.get(dtype, dtype).name)
