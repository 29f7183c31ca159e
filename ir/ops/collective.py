"""Collective ops: ``allreduce`` across the processes of a data-parallel job.

One node reduces a bucket of tensors in one message (the kernel packs them into a flat
buffer). Its effect is ``"collective"``: every process must run it, in the same order, so CSE
never merges two and constant folding never runs one while compiling. In a single process
(no process group) it is the identity.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register

REDUCTIONS = ("sum", "mean")


def _allreduce(in_types, attrs):
    if attrs["op"] not in REDUCTIONS:
        raise ShapeError(f"allreduce: op must be one of {', '.join(REDUCTIONS)}, got {attrs['op']!r}")
    if attrs["op"] == "mean" and not all(t.dtype.is_float for t in in_types):
        raise ShapeError("allreduce: a mean needs floating-point tensors")
    return list(in_types)


def _vjp_allreduce(b, node, cts, needs):
    """The sum (mean) over processes of every process's cotangent: an allreduce of the same kind.
    PyTorch's SyncBatchNorm backward reduces its ``sum_dy`` terms the same way."""
    present = [i for i, ct in enumerate(cts) if ct is not None]
    if not present:
        return [None] * len(cts)
    reduced = b.emit("allreduce", [cts[i] for i in present], {"op": node.attrs["op"]})
    grads = [None] * len(cts)
    for i, value in zip(present, reduced):
        grads[i] = value
    return grads


register(OpDef("allreduce", _allreduce, attrs={"op": Attr("str", "mean")}, inputs=(1, None), vjp=_vjp_allreduce,
               effects="collective", doc="(x1, ..., xk) -> their sums or means over the processes, one message"))
