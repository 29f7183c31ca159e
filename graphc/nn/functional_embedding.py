"""``F.embedding_bag``: sums, means or maxima of bags of embedding rows, as PyTorch's. The bags
are rows of a 2-D ``input``, or runs of a 1-D ``input`` starting at ``offsets``; a membership
mask (bag x position) built from the offsets by comparisons picks each bag's rows, so the bags
follow the offsets' values at run time and the gradient comes from ``embedding``, matmul and
``amax``. Entries equal to ``padding_idx`` are left out of their bag; an empty bag gives zeros.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import is_static
from ..ops.functions_nn import check_embedding_options, padding_row

_MODES = ("sum", "mean", "max")


def _const(like, array):
    from ..executor.backends import backend_of
    if like._tracer is None:
        array = backend_of(like.array).asarray(array)
    return Tensor(array)


def _bag_mask(input, offsets, include_last_offset):
    """(B, L) bool: position ``l`` of the 1-D input is in bag ``b``."""
    length = input.dims[0]
    if not is_static(length):
        raise TraceError(f"embedding_bag: a 1-D input's length ({length}) must not depend on the batch size")
    if offsets is None or offsets.ndim != 1:
        raise ShapeError("embedding_bag: offsets has to be a 1D Tensor when input is 1D")
    bags = offsets.dims[0] - (1 if include_last_offset else 0)
    if not is_static(bags):
        raise TraceError("embedding_bag: the number of bags must not depend on the batch size")
    starts = offsets[:bags]
    if include_last_offset:
        ends = offsets[1:bags + 1]
    else:
        ends = apply("concat", [offsets[1:], _const(offsets, np.array([length], np.int64))], {"dim": 0})
    pos = _const(offsets, np.arange(length, dtype=np.int64)).unsqueeze(0)
    return apply("logical_and", [pos >= starts.unsqueeze(1), pos < ends.unsqueeze(1)])


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """``mode`` ('sum', 'mean' or 'max') of the ``weight`` rows in each bag: (B, dim).
    ``per_sample_weights`` (input's shape) scale the rows in 'sum' mode.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> w = gc.tensor([[1.0], [2.0], [4.0]])
    >>> F.embedding_bag(gc.tensor([0, 1, 2, 2]), w, gc.tensor([0, 2]), mode="sum").numpy().tolist()
    [[3.0], [8.0]]
    """
    check_embedding_options(max_norm, scale_grad_by_freq)
    if mode not in _MODES:
        raise GraphcError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise GraphcError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
                          f"for mode='sum' (got mode='{mode}'). Please open a feature request on GitHub.")
    if weight.ndim != 2:
        raise ShapeError(f"embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    row = padding_row(padding_idx, weight.dims[0]) if is_static(weight.dims[0]) else padding_idx
    if input.ndim == 2:
        if offsets is not None:
            raise GraphcError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated is "
                              "a mini-batch of fixed length sequences")
        member = apply("eq", [input, input])  # (B, L): a 2-D input's rows are its bags
        flat, weights = input, per_sample_weights
    elif input.ndim == 1:
        member = _bag_mask(input, offsets, include_last_offset)  # (B, L)
        flat = input.unsqueeze(0)
        weights = per_sample_weights.unsqueeze(0) if per_sample_weights is not None else None
    else:
        raise ShapeError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if row is not None:
        member = apply("logical_and", [member, flat != row])
    rows = apply("embedding", [input, weight], {"padding_idx": None})  # (B, L, D) or (L, D)
    rows = rows if input.ndim == 2 else rows.unsqueeze(0)  # (1, L, D) against (B, L) membership
    take = member.cast(weight.dtype.name)
    count = take.sum(1, keepdim=True)  # (B, 1)
    if mode == "max":
        best = apply("where", [member.unsqueeze(-1), rows, float("-inf")]).amax(1)
        return apply("where", [count > 0, best, 0.0])
    scale = take * weights if weights is not None else take
    total = (scale.unsqueeze(-1) * rows).sum(1)  # (B, D)
    if mode == "sum":
        return total
    return total / apply("where", [count > 0, count, 1.0])
