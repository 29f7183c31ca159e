"""Kernel of ir/ops/float_steps.py: numpy's (and cupy's) nextafter ufunc, inputs already in
the output dtype (the OpDef promotes them)."""
from __future__ import annotations

from .elementwise import _ufunc

KERNELS = {"nextafter": _ufunc("nextafter")}
