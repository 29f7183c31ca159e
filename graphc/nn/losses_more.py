"""More loss functions with PyTorch's signatures (issue #34): the margin losses, the Poisson and
Gaussian negative log-likelihoods, the triplet losses and ``linear_cross_entropy``. Each is a
composite of graph ops written as ATen writes it (same formula, same clamps), so the gradient
comes from the ops' vjp rules, and a compiled plan keeps its batch dim symbolic. Class indices
are picked with ``one_hot`` products rather than gathers (graphc's one_hot is differentiable
through the product and compiles).
"""
from __future__ import annotations

import math

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from .losses_functional import _check_reduction, _legacy_reduction, _reduce, cross_entropy


def _where(cond, a, b):
    return apply("where", [cond, a, b])


def _reduction(size_average, reduce, reduction):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return reduction


def _one_hot(index, classes, like):
    """``one_hot(index)`` in ``like``'s float dtype (negative indices give a zero row)."""
    if not isinstance(classes, int):
        raise ShapeError(f"one-hot over the symbolic dim {classes}: the number of classes must be static")
    safe = _where(index < 0, 0, index)
    hot = apply("one_hot", [safe], {"num_classes": int(classes), "dtype": like.dtype.name})
    return hot * (index >= 0).unsqueeze(-1).cast(like.dtype.name)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos - margin)`` where ``target == -1``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> x = gc.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> F.cosine_embedding_loss(x, x, gc.tensor([1.0, -1.0]), reduction="none").numpy().tolist()
    [0.0, 1.0]
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or input1.dims != input2.dims:
        raise ShapeError(f"cosine_embedding_loss: inputs must be two 1-D or 2-D tensors of one shape, got "
                         f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    dim = 0 if input1.ndim == 1 else 1
    eps = 1e-12  # ATen's EPSILON, added to each squared magnitude
    prod = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cos = prod / mag.sqrt()
    pos = _where(target == 1, 1.0 - cos, 0.0)
    neg = _where(target == -1, (cos - float(margin)).clamp(min=0.0), 0.0)
    return _reduce(pos + neg, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 * (log(var) + (input - target)**2 / var)`` (plus ``0.5 * log(2 pi)`` when ``full``),
    ``var`` clamped to ``eps`` without changing its gradient, as PyTorch does.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.gaussian_nll_loss(gc.tensor([1.0]), gc.tensor([3.0]), gc.tensor([2.0])).item(), 4)
    1.3466
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise GraphcError("gaussian_nll_loss: var has negative entry/entries")
        var = input * 0.0 + float(var)
    if tuple(var.dims) != tuple(input.dims):
        if tuple(input.dims[:-1]) == tuple(var.dims):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim
                  and sum(v for i, v in zip(input.dims, var.dims) if i != v) == 1):
            raise ShapeError(f"gaussian_nll_loss: var is of incorrect size {tuple(var.shape)} for input "
                             f"{tuple(input.shape)}")
    _check_reduction(reduction)
    # PyTorch clamps a clone in place under no_grad: the value is clamped, the gradient is var's
    var = var + (var.clamp(min=float(eps)) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.hinge_embedding_loss(gc.tensor([0.3, 0.3]), gc.tensor([1.0, -1.0]), reduction="none").numpy().tolist()
    [0.30000001192092896, 0.699999988079071]
    """
    reduction = _reduction(size_average, reduce, reduction)
    margin_clamp = (float(margin) - input).clamp(min=0.0)
    out = _where(target != 1, margin_clamp, 0.0) + _where(target != -1, input, 0.0)
    return _reduce(out, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.margin_ranking_loss(gc.tensor([1.0]), gc.tensor([2.0]), gc.tensor([1.0])).item()
    1.0
    """
    reduction = _reduction(size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise ShapeError("margin_ranking_loss: all input tensors should have same dimension but got sizes: "
                         f"input1: {tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)}")
    return _reduce((-target * (input1 - input2) + float(margin)).clamp(min=0.0), reduction)


def _class_input(input, target, name):
    """(N, C) input and (N,) or (N, C) target; a 1-D input is one sample, a 0-d one a single class."""
    if input.ndim > 2:
        raise ShapeError(f"{name}: expected a 0-D, 1-D or 2-D input, got shape {tuple(input.shape)}")
    if input.ndim == 2:
        return input, target, False
    x = input.reshape(1, -1)
    t = target.reshape(1, -1) if target.ndim == input.ndim and name.startswith("multilabel") else target.reshape(1)
    return x, t, True


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """``sum_{i != y} max(0, margin - x[y] + x[i])**p * weight[y] / C`` per sample.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.multi_margin_loss(gc.tensor([[0.1, 0.2, 0.4, 0.8]]), gc.tensor([3])).item(), 4)
    0.325
    """
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise GraphcError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x, t, unbatched = _class_input(input, target, "multi_margin_loss")
    classes = x.dims[1]
    hot = _one_hot(t, classes, x)
    xy = (x * hot).sum(1, keepdim=True)
    z = (float(margin) - xy + x).clamp(min=0.0)
    z = z * z if p == 2 else z
    if weight is not None:
        z = z * (hot * weight.cast(x.dtype.name)).sum(1, keepdim=True)
    loss = (z * (1.0 - hot)).sum(1) / float(classes)
    return _reduce(loss.reshape(()) if unbatched else loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``sum_{j, i} max(0, 1 - (x[y_j] - x[i])) / C`` over the target classes ``y_j`` (``target``
    up to its first -1) and the non-target classes ``i``, per sample.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.multilabel_margin_loss(gc.tensor([[0.1, 0.2, 0.4, 0.8]]), gc.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """
    reduction = _reduction(size_average, reduce, reduction)
    if target.dims != input.dims:
        raise ShapeError(f"multilabel_margin_loss: target {tuple(target.shape)} must have the input's shape "
                         f"{tuple(input.shape)}")
    x, t, unbatched = _class_input(input, target, "multilabel_margin_loss")
    classes = x.dims[1]
    valid = (t >= 0).cast(x.dtype.name).cumprod(1)  # the targets before the first -1
    hot = _one_hot(t, classes, x) * valid.unsqueeze(-1)  # (N, K, C)
    is_target = hot.sum(1).clamp(max=1.0)  # (N, C)
    xy = (hot * x.unsqueeze(1)).sum(2)  # (N, K): x[y_k]
    z = (1.0 - (xy.unsqueeze(2) - x.unsqueeze(1))).clamp(min=0.0)  # (N, K, C)
    loss = (z * valid.unsqueeze(2) * (1.0 - is_target).unsqueeze(1)).sum((1, 2)) / float(classes)
    return _reduce(loss.reshape(()) if unbatched else loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-mean_c(y log sigmoid(x) + (1 - y) log sigmoid(-x))`` per sample.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.multilabel_soft_margin_loss(gc.tensor([[0.0, 0.0]]), gc.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * _logsigmoid(input) + (1.0 - target) * _logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.mean(input.ndim - 1)  # ATen's sum / C
    return _reduce(loss, reduction)


def _logsigmoid(x):
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable both ways
    return x.clamp(max=0.0) - (-x.abs()).exp().log1p()


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """``exp(input) - target * input`` (``log_input``) or ``input - target * log(input + eps)``,
    plus Stirling's ``target * log(target) - target + 0.5 * log(2 pi target)`` where target > 1 when ``full``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.poisson_nll_loss(gc.tensor([0.0]), gc.tensor([2.0])).item()
    1.0
    """
    reduction = _reduction(size_average, reduce, reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + float(eps)).log()
    if full:
        safe = _where(target > 1, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.soft_margin_loss(gc.tensor([0.0]), gc.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce((-input * target).exp().log1p(), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the ``pairwise_distance``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> a = gc.tensor([[0.0, 0.0]])
    >>> round(F.triplet_margin_loss(a, gc.tensor([[1.0, 0.0]]), gc.tensor([[3.0, 0.0]]), eps=0.0).item(), 4)
    0.0
    """
    from .functional_more import pairwise_distance
    reduction = _reduction(size_average, reduce, reduction)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise ShapeError("triplet_margin_loss: anchor, positive and negative must be 1-D or 2-D tensors of one "
                         f"rank, got {tuple(anchor.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}")
    return triplet_margin_with_distance_loss(
        anchor, positive, negative, margin=margin, swap=swap, reduction=reduction,
        distance_function=lambda x, y: pairwise_distance(x, y, p, eps))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` for any ``distance_function`` (default
    ``pairwise_distance``); ``swap`` takes ``min(d(a, n), d(p, n))``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> a = gc.tensor([[0.0, 0.0]])
    >>> F.triplet_margin_with_distance_loss(a, a, a, distance_function=lambda x, y: (x - y).abs().sum(-1)).item()
    1.0
    """
    from .functional_more import pairwise_distance
    _check_reduction(reduction)
    if margin <= 0:
        raise GraphcError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = apply("minimum", [d_neg, dist(positive, negative)])
    return _reduce((float(margin) + d_pos - d_neg).clamp(min=0.0), reduction)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``; ``options`` (PyTorch's
    chunking of the batch, a memory saving) does not change the numbers and is accepted as is.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.linear_cross_entropy(gc.tensor([[1.0, 0.0]]), gc.tensor([[1.0, 0.0], [0.0, 1.0]]),
    ...                              gc.tensor([0])).item(), 4)
    0.3133
    """
    if input.ndim not in (1, 2):
        raise ShapeError(f"linear_cross_entropy: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise ShapeError(f"linear_cross_entropy: expected linear_weight with dimensionality at least 2, got "
                         f"{linear_weight.ndim}")
    out_features = tuple(linear_weight.dims[:-1])
    w = linear_weight.reshape(-1, linear_weight.dims[-1]) if len(out_features) > 1 else linear_weight
    b = linear_bias.reshape(-1) if linear_bias is not None and linear_bias.ndim > 1 else linear_bias
    logits = apply("linear", [input, w] + ([b] if b is not None else []))
    if len(out_features) > 1:
        logits = logits.reshape(-1, *out_features) if input.ndim == 2 else logits.reshape(*out_features)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         label_smoothing=label_smoothing)
