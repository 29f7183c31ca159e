"""Readers of ONNX's loss ops (see ``readers`` for the contract): NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (with its optional ``log_prob`` output), read as graphc's ``F.nll_loss``
and ``F.log_softmax`` (``composite.composing``). The ``_expanded`` forms of the backend suite are
function bodies of ordinary ops around NegativeLogLikelihoodLoss, so they read through these too.

Semantics decisions:
- inputs are (N, C, d1, ..., dk) with k >= 0 (rank 1 is malformed, as onnx's reference says);
  targets int32 or int64 (cast to int64 for ``F.nll_loss``).
- no ``ignore_index`` attribute means no target is ignored; graphc then passes an index no
  valid target holds (-100 is below 0; a target outside [0, C) has no defined loss in ONNX).
- 'mean' divides by the total weight of the kept targets (their count without weights), as
  the ONNX spec, onnxruntime, PyTorch and onnx's own SoftmaxCrossEntropyLoss reference do.
  onnx's NegativeLogLikelihoodLoss reference alone, with ``ignore_index=-1`` and no weights,
  divides by every target's count (a slip there, ``ignore_index != -1`` for ``is not None``);
  graphc does not copy that.
"""
from __future__ import annotations

import graphc.nn.functional as F  # the composites read here (composite.py)
from .composite import composing
from .shape_readers import _rank

_REDUCTIONS = ("none", "sum", "mean")
_NO_INDEX = -100  # below every valid class index


def _loss_attrs(r, op: str, x):
    attrs = r.attrs()
    reduction = attrs.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise r.error(f"{op} with reduction {reduction!r}: ONNX defines only 'none', 'sum' and 'mean'")
    if _rank(x) < 2:
        raise r.error(f"{op} needs an input of shape (N, C, d1, ...), got rank {_rank(x)}")
    ignore = attrs.get("ignore_index")
    return reduction, _NO_INDEX if ignore is None else int(ignore)


def _nll(t, logp, target, weight, reduction: str, ignore: int):
    """``F.nll_loss`` on traced values; targets of int32 become int64 first."""
    target = t(target)
    if target.dtype.name != "int64":
        target = target.long()
    w = None if weight is None else t(weight)
    if w is not None and w.dtype != logp.dtype:
        w = w.cast(logp.dtype.name)
    return F.nll_loss(logp, target, weight=w, ignore_index=ignore, reduction=reduction)


def _check_target(r, op: str, target):
    dtype = r.value(target).type.dtype.name
    if dtype not in ("int32", "int64"):
        raise r.error(f"{op} with {dtype} targets: ONNX takes int32 or int64 class indices")


def _nll_loss(r, args):
    x, target, weight = (list(args) + [None])[:3]
    reduction, ignore = _loss_attrs(r, "NegativeLogLikelihoodLoss", x)
    _check_target(r, "NegativeLogLikelihoodLoss", target)
    with composing(r) as t:
        return [t.value(_nll(t, t(x), target, weight, reduction, ignore))]


def _softmax_cross_entropy(r, args):
    x, target, weight = (list(args) + [None])[:3]
    reduction, ignore = _loss_attrs(r, "SoftmaxCrossEntropyLoss", x)
    _check_target(r, "SoftmaxCrossEntropyLoss", target)
    with composing(r) as t:
        logp = F.log_softmax(t(x), 1)  # the second output, and the loss's input: one node for both
        return [t.value(_nll(t, logp, target, weight, reduction, ignore)), t.value(logp)]


LOSS_READERS = {"NegativeLogLikelihoodLoss": _nll_loss, "SoftmaxCrossEntropyLoss": _softmax_cross_entropy}
