"""GEMM kernels: matmul and linear (``x @ w.T + b``), writing into the planner's buffers."""
from __future__ import annotations

from .base import writes_out


def _matmul(xp, spec):
    return writes_out(lambda a, b, out=None: xp.matmul(a, b, out=out))


def linear_kernel(xp, spec):
    has_bias = len(spec.in_types) == 3

    def run(x, w, b=None, out=None):
        out = xp.matmul(x, w.T, out=out)
        if has_bias:
            out += b
        return out
    return writes_out(run)


KERNELS = {"matmul": _matmul, "linear": linear_kernel}
