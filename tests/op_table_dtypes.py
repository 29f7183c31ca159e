"""Dtype variants of the op table's samples: the same call with integer, bool, mixed int/float,
mixed float32/float64, uint8 and 0-d inputs, for tests/test_dtypes_ops.py to compare with PyTorch.

The variants are derived from each op's first PyTorch-compared sample (tests/op_table.py), so a
new op gets them with no extra list; they change only the sample's floating-point inputs (index
and label inputs keep their integers). Values are converted, never drawn, so this file takes
nothing from the table's seeded generator.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from op_table import F32, F64, I64, OP_INFO, OpInfo

BOOL = np.dtype(np.bool_)
U8 = np.dtype(np.uint8)


def as_dtype(a: np.ndarray, dtype) -> np.ndarray:
    """``a``'s values in ``dtype``: ints are the values doubled and rounded (small, signed, with
    zeros), bools say where the value is positive."""
    dtype = np.dtype(dtype)
    if dtype == I64:
        return np.round(a.astype(F64) * 2).astype(I64)
    if dtype == U8:  # small magnitudes, as images' pixels are unsigned
        return np.round(np.abs(a.astype(F64)) * 2).astype(U8)
    if dtype == BOOL:
        return np.asarray(a > 0)
    return np.asarray(a.astype(dtype))


def zero_dim(a: np.ndarray, dtype) -> np.ndarray:
    """A 0-d tensor of ``dtype`` holding ``a``'s first value (PyTorch promotes 0-d tensors as
    it does Python scalars: a dimensioned tensor's dtype wins within its category)."""
    return as_dtype(np.asarray(a.reshape(-1)[0]), dtype)


def _each(*dtypes):
    """Float input k takes ``dtypes[k]`` (the last one repeats)."""
    def make(floats, inputs):
        return {i: (lambda a, d=dtypes[min(k, len(dtypes) - 1)]: as_dtype(a, d)) for k, i in enumerate(floats)}
    return make


def _rhs_zero_dim(lhs, rhs):
    """The first float input as ``lhs``, the second a 0-d ``rhs``."""
    def make(floats, inputs):
        return {floats[0]: lambda a: as_dtype(a, lhs), floats[1]: lambda a: zero_dim(a, rhs)}
    return make


# name -> (how many float inputs the sample needs, which float input becomes what)
VARIANTS: dict[str, tuple[int, Callable]] = {
    "int64": (1, _each(I64)),
    "bool": (1, _each(BOOL)),
    "f64": (1, _each(F64)),
    "0d-int64": (1, lambda floats, inputs: {floats[0]: lambda a: zero_dim(a, I64)}),
    "int64-f32": (2, _each(I64, F32)),
    "f32-int64": (2, _each(F32, I64)),
    "bool-f32": (2, _each(BOOL, F32)),
    "bool-int64": (2, _each(BOOL, I64)),
    "f32-f64": (2, _each(F32, F64)),
    "f64-f32": (2, _each(F64, F32)),
    "f32-0d-f64": (2, _rhs_zero_dim(F32, F64)),
    "f32-0d-int64": (2, _rhs_zero_dim(F32, I64)),
    "int64-0d-f32": (2, _rhs_zero_dim(I64, F32)),
    "bool-0d-int64": (2, _rhs_zero_dim(BOOL, I64)),
    "int64-0d-bool": (2, _rhs_zero_dim(I64, BOOL)),
    "uint8": (1, _each(U8)),
    "uint8-int64": (2, _each(U8, I64)),
    "uint8-f32": (2, _each(U8, F32)),
    "uint8-0d-int64": (2, _rhs_zero_dim(U8, I64)),
}


def base_sample(info: OpInfo):
    """The sample the variants start from: the first one compared with PyTorch (none for control
    flow: its bodies are typed graphs, so its dtypes are theirs, fixed when they were traced)."""
    if any(hasattr(v, "nodes") for s in info.samples for v in s.attrs.values()):
        return None
    # (a sample checked by its defining properties, as a factorization's, counts: PyTorch's side
    # of it is compared too)
    return next((s for s in info.samples if not s.no_torch and (s.ref is not None or getattr(s, "check", None))),
                None)


def dtype_cases() -> list[tuple[str, str, list, dict]]:
    """``(op, variant, inputs, attrs)`` for every op with a PyTorch counterpart that users
    reach (internal backward and fused ops take float graphs only)."""
    cases = []
    for op, info in sorted(OP_INFO.items()):
        sample = base_sample(info) if info.torch is not None and not info.internal else None
        if sample is None:
            continue
        floats = [i for i, a in enumerate(sample.inputs) if a.dtype.kind == "f"]
        for name, (needs, make) in VARIANTS.items():
            if len(floats) < needs:
                continue
            change = make(floats, sample.inputs)
            inputs = [change[i](a) if i in change else a for i, a in enumerate(sample.inputs)]
            cases.append((op, name, inputs, dict(sample.attrs)))
    return cases
