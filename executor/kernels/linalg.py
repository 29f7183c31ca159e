"""GEMM kernels: matmul and linear (``x @ w.T + b``), writing into the planner's buffers.

A rank-3+ input times a 2-D weight is one GEMM over all its rows (``(..., k)`` viewed as
``(rows, k)``), not numpy's stack of one small GEMM per leading index: measured on ConvNeXt's
MLP, (8, 14, 14, 768) @ (768, 3072) takes 44 ms as one GEMM and 169 ms as a stack.
"""
from __future__ import annotations

from .base import writes_out


def _rows_times(xp, a, b, out):
    """``a @ b`` for a 2-D ``b``, one GEMM over ``a``'s rows when they are contiguous."""
    if a.ndim < 3 or b.ndim != 2 or a.size == 0 or not a.flags.c_contiguous:
        return xp.matmul(a, b, out=out)
    rows = a.reshape(-1, a.shape[-1])
    if out is None:
        return xp.matmul(rows, b).reshape(*a.shape[:-1], b.shape[-1])
    if not out.flags.c_contiguous:
        return xp.matmul(a, b, out=out)
    xp.matmul(rows, b, out=out.reshape(-1, b.shape[-1]))
    return out


def _matmul(xp, spec):
    return writes_out(lambda a, b, out=None: _rows_times(xp, a, b, out))


def linear_kernel(xp, spec):
    has_bias = len(spec.in_types) == 3

    def run(x, w, b=None, out=None):
        out = _rows_times(xp, x, w.T, out)
        if has_bias:
            out += b
        return out
    return writes_out(run)


KERNELS = {"matmul": _matmul, "linear": linear_kernel}
