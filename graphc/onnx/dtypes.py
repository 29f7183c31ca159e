"""ONNX's element types as graphc knows them: one table, read both ways (export writes the
code of a DType; import reads the DType of a code), and what a TensorProto of each type holds.

Every numeric ONNX type has a graphc dtype (the low-precision ones through ``ml_dtypes``);
strings (8) and the float6 types (27, 28) have none.
"""
from __future__ import annotations

import math

from ..ir.types import DType

ELEMENT_TYPES = {
    DType.float32: 1, DType.uint8: 2, DType.int8: 3, DType.uint16: 4, DType.int16: 5, DType.int32: 6,
    DType.int64: 7, DType.bool: 9, DType.float16: 10, DType.float64: 11, DType.uint32: 12, DType.uint64: 13,
    DType.complex64: 14, DType.complex128: 15, DType.bfloat16: 16, DType.float8_e4m3fn: 17,
    DType.float8_e4m3fnuz: 18, DType.float8_e5m2: 19, DType.float8_e5m2fnuz: 20, DType.uint4: 21, DType.int4: 22,
    DType.float4_e2m1fn: 23, DType.float8_e8m0fnu: 24, DType.uint2: 25, DType.int2: 26,
}
DTYPES = {code: dtype for dtype, code in ELEMENT_TYPES.items()}  # ONNX code -> DType
TYPE_NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
              9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
              15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
              20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2",
              26: "INT2", 27: "FLOAT6E2M3", 28: "FLOAT6E3M2"}

# the TensorProto field that holds a type's values when they are not raw bytes
TYPED_FIELDS = {1: "float_data", 7: "int64_data", 11: "double_data", 12: "uint64_data", 13: "uint64_data",
                14: "float_data", 15: "double_data",
                **{code: "int32_data" for code in (2, 3, 4, 5, 6, 9, 10, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26)}}
_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}  # packed types: values per byte (and per int32_data entry)


def type_name(code: int) -> str:
    """``1 -> "FLOAT"``: an element type as ONNX names it (the code for one it does not know)."""
    return TYPE_NAMES.get(code, f"element type {code}")


def stored_count(code: int, count: int, raw: bool, itemsize: int) -> int:
    """How many raw bytes (``raw``) or typed-field entries a tensor of ``count`` values holds."""
    bits = _BITS.get(code)
    if bits is not None:  # packed: 8 // bits values per byte, one byte per int32_data entry
        return math.ceil(count * bits / 8)
    if raw:
        return count * itemsize
    return 2 * count if code in (14, 15) else count  # a complex value is two entries
