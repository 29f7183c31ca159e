"""Kernels of ir/ops/bitwise.py: numpy's (and cupy's) bitwise ufuncs, inputs already in the
output dtype (the OpDefs promote them). numpy's shifts give PyTorch's results for shifts by the
width or more and by negative amounts (0 to the left, the sign to the right)."""
from __future__ import annotations

from .elementwise import _ufunc

KERNELS = {"bitwise_and": _ufunc("bitwise_and"), "bitwise_or": _ufunc("bitwise_or"),
           "bitwise_xor": _ufunc("bitwise_xor"), "bitwise_not": _ufunc("invert"),
           "bitwise_left_shift": _ufunc("left_shift"), "bitwise_right_shift": _ufunc("right_shift")}
