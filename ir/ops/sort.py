"""Ordering primitives: ``argsort`` (the permutation that sorts along a dim), ``mode_index``
(where the most frequent value of each slice is) and ``searchsorted`` (insertion points in
sorted rows). All three give int64 positions, so none has a gradient of its own: the values
PyTorch returns with them (``sort``, ``kthvalue``, ``median``, ``mode``) are ``gather``s of the
input at these positions (graphc/ops/sorting.py), whose vjp scatters the cotangent back.

Order, as PyTorch's: NaN counts as the largest value (last ascending, first descending), and
the sort is stable (equal values keep their input order, descending too).
``mode_index`` picks the smallest of the most frequent values (each NaN counts alone, as
NaN != NaN) and the LAST position holding it, as PyTorch on CPU.
``nonzero_static(x)``: the first ``size`` index rows of x's non-zero elements (row-major),
padded with ``fill_value`` rows: ``nonzero`` at a size fixed in advance, so it compiles.
``searchsorted(sorted, values)``: ``sorted`` is 1-D or has ``values``' leading dims (one
sorted row per row of ``values``); ``right`` picks the position after equal values.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import norm_axis


def _argsort(in_types, attrs):
    x = in_types[0]
    if x.rank:
        norm_axis(attrs["dim"], x.rank)
    elif attrs["dim"] not in (0, -1):
        raise ShapeError(f"argsort: dim {attrs['dim']} is out of range for a 0-d tensor")
    return [x.with_dtype(DType.int64)]


def _mode_index(in_types, attrs):
    x = in_types[0]
    shape = list(x.shape)
    if x.rank:
        shape[norm_axis(attrs["dim"], x.rank)] = 1
    return [TensorType(tuple(shape), DType.int64)]


def _searchsorted(in_types, attrs):
    seq, values = in_types
    if seq.dtype is DType.bool and values.dtype is DType.bool:
        raise ShapeError("searchsorted does not take two bool tensors (as PyTorch)")
    if seq.rank == 0:
        raise ShapeError("searchsorted: the sorted sequence must have at least one dim, got a 0-d tensor")
    if seq.rank > 1 and (seq.rank != values.rank or tuple(seq.shape[:-1]) != tuple(values.shape[:-1])):
        raise ShapeError(f"searchsorted: a {seq} sorted sequence needs values with the same leading dims "
                         f"{tuple(seq.shape[:-1])}, got {values}")
    return [values.with_dtype(DType.int64)]


def _nonzero_static(in_types, attrs):
    return [TensorType((attrs["size"], in_types[0].rank), DType.int64)]


register(OpDef("argsort", _argsort, attrs={"dim": Attr("int", -1), "descending": Attr("bool", False)},
               doc="x -> int64 permutation sorting x along dim (stable; NaN largest), as torch.argsort(stable=True)"))
register(OpDef("mode_index", _mode_index, attrs={"dim": Attr("int", -1)},
               doc="x -> int64 last position of the smallest most frequent value along dim (kept as size 1)"))
register(OpDef("searchsorted", _searchsorted, attrs={"right": Attr("bool", False)}, inputs=(2, 2),
               doc="(sorted, values) -> int64 insertion points of values in the sorted last dim"))
register(OpDef("nonzero_static", _nonzero_static, attrs={"size": Attr("int", minimum=0), "fill_value": Attr("int", -1)},
               doc="x -> int64 (size, rank) indices of the non-zero elements, cut or padded with fill_value"))
