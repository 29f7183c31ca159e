"""Loss kernels (mirror of ir/ops/loss.py): binary_cross_entropy."""
from __future__ import annotations

from ...ir.errors import GraphcError


def _binary_cross_entropy(xp, spec):
    # PyTorch's CPU kernel, term for term: (y - 1) * max(log1p(-p), -100) - y * max(log(p), -100).
    # The -100 clamp keeps p = 0 or 1 finite; values outside [0, 1] (NaN included) are refused
    # as PyTorch refuses them, rather than silently giving NaN.
    def run(p, y):
        if p.size and not bool(xp.all((p >= 0) & (p <= 1))):
            raise GraphcError("binary_cross_entropy: all elements of input should be between 0 and 1 "
                              "(apply sigmoid first, or use binary_cross_entropy_with_logits)")
        log_p = xp.maximum(xp.log(p), -100)
        log_q = xp.maximum(xp.log1p(-p), -100)
        return (y - 1) * log_q - y * log_p
    return run


KERNELS = {"binary_cross_entropy": _binary_cross_entropy}
