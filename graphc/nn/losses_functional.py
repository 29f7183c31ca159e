"""Loss functions written with graph ops (so their backward comes from the op vjp rules)."""
from __future__ import annotations

from ..dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import DType

REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise GraphcError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def mse_loss(input, target, reduction="mean"):
    _check_reduction(reduction)
    if input.dims != target.dims:
        raise ShapeError(f"mse_loss: input {input.dims} and target {target.dims} differ")
    diff = input - target
    return _reduce(diff * diff, reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Log-softmax over dim 1, then the negative log-likelihood of integer class targets
    (or of class probabilities when ``target`` is floating point)."""
    _check_reduction(reduction)
    if weight is not None:
        raise GraphcError("cross_entropy(weight=...) is not supported")
    if not 0.0 <= label_smoothing <= 1.0:
        raise GraphcError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if input.ndim < 1:
        raise ShapeError("cross_entropy needs an input of shape (N, C) or (N, C, ...)")
    class_dim = 0 if input.ndim == 1 else 1
    classes = int(input.shape[class_dim])
    logp = apply("log_softmax", [input], {"dim": class_dim})
    keep = None
    if target.dtype is DType.int64:
        expected = input.dims[:class_dim] + input.dims[class_dim + 1:]
        if target.dims != expected:
            raise ShapeError(f"cross_entropy: class targets of shape {target.dims} do not match "
                             f"input {input.dims} (expected {expected})")
        keep = target != ignore_index  # ignored targets add nothing and are not counted
        target = apply("where", [keep, target, 0])
        probs = apply("one_hot", [target], {"num_classes": classes, "dtype": input.dtype.name})
        if input.ndim > 2:  # (N, d1.., C) -> (N, C, d1..)
            probs = probs.permute([0, probs.ndim - 1] + list(range(1, probs.ndim - 1)))
    elif target.dtype.is_float:
        if target.dims != input.dims:
            raise ShapeError(f"cross_entropy: probability targets {target.dims} must match input {input.dims}")
        probs = target
    else:
        raise ShapeError(f"cross_entropy targets must be int64 classes or float probabilities, got {target.dtype.name}")
    if label_smoothing:
        probs = probs * (1.0 - label_smoothing) + label_smoothing / classes
    loss = -(probs * logp).sum(dim=class_dim)
    if keep is None:
        return _reduce(loss, reduction)
    kept = keep.cast(input.dtype)
    loss = loss * kept
    return loss.sum() / kept.sum() if reduction == "mean" else _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """``max(x, 0) - x*y + log1p(exp(-|x|))``: stable for large |x|."""
    _check_reduction(reduction)
    if pos_weight is not None:
        raise GraphcError("binary_cross_entropy_with_logits(pos_weight=...) is not supported")
    if input.dims != target.dims:
        raise ShapeError(f"binary_cross_entropy_with_logits: input {input.dims} and target {target.dims} differ")
    loss = input.relu() - input * target + (-input.abs()).exp().log1p()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
