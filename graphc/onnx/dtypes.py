"""ONNX's element types as graphc knows them: one table, read both ways (export writes the
code of a DType; import reads the numpy dtype of a code)."""
from __future__ import annotations

from ..ir.types import DType

ELEMENT_TYPES = {DType.float32: 1, DType.uint8: 2, DType.int64: 7, DType.bool: 9, DType.float16: 10,
                 DType.float64: 11}
NUMPY_DTYPES = {code: dtype.numpy for dtype, code in ELEMENT_TYPES.items()}  # the dtypes plans run in
