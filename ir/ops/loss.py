"""Loss primitives: only where a composite of other ops would differ from PyTorch.

``binary_cross_entropy(p, y)`` is the elementwise (unweighted, unreduced) loss
``-(y * max(log p, -100) + (1 - y) * max(log(1 - p), -100))``. It is a primitive because of
its gradient: PyTorch differentiates it as ``(p - y) / max(p * (1 - p), 1e-12)``, which is
finite (0 or +-1e12) at saturated probabilities p = 0 or 1, where autodiff through the
clamped logs gives NaN (0 / 0) or a different value (-1 at p = y = 1). Sigmoid outputs
saturate to exactly 1.0 in float32 from x ~ 17 on, so training code meets these points.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import OpDef, register
from ._shapes import fmt_shape, need_float
from ._vjp import scalar

BCE_EPSILON = 1e-12  # PyTorch's EPSILON in binary_cross_entropy_backward


def _binary_cross_entropy(in_types, attrs):
    p, y = in_types
    need_float(p, "binary_cross_entropy")
    if y.dtype is not p.dtype or y.shape != p.shape:
        raise ShapeError(f"binary_cross_entropy: target {y.dtype.name}{fmt_shape(y.shape)} must have the "
                         f"input's dtype and shape {p.dtype.name}{fmt_shape(p.shape)}")
    return [p]


def _vjp_binary_cross_entropy(b, node, cts, needs):
    """PyTorch's formulas: d/dp = (p - y) / max((1 - p) * p, 1e-12); d/dy = -logit(p)."""
    p, y = node.inputs
    g, dtype = cts[0], p.type.dtype
    one_minus_p = b.emit1("sub", [scalar(b, 1.0, dtype), p])
    grad_p = grad_y = None
    if needs[0]:
        denominator = b.emit1("maximum", [b.emit1("mul", [one_minus_p, p]), scalar(b, BCE_EPSILON, dtype)])
        grad_p = b.emit1("mul", [g, b.emit1("div", [b.emit1("sub", [p, y]), denominator])])
    if needs[1]:
        logit = b.emit1("log", [b.emit1("div", [p, one_minus_p])])
        grad_y = b.emit1("neg", [b.emit1("mul", [g, logit])])
    return [grad_p, grad_y]


register(OpDef("binary_cross_entropy", _binary_cross_entropy, inputs=(2, 2), vjp=_vjp_binary_cross_entropy,
               doc="elementwise -(y*max(log p, -100) + (1-y)*max(log(1-p), -100)); p must lie in [0, 1]"))
