"""The array of PyTorch's legacy constructors (``torch.Tensor(2, 3)``, ``torch.LongTensor([1, 2])``),
apart from the tensor class so that ``Tensor.__init__`` can use it without an import circle.

>>> legacy_array("int64", ([1, 2],)).tolist(), legacy_array("float32", (2, 3)).shape
([1, 2], (2, 3))
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.types import DType


def legacy_array(dtype, args: tuple) -> np.ndarray:
    """The array ``torch.<Type>Tensor(*args)`` holds: one list/tuple/array is data, ints are sizes."""
    dtype = DType.from_any(dtype).numpy
    if len(args) == 1 and not isinstance(args[0], int):
        data = args[0]
        if hasattr(data, "numpy"):  # a Tensor
            data = data.numpy()
        return np.array(data, dtype=dtype)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in args):
        raise GraphcError(f"Tensor(): expected sizes (non-negative ints) or one sequence of data, got {args!r}")
    return np.zeros(args, dtype)
