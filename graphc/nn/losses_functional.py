"""Loss functions with PyTorch's signatures and semantics, written with graph ops so that their
backward comes from the ops' vjp rules (one definition serves eager calls, traced models and
compiled training steps). ``binary_cross_entropy`` is the one loss with a primitive of its own
(ir/ops/loss.py): PyTorch's gradient at saturated probabilities is not the derivative of any
composite.

Every loss reduces with ``reduction`` = ``'mean'`` | ``'sum'`` | ``'none'`` (``kl_div`` also
``'batchmean'``); the deprecated ``size_average`` / ``reduce`` flags map onto it as in PyTorch.
A ``'mean'`` counts elements at run time, so a compiled plan keeps its batch dim symbolic.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import DType
from ..core.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


# ---- reductions and argument checks ---------------------------------------------------------
def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """PyTorch's mapping of the deprecated ``size_average`` / ``reduce`` flags (None means True)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    legacy = "none" if not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{legacy}' instead.",
                  UserWarning, stacklevel=3)
    return legacy


def _check_reduction(reduction, allowed=REDUCTIONS):
    if reduction not in allowed:
        raise GraphcError(f"{reduction!r} is not a valid value for reduction (expected one of {allowed})")


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def as_loss_tensor(value):
    """A numpy array as an eager Tensor (its dtype kept: int64 class targets stay int64)."""
    return Tensor(value) if isinstance(value, np.ndarray) else value


def _as_tensor(value, like) -> Tensor:
    """A weight given as a Tensor, numpy array or list, in ``like``'s dtype."""
    t = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
    return t.cast(like.dtype) if t.dtype is not like.dtype else t


def _warn_if_broadcast(input, target, name):
    # PyTorch broadcasts mismatched shapes with this warning (an (N, 1) input against an (N,)
    # target silently becomes (N, N)); graphc keeps PyTorch's numbers and its warning.
    if input.dims != target.dims:
        warnings.warn(f"{name}: using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def _same_size_weight(weight, input, name):
    weight = _as_tensor(weight, input)
    if weight.dims != input.dims:
        raise ShapeError(f"{name}: weights {tuple(weight.shape)} and input {tuple(input.shape)} "
                         "must have the same size")
    return weight


def _reduce_pointwise(loss, input, reduction, weight, name):
    """Reduce mse_loss / l1_loss; with ``weight`` (the input's size) PyTorch's 'mean' divides
    by the sum of the weights."""
    if weight is None:
        return _reduce(loss, reduction)
    weight = _same_size_weight(weight, input, name)
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


# ---- regression losses --------------------------------------------------------------------
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, reduced.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> float(F.mse_loss(gc.tensor([1.0, 3.0]), gc.tensor([1.0, 1.0])))
    2.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_if_broadcast(input, target, "mse_loss")
    diff = input - target
    return _reduce_pointwise(diff * diff, input, reduction, weight, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced (gradient ``sign(input - target)``, 0 at ties).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.l1_loss(gc.tensor([1.0, 3.0]), gc.tensor([2.0, 1.0]), reduction="none").numpy()
    array([1., 2.], dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_if_broadcast(input, target, "l1_loss")
    return _reduce_pointwise((input - target).abs(), input, reduction, weight, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta`` (``beta=0``: l1_loss).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.smooth_l1_loss(gc.tensor([0.5, 3.0]), gc.tensor([0.0, 0.0]), reduction="none").numpy()
    array([0.125, 2.5  ], dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise GraphcError(f"smooth_l1_loss does not support negative values for beta, got {beta}")
    _warn_if_broadcast(input, target, "smooth_l1_loss")
    diff = input - target
    if beta == 0.0:  # PyTorch's special case: exactly l1_loss (no division by zero)
        return _reduce(diff.abs(), reduction)
    size = diff.abs()
    loss = apply("where", [size < beta, diff * diff * (0.5 / beta), size - 0.5 * beta])
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.huber_loss(gc.tensor([0.5, 3.0]), gc.tensor([0.0, 0.0]), reduction="none", delta=2.0).numpy()
    array([0.125, 4.   ], dtype=float32)
    """
    _check_reduction(reduction)
    if not delta > 0:
        raise GraphcError(f"huber_loss does not support non-positive values for delta, got {delta}")
    _warn_if_broadcast(input, target, "huber_loss")
    diff = input - target
    size = diff.abs()
    loss = apply("where", [size < delta, diff * diff * 0.5, (size - 0.5 * delta) * delta])
    if weight is not None:  # PyTorch: the weighted 'mean' is a plain mean of weighted terms
        loss = loss * _same_size_weight(weight, input, "huber_loss")
    return _reduce(loss, reduction)


# ---- classification losses ----------------------------------------------------------------
def _class_dim(input, name) -> int:
    if input.ndim < 1:
        raise ShapeError(f"{name} needs an input of shape (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    return 0 if input.ndim == 1 else 1


def _class_targets(input, target, class_dim, ignore_index, name):
    """(bool one-hot of the targets laid out like ``input``, bool mask of non-ignored targets).
    Ignored targets (any value, -100 included) are replaced by class 0 before the one-hot, and
    every use of the one-hot is masked with ``keep``."""
    expected = input.dims[:class_dim] + input.dims[class_dim + 1:]
    if target.dims != expected:
        raise ShapeError(f"{name}: class targets of shape {tuple(target.shape)} do not match input "
                         f"{tuple(input.shape)} (expected {expected})")
    keep = target != ignore_index
    safe = apply("where", [keep, target, 0])
    hot = apply("one_hot", [safe], {"num_classes": int(input.shape[class_dim]), "dtype": "bool"})
    if input.ndim > 2:  # (N, d1.., C) -> (N, C, d1..)
        hot = hot.permute([0, hot.ndim - 1] + list(range(1, hot.ndim - 1)))
    return hot, keep


def _class_weight(weight, input, class_dim, name):
    """``weight`` (C,) shaped to broadcast along the class dim: (C, 1, ..., 1)."""
    weight = _as_tensor(weight, input)
    classes = int(input.shape[class_dim])
    if weight.dims != (classes,):
        raise ShapeError(f"{name}: weight tensor should be defined either for all {classes} classes or no "
                         f"classes but got weight tensor of shape {tuple(weight.shape)}")
    trailing = input.ndim - class_dim - 1
    return weight.reshape([classes] + [1] * trailing) if trailing else weight


def _masked_mean(loss, keep, target_weight, reduction):
    """Ignored targets give 0; 'mean' divides by the kept targets' total weight (their count
    without weights), so a batch with every target ignored gives 0 / 0 = NaN, as PyTorch."""
    loss = apply("where", [keep, loss, 0.0])
    if reduction != "mean":
        return _reduce(loss, reduction)
    if target_weight is None:
        return loss.sum() / keep.cast(loss.dtype).sum()
    return loss.sum() / apply("where", [keep, target_weight, 0.0]).sum()


def _picked_nll(logp, hot, weight):
    """Per target ``-weight[y] * logp[y]`` and ``weight[y]`` (None without weights). The pick is a
    ``where``, not a product with the one-hot: ``0 * -inf`` (log of a zero probability, or a
    class masked with a -inf logit) in another class would give NaN."""
    class_dim = 0 if logp.ndim == 1 else 1
    picked = apply("where", [hot, logp, 0.0]).sum(dim=class_dim)
    if weight is None:
        return -picked, None
    target_weight = apply("where", [hot, weight, 0.0]).sum(dim=class_dim)
    return -(picked * target_weight), target_weight


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of integer class targets: ``-weight[y] * input[y]`` for each target,
    where ``input`` holds log-probabilities (``log_softmax`` output) along dim 1 (dim 0 for 1-D).
    'mean' divides by the total weight of the non-ignored targets.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> logp = gc.tensor([[-0.5, -1.0], [-2.0, -0.25]])
    >>> float(F.nll_loss(logp, gc.tensor([0, 1])))
    0.375
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    input, target = as_loss_tensor(input), as_loss_tensor(target)
    class_dim = _class_dim(input, "nll_loss")
    if target.dtype is not DType.int64:
        raise ShapeError(f"nll_loss needs int64 class targets, got {target.dtype.name}")
    hot, keep = _class_targets(input, target, class_dim, ignore_index, "nll_loss")
    w = _class_weight(weight, input, class_dim, "nll_loss") if weight is not None else None
    loss, target_weight = _picked_nll(input, hot, w)
    return _masked_mean(loss, keep, target_weight, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """``log_softmax`` over the class dim, then the negative log-likelihood of integer class
    targets, or of class probabilities when ``target`` is floating point.

    With class targets this is PyTorch's ``(1 - s) * nll + s / C * smooth`` per target (``s`` the
    label smoothing, ``smooth = -sum_c weight[c] * logp[c]``), ignored targets zeroed; 'mean'
    divides by the total weight of the non-ignored targets. Probability targets ignore
    ``ignore_index``, and their 'mean' divides by the number of samples (weights or not).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> loss = F.cross_entropy(gc.tensor([[2.0, 0.0], [0.0, 2.0]]), gc.tensor([0, 0]), weight=gc.tensor([1.0, 3.0]))
    >>> round(float(loss), 4)
    1.1269
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    input, target = as_loss_tensor(input), as_loss_tensor(target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise GraphcError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim = _class_dim(input, "cross_entropy")
    logp = apply("log_softmax", [input], {"dim": class_dim})
    w = _class_weight(weight, input, class_dim, "cross_entropy") if weight is not None else None
    if target.dtype is DType.int64:
        hot, keep = _class_targets(input, target, class_dim, ignore_index, "cross_entropy")
        loss, target_weight = _picked_nll(logp, hot, w)
        if label_smoothing:  # only then: with s = 0, PyTorch never forms the smoothing sum
            smooth = -(logp * w if w is not None else logp).sum(dim=class_dim)
            loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / int(input.shape[class_dim]))
        return _masked_mean(loss, keep, target_weight, reduction)
    if not target.dtype.is_float:
        raise ShapeError(f"cross_entropy targets must be int64 classes or float probabilities, got {target.dtype.name}")
    if target.dims != input.dims:
        raise ShapeError(f"cross_entropy: probability targets {tuple(target.shape)} must match input "
                         f"{tuple(input.shape)}")
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / int(input.shape[class_dim])
    if w is not None:
        target = target * w
    return _reduce(-(target * logp).sum(dim=class_dim), reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-weight * (y * log(p) + (1 - y) * log(1 - p))`` for probabilities ``p`` in [0, 1], each
    log clamped to >= -100 as in PyTorch (so p = 0 or 1 stays finite); the gradient is PyTorch's
    ``(p - y) / max(p * (1 - p), 1e-12)``. Inputs outside [0, 1] raise.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> p, y = gc.tensor([1.0, 0.0, 0.5]), gc.tensor([1.0, 1.0, 0.0])
    >>> F.binary_cross_entropy(p, y, reduction="none").numpy().round(4)
    array([ -0.    , 100.    ,   0.6931], dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.dims != input.dims:
        raise ShapeError(f"binary_cross_entropy: using a target size ({tuple(target.shape)}) that is different "
                         f"to the input size ({tuple(input.shape)}) is not supported; ensure they have the same size")
    loss = apply("binary_cross_entropy", [input, target.cast(input.dtype)])
    if weight is not None:
        loss = loss * _as_tensor(weight, input)
    return _reduce(loss, reduction)


def _softplus(z):
    """``log(1 + exp(z))`` without overflow. ``maximum`` splits its gradient 0.5/0.5 at z = 0 and
    ``abs`` gives 0 there, so the gradient at 0 is sigmoid(0) = 0.5 exactly (``relu`` would give 0)."""
    return apply("maximum", [z, 0.0]) + (-z.abs()).exp().log1p()


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """PyTorch's stable form ``(1 - y) * x + (1 + (pos_weight - 1) * y) * softplus(-x)``
    (``pos_weight`` broadcasts along the last dim, one value per class).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(float(F.binary_cross_entropy_with_logits(gc.tensor([0.0]), gc.tensor([1.0]))), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input.dims != target.dims:
        raise ShapeError(f"binary_cross_entropy_with_logits: target size {tuple(target.shape)} must be the same "
                         f"as input size {tuple(input.shape)}")
    log_weight = 1.0 if pos_weight is None else (_as_tensor(pos_weight, input) - 1.0) * target + 1.0
    loss = (1.0 - target) * input + log_weight * _softplus(-input)
    if weight is not None:
        loss = loss * _as_tensor(weight, input)
    return _reduce(loss, reduction)


def _xlogy_self(t):
    """``t * log(t)`` with 0 where t == 0 (PyTorch's ``xlogy(t, t)``); the inner ``where`` keeps
    log's argument at 1 there, so the gradient stays finite too."""
    zero = t == 0.0
    return apply("where", [zero, 0.0, t * apply("where", [zero, 1.0, t]).log()])


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence with ``input`` as log-probabilities: pointwise
    ``target * (log(target) - input)`` (``exp(target) * (target - input)`` when ``log_target``).
    ``'batchmean'`` divides the sum by the batch size (the true KL divergence); ``'mean'``
    divides by the element count, as PyTorch (which warns about it; graphc does not).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> p = gc.tensor([[0.5, 0.5]])
    >>> float(F.kl_div(p.log(), p, reduction="batchmean"))
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, REDUCTIONS + ("batchmean",))
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _xlogy_self(target) - target * input
    if reduction != "batchmean":
        return _reduce(loss, reduction)
    if loss.ndim == 0:
        return loss
    # sum / batch size, as a mean over dim 0: the batch size stays symbolic in a compiled plan
    return loss.mean(dim=0).sum()
