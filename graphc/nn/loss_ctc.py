"""``F.ctc_loss``: the connectionist temporal classification loss, as the forward (alpha)
recursion in log space over the blank-extended targets, unrolled over the (static) time dim:
``alpha_t(s) = lse(alpha_{t-1}(s), alpha_{t-1}(s-1), [alpha_{t-1}(s-2)]) + log_probs[t, l'_s]``,
the skip allowed where ``l'_s`` is not blank and differs from ``l'_{s-2}``. Input and target
lengths are read at run time (each sample's alpha is taken at its last frame, its loss from
its last two extended states), so a plan serves any lengths. The gradient is autodiff's of the
recursion, plus PyTorch's ``exp(log_probs)`` term (PyTorch returns the gradient w.r.t. the logits of
a log_softmax, which is what a model's logits receive either way); the log-sum-exp is guarded so
that unreachable states (all -inf) give 0, not NaN, in the backward.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import is_static
from ..ops.surface import torchsymbol
from . import functional as F

_NEG_INF = -math.inf


def _lse(x, dim):
    """log(sum(exp(x))) over ``dim``: -inf (with a zero gradient) where every entry is -inf."""
    top = x.amax(dim, keepdim=True).detach()
    top = apply("where", [top.isinf(), 0.0, top])
    total = (x - top).exp().sum(dim, keepdim=True)
    found = total > 0.0
    out = apply("where", [found, top + apply("where", [found, total, 1.0]).log(), _NEG_INF])
    return out.squeeze(dim)


def _lengths(value):
    """Lengths as an int64 (N,) tensor (a tensor, a list of ints or an int)."""
    t = value if isinstance(value, Tensor) else Tensor(np.asarray(value, np.int64).reshape(-1))
    return t.reshape(-1) if t.ndim == 0 else t


def _shift(x, by):
    """``x`` moved ``by`` states right along dim 1, -inf coming in."""
    return F.pad(x, (by, 0), value=_NEG_INF)[:, :x.dims[1]]


def _padded_targets(targets, target_lengths, blank):
    """(N, S) targets: as given when 2-D; a 1-D concatenation is cut at the lengths' offsets."""
    if targets.ndim == 2:
        return targets
    total = targets.dims[0]
    if not is_static(total):
        raise TraceError("ctc_loss: concatenated 1-D targets must have a static length")
    lengths = target_lengths.cast("float64")
    offsets = lengths.cumsum(0) - lengths
    pos = offsets.unsqueeze(1) + Tensor(np.arange(total, dtype=np.float64))  # (N, S): source position
    hot = pos.unsqueeze(2) == Tensor(np.arange(total, dtype=np.float64))  # (N, S, total)
    picked = apply("where", [hot, targets.cast("float64"), 0.0]).sum(2)
    inside = Tensor(np.arange(total, dtype=np.float64)) < lengths.unsqueeze(1)
    return apply("where", [inside, picked, float(blank)]).round().cast("int64")


@torchsymbol(method=False, top=False)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """CTC loss of ``log_probs`` (T, N, C) (or (T, C)) against ``targets`` (N, S) padded or 1-D
    concatenated, with per-sample ``input_lengths`` and ``target_lengths`` (tensors or ints).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> lp = gc.tensor([[[0.0, -100.0]], [[-100.0, 0.0]]])  # frame 0 surely blank, frame 1 surely class 1
    >>> round(F.ctc_loss(lp, gc.tensor([[1]]), [2], [1], reduction="sum").item(), 4)
    0.0
    """
    if reduction not in ("mean", "sum", "none"):
        raise GraphcError(f"{reduction!r} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ShapeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got {tuple(log_probs.shape)}")
    steps, classes = lp.dims[0], lp.dims[2]
    if not is_static(steps) or not is_static(classes):
        raise TraceError(f"ctc_loss: the time dim ({steps}) and classes ({classes}) must be static: the recursion "
                         "is unrolled over time")
    tgt = targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets
    in_len, tgt_len = _lengths(input_lengths), _lengths(target_lengths)
    tgt = _padded_targets(tgt, tgt_len, blank)
    s_max = tgt.dims[1]
    states = 2 * s_max + 1
    blanks = tgt * 0 + int(blank)
    ext = F.pad(_interleave(blanks, tgt), (0, 1), value=int(blank))  # (N, 2S + 1): blank, t1, blank, ..., blank
    hot = ext.unsqueeze(2) == Tensor(np.arange(classes, dtype=np.int64))  # (N, L', C)
    emit = apply("where", [hot.unsqueeze(0), lp.unsqueeze(2), 0.0]).sum(3)  # (T, N, L')
    index = Tensor(np.arange(states, dtype=np.int64))
    skip = apply("logical_and", [apply("logical_and", [ext != int(blank), ext != _shift_labels(ext, blank)]),
                                 index >= 2])
    alpha = apply("where", [index < 2, emit[0], _NEG_INF])
    last = in_len.unsqueeze(1) - 1  # (N, 1): each sample's last frame
    final = apply("where", [last == 0, alpha, _NEG_INF])
    for t in range(1, steps):
        two = apply("where", [skip, _shift(alpha, 2), _NEG_INF])
        alpha = _lse(_stack3(alpha, _shift(alpha, 1), two), 2) + emit[t]
        final = apply("where", [last == t, alpha, final])
    ends = 2 * tgt_len.unsqueeze(1)  # (N, 1): the last blank; the last label sits just before it
    chosen = apply("logical_or", [index == ends, index == ends - 1])
    loss = -_lse(apply("where", [chosen, final, _NEG_INF]), 1)
    # PyTorch's gradient w.r.t. log_probs is exp(log_probs) plus the true one over each sample's
    # frames (its CTC backward returns the logits' gradient, the same after a log_softmax): a
    # term of value 0 with that gradient keeps the same convention
    frames = (Tensor(np.arange(steps, dtype=np.int64)).unsqueeze(1) < in_len.unsqueeze(0)).cast(lp.dtype.name)
    probs = lp.exp()
    loss = loss + ((probs - probs.detach()).sum(2) * frames).sum(0)
    if zero_infinity:
        loss = apply("where", [loss.isinf(), 0.0, loss])
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return (loss / tgt_len.cast(loss.dtype.name).clamp(min=1.0)).mean()
    return loss.squeeze(0) if unbatched else loss


def _interleave(blanks, tgt):
    """(N, S) blanks and labels -> (N, 2S): blank, t1, blank, t2, ..."""
    from ..ops.creation import stack
    return stack([blanks, tgt], 2).reshape(tgt.shape[0], -1)


def _stack3(a, b, c):
    from ..ops.creation import stack
    return stack([a, b, c], 2)


def _shift_labels(ext, blank):
    """``ext`` moved 2 states right, blank coming in (compared with ``ext`` for the skip rule)."""
    return F.pad(ext, (2, 0), value=int(blank))[:, :ext.dims[1]]
