"""matmul (numpy semantics) and linear (``x @ w.T + b``, weight ``(out, in)``)."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import OpDef, register
from ..types import TensorType, numel
from ._shapes import broadcast, fmt_shape, need_rank, one_dtype


def _matmul(in_types, attrs):
    a, b = in_types
    if a.rank == 0 or b.rank == 0:
        raise ShapeError("matmul needs inputs of rank >= 1")
    ash = (1,) + a.shape if a.rank == 1 else a.shape
    bsh = b.shape + (1,) if b.rank == 1 else b.shape
    if ash[-1] != bsh[-2]:
        raise ShapeError(f"matmul: inner dims differ: {fmt_shape(a.shape)} @ {fmt_shape(b.shape)}")
    shape = broadcast(ash[:-2], bsh[:-2]) + (ash[-2], bsh[-1])
    if a.rank == 1:
        shape = shape[:-2] + shape[-1:]
    if b.rank == 1:
        shape = shape[:-1]
    return [TensorType(shape, one_dtype(in_types, "matmul"))]


def _transpose_last(b, v):
    perm = list(range(v.type.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return b.emit1("permute", [v], {"perm": perm})


def _as_matrix(b, v, rank1_shape):
    return b.emit1("reshape", [v], {"shape": list(rank1_shape)}) if v.type.rank == 1 else v


def _vjp_matmul(b, node, cts, needs):
    """Work on rank >= 2 views (1-D operands become a row/column), then undo the views."""
    a, w = node.inputs
    a2 = _as_matrix(b, a, (1,) + a.type.shape)
    w2 = _as_matrix(b, w, w.type.shape + (1,))
    g = cts[0]
    g_shape = list(node.outputs[0].type.shape)
    if a.type.rank == 1:
        g_shape.insert(len(g_shape) - (0 if w.type.rank == 1 else 1), 1)
    if w.type.rank == 1:
        g_shape.append(1)
    if list(g.type.shape) != g_shape:
        g = b.emit1("reshape", [g], {"shape": g_shape})
    ga = gw = None
    if needs[0]:
        ga = b.emit1("matmul", [g, _transpose_last(b, w2)])
        if a.type.rank == 1:  # the broadcast sum happens in autodiff; here drop the row dim
            ga = b.emit1("reshape", [ga], {"shape": list(ga.type.shape[:-2]) + [ga.type.shape[-1]]})
    if needs[1]:
        gw = b.emit1("matmul", [_transpose_last(b, a2), g])
        if w.type.rank == 1:
            gw = b.emit1("reshape", [gw], {"shape": list(gw.type.shape[:-1])})
    return [ga, gw]


def need_same_dtype(in_types, op: str) -> None:
    """PyTorch refuses f64 input with f32 weights, int input with float weights (and the
    reverse), and bools: so does graphc (it used to promote, computing what PyTorch refuses)."""
    x, w = in_types[:2]
    if x.dtype is not w.dtype:
        raise ShapeError(f"{op}: input is {x.dtype.name} but weight is {w.dtype.name}; cast the input "
                         f"(x.to(gc.{w.dtype.name})) or the model (model.to(gc.{x.dtype.name}))")
    one_dtype(in_types, op)


def linear_rule(in_types, attrs):
    x, w = in_types[:2]
    need_same_dtype(in_types, "linear")
    need_rank(w, (2,), "linear", "weight")
    if x.rank < 1 or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: input {x} has {x.shape[-1] if x.rank else '?'} features, "
                         f"weight {w} expects {w.shape[1]}")
    if len(in_types) == 3 and in_types[2].shape != (w.shape[0],):
        raise ShapeError(f"linear: bias {in_types[2]} should be [{w.shape[0]}]")
    return [TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)]


def _rows(b, v):
    """View (..., k) as a matrix (rows, k)."""
    if v.type.rank == 2:
        return v
    return b.emit1("reshape", [v], {"shape": [numel(v.type.shape[:-1]), v.type.shape[-1]]})


def linear_vjp(b, node, cts, needs):
    x, w = node.inputs[:2]
    g = cts[0]
    gx = b.emit1("matmul", [g, w]) if needs[0] else None
    gw = b.emit1("matmul", [b.emit1("permute", [_rows(b, g)], {"perm": [1, 0]}), _rows(b, x)]) if needs[1] else None
    grads = [gx, gw]
    if len(node.inputs) == 3:
        grads.append(b.emit1("sum", [g], {"dims": list(range(g.type.rank - 1))}) if needs[2] else None)
    return grads


register(OpDef("matmul", _matmul, inputs=(2, 2), vjp=_vjp_matmul, promotes_inputs=True, accumulates=True,
               doc="numpy matmul semantics, batched"))
register(OpDef("linear", linear_rule, inputs=(2, 3), vjp=linear_vjp, promotes_inputs=True, accumulates=True,
               doc="x @ w.T (+ b); w is (out, in)"))
