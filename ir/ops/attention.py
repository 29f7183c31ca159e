"""The attention core as one op: ``attention`` is ``softmax(q @ k.T * scale + mask) @ v`` over
the last two dims, and ``attention_grad`` its fused backward.

- ``attention(q, k, v[, mask])``: q ``(..., L, E)``, k ``(..., S, E)``, v ``(..., S, Ev)`` with
  the same leading (batch, head) dims -> ``(..., L, Ev)``. A bool ``mask`` keeps the positions
  that are True, a float one (of q's dtype) is added to the scores; either broadcasts to
  ``(..., L, S)``. ``is_causal`` keeps ``j <= i`` (``tril(ones(L, S))``). A query whose every key
  is left out gets zeros (PyTorch's ``scaled_dot_product_attention``). The kernel works one
  head group at a time with the scores in one buffer: the ``(..., L, S)`` weights are never a
  graph value, so nothing of that size is planned, saved or exported.
- ``attention_grad(g, q, k, v[, mask])`` -> ``(dq, dk, dv[, dmask])``: recomputes the
  weights ``P`` per head group from the inputs (neither they nor the output are saved), then
  ``dv = P.T @ g``, ``dP = g @ v.T``, ``dS = P * (dP - rowsum(dP * P))``, ``dq = dS @ k * scale``,
  ``dk = dS.T @ q * scale``;
  ``dmask`` (``mask_grad``, a float mask that needs a gradient) is ``dS`` at ``(..., L, S)``,
  which autodiff sums to the mask's shape.
"""
from __future__ import annotations

from ..errors import GraphcError, ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType
from ._shapes import broadcast, expect_same, fmt_shape, need_float

_ATTRS = {"scale": Attr("float"), "is_causal": Attr("bool", False)}


def check_attention(q, k, v, mask, op: str = "attention"):
    """The shape rule's checks; returns (leading dims, L, S)."""
    need_float(q, op)
    for what, t in (("key", k), ("value", v)):
        if t.dtype is not q.dtype:
            raise ShapeError(f"{op}: query is {q.dtype.name} but {what} is {t.dtype.name}")
        if t.rank != q.rank:
            raise ShapeError(f"{op}: query {q}, key {k} and value {v} must have one rank")
    if q.rank < 2:
        raise ShapeError(f"{op}: query, key and value need at least 2 dims, got {q}")
    lead = q.shape[:-2]
    if k.shape[:-2] != lead or v.shape[:-2] != lead:
        raise ShapeError(f"{op}: query {q}, key {k} and value {v} must have the same leading dims")
    if k.shape[-1] != q.shape[-1]:
        raise ShapeError(f"{op}: query {q} and key {k} differ in the embedding dim")
    if v.shape[-2] != k.shape[-2]:
        raise ShapeError(f"{op}: key {k} and value {v} differ in the source length")
    scores = lead + (q.shape[-2], k.shape[-2])
    if mask is not None:
        if mask.dtype is not DType.bool and mask.dtype is not q.dtype:
            raise ShapeError(f"{op}: the mask must be bool or {q.dtype.name} (the query's dtype), "
                             f"got {mask.dtype.name}")
        if mask.rank > len(scores) or broadcast(mask.shape, scores) != scores:
            raise ShapeError(f"{op}: mask {mask} does not broadcast to the scores {fmt_shape(scores)}")
    return lead, q.shape[-2], k.shape[-2]


def _no_causal_mask(in_types, attrs, count, op):
    if attrs["is_causal"] and len(in_types) == count:
        raise ShapeError(f"{op}: is_causal cannot be combined with a mask (as PyTorch's scaled_dot_product_attention)")


def _attention(in_types, attrs):
    q, k, v = in_types[:3]
    _no_causal_mask(in_types, attrs, 4, "attention")
    check_attention(q, k, v, in_types[3] if len(in_types) == 4 else None)
    return [q.with_shape(q.shape[:-1] + (v.shape[-1],))]


def _vjp_attention(b, node, cts, needs):
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) == 4 else None
    mask_grad = bool(mask is not None and mask.type.dtype.is_float and needs[3])
    attrs = {"scale": node.attrs["scale"], "is_causal": node.attrs["is_causal"], "mask_grad": mask_grad}
    grads = b.emit("attention_grad", [cts[0], q, k, v] + ([mask] if mask is not None else []), attrs)
    out = [g if need else None for g, need in zip(grads[:3], needs[:3])]
    if mask is not None:
        out.append(grads[3] if mask_grad else None)
    return out


def _attention_grad(in_types, attrs):
    g, q, k, v = in_types[:4]
    mask = in_types[4] if len(in_types) == 5 else None
    _no_causal_mask(in_types, attrs, 5, "attention_grad")
    lead, length, source = check_attention(q, k, v, mask, "attention_grad")
    expect_same(g, q.with_shape(q.shape[:-1] + (v.shape[-1],)), "attention_grad", "cotangent")
    if attrs["mask_grad"] and (mask is None or not mask.dtype.is_float):
        raise GraphcError("attention_grad: mask_grad needs a float mask")
    outs = [q, k, v]
    if attrs["mask_grad"]:
        outs.append(q.with_shape(lead + (length, source)))
    return outs


register(OpDef("attention", _attention, attrs=_ATTRS, inputs=(3, 4), vjp=_vjp_attention,
               doc="softmax(q @ k.T * scale + mask) @ v per head group, (q, k, v[, mask]) -> out; the weights "
                   "are never a graph value"))
register(OpDef("attention_grad", _attention_grad, attrs={**_ATTRS, "mask_grad": Attr("bool", False)}, inputs=(4, 5),
               doc="(g, q, k, v[, mask]) -> (dq, dk, dv[, dmask]), the weights recomputed per head group"))
