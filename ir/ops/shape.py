"""Shape ops: reshape, flatten, permute, concat, basic slicing and ``full``; gathering rows
(``embedding``) and its scatter-add backward.

Symbolic dims flow through: flattening ``[N,8,4,4]`` from dim 1 gives ``[N,128]``;
from dim 0 it gives ``[N*128]``.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType, dim_div, dim_terms, is_static, numel
from ._shapes import broadcast, fmt_shape, need_float, need_static, norm_axis, result_dtype


def _reshape(in_types, attrs):
    x = in_types[0]
    target = list(attrs["shape"])
    if sum(1 for d in target if d == -1) > 1:
        raise ShapeError(f"reshape: at most one -1 allowed in {tuple(target)}")
    for d in target:
        if d != -1:
            coef, _ = dim_terms(d)
            if coef < 0:
                raise ShapeError(f"reshape: bad dim {d} in {tuple(target)}")
    known = numel([d for d in target if d != -1])
    total = numel(x.shape)
    if -1 in target:
        missing = dim_div(total, known)
        if missing is None:
            raise ShapeError(f"reshape: cannot view {x} as {fmt_shape(target)}")
        target[target.index(-1)] = missing
    elif dim_terms(known) != dim_terms(total):
        raise ShapeError(f"reshape: cannot view {x} ({total} elements) as {fmt_shape(target)}")
    return [x.with_shape(target)]


def _flatten(in_types, attrs):
    x = in_types[0]
    if x.rank == 0:
        return [x.with_shape((1,))]
    start, end = norm_axis(attrs["start_dim"], x.rank), norm_axis(attrs["end_dim"], x.rank)
    if start > end:
        raise ShapeError(f"flatten: start_dim {attrs['start_dim']} comes after end_dim {attrs['end_dim']}")
    return [x.with_shape(x.shape[:start] + (numel(x.shape[start:end + 1]),) + x.shape[end + 1:])]


def _permute(in_types, attrs):
    x = in_types[0]
    perm = [norm_axis(p, x.rank) for p in attrs["perm"]]
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"permute: {tuple(attrs['perm'])} is not a permutation of {x.rank} dims")
    return [x.with_shape(tuple(x.shape[p] for p in perm))]


def _concat(in_types, attrs):
    first = in_types[0]
    if first.rank == 0:
        raise ShapeError("concat needs tensors of rank >= 1")
    axis = norm_axis(attrs["dim"], first.rank)
    total = 0
    for t in in_types:
        if t.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise ShapeError(f"concat: {t} does not match {first} outside dim {axis}")
        if not is_static(t.shape[axis]):
            raise ShapeError(f"concat along the batch dim is not supported in a compiled graph ({t})")
        total += t.shape[axis]
    return [TensorType(first.shape[:axis] + (total,) + first.shape[axis + 1:], result_dtype(in_types))]


def _slice_len(dim, start, stop, step):
    if step is None or step == 0:
        raise ShapeError("slice step must be a non-zero int")
    if is_static(dim):
        return len(range(*slice(start, stop, step).indices(dim)))
    if start in (None, 0) and stop is None and step == 1:
        return dim
    what = "the batch dim" if dim == "N" else f"the symbolic dim {dim}"
    raise ShapeError(f"slicing {what} with bounds [{start}:{stop}:{step}] is not supported in a compiled graph (the "
                     "result size would depend on the size at run time); index it with an int, or keep it whole")


def _slice(in_types, attrs):
    x = in_types[0]
    slices, drop = attrs["slices"], attrs["drop"]
    if len(slices) != x.rank:
        raise ShapeError(f"slice: {len(slices)} index entries for a rank-{x.rank} tensor")
    shape = []
    for axis, (dim, (start, stop, step)) in enumerate(zip(x.shape, slices)):
        if axis in drop:
            if not isinstance(start, int):
                raise ShapeError(f"slice: dim {axis} is integer-indexed, so its entry needs an int start")
            if is_static(dim) and not -dim <= start < dim:
                raise ShapeError(f"index {start} is out of range for dim {axis} of size {dim}")
            continue
        shape.append(_slice_len(dim, start, stop, step))
    return [x.with_shape(shape)]


def _full(in_types, attrs):
    for d in attrs["shape"]:
        if dim_terms(d)[0] < 0:
            raise ShapeError(f"full: negative dim in {tuple(attrs['shape'])}")
    return [TensorType(tuple(attrs["shape"]), attrs["dtype"])]


def _random(in_types, attrs):
    if attrs["distribution"] not in DISTRIBUTIONS:
        raise ShapeError(f"random: distribution must be one of {DISTRIBUTIONS}, got {attrs['distribution']!r}")
    out = _full(in_types, attrs)
    if not out[0].dtype.is_float:
        raise ShapeError(f"random: draws are floating point, got dtype {attrs['dtype']}")
    return out


DISTRIBUTIONS = ("uniform", "normal")


def _broadcast_to(in_types, attrs):
    x, shape = in_types[0], tuple(attrs["shape"])
    if broadcast(x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: {x} does not broadcast to {fmt_shape(shape)}")
    return [x.with_shape(shape)]


def _padding_row(attrs, rows, op):
    pad = attrs["padding_idx"]
    if pad is not None and pad >= rows:
        raise ShapeError(f"{op}: padding_idx {pad} is out of range for {rows} embeddings")


def _need_indices(t, op):
    if t.dtype is not DType.int64:
        raise ShapeError(f"{op} needs int64 indices, got {t.dtype.name}")


def _embedding(in_types, attrs):
    indices, weight = in_types
    if weight.rank != 2:
        raise ShapeError(f"embedding: the weight must be 2-D (num_embeddings, embedding_dim), got {weight}")
    need_static(weight.shape, "embedding", "the weight's shape")
    _need_indices(indices, "embedding")
    _padding_row(attrs, weight.shape[0], "embedding")
    return [TensorType(indices.shape + (weight.shape[1],), weight.dtype)]


def _embedding_grad(in_types, attrs):
    g, indices = in_types
    _need_indices(indices, "embedding_grad")
    if g.rank != indices.rank + 1 or g.shape[:-1] != indices.shape:
        raise ShapeError(f"embedding_grad: cotangent {g} does not match indices {indices}")
    need_static(g.shape[-1:], "embedding_grad", "embedding_dim")
    _padding_row(attrs, attrs["num_embeddings"], "embedding_grad")
    return [TensorType((attrs["num_embeddings"], g.shape[-1]), g.dtype)]


# ---- vjp rules --------------------------------------------------------------------
def _vjp_reshape(b, node, cts, needs):
    return [b.emit1("reshape", [cts[0]], {"shape": list(node.inputs[0].type.shape)})]


def _vjp_permute(b, node, cts, needs):
    rank = node.inputs[0].type.rank
    perm = [p % rank for p in node.attrs["perm"]]
    inverse = [perm.index(i) for i in range(rank)]
    return [b.emit1("permute", [cts[0]], {"perm": inverse})]


def _vjp_concat(b, node, cts, needs):
    axis = norm_axis(node.attrs["dim"], node.outputs[0].type.rank)
    grads, start = [], 0
    for v, need in zip(node.inputs, needs):
        stop = start + v.type.shape[axis]
        slices = [(None, None, 1)] * v.type.rank
        slices[axis] = (start, stop, 1)
        grads.append(b.emit1("slice", [cts[0]], {"slices": slices}) if need else None)
        start = stop
    return grads


def _vjp_slice(b, node, cts, needs):
    return [b.emit1("slice_grad", [cts[0]], {**node.attrs, "shape": list(node.inputs[0].type.shape)})]


def _slice_grad(in_types, attrs):
    x = TensorType(tuple(attrs["shape"]), in_types[0].dtype)
    if _slice([x], attrs)[0].shape != in_types[0].shape:
        raise ShapeError(f"slice_grad: cotangent {in_types[0]} does not match slicing {x}")
    return [x]


def _vjp_embedding(b, node, cts, needs):
    indices, weight = node.inputs
    attrs = {"num_embeddings": weight.type.shape[0], "padding_idx": node.attrs["padding_idx"]}
    return [None, b.emit1("embedding_grad", [cts[0], indices], attrs)]


def _vjp_identity(b, node, cts, needs):
    return [cts[0]]  # broadcast_to: autodiff sums the cotangent back to the input's shape


def _same(in_types, attrs):
    return [in_types[0]]


def _vjp_stop(b, node, cts, needs):
    return [None]  # no gradient flows back: what detach() means


_SLICE_ATTRS = {"slices": Attr("slices"), "drop": Attr("ints", ())}

register(OpDef("reshape", _reshape, attrs={"shape": Attr("dims")}, vjp=_vjp_reshape,
               doc="view with a new shape (-1 inferred)"))
register(OpDef("flatten", _flatten, attrs={"start_dim": Attr("int", 0), "end_dim": Attr("int", -1)},
               vjp=_vjp_reshape))
register(OpDef("permute", _permute, attrs={"perm": Attr("ints")}, vjp=_vjp_permute))
register(OpDef("concat", _concat, attrs={"dim": Attr("int", 0)}, inputs=(1, None), vjp=_vjp_concat))
register(OpDef("slice", _slice, attrs=_SLICE_ATTRS, vjp=_vjp_slice,
               doc="basic indexing: (start, stop, step) per dim; dims in `drop` were integer-indexed"))
register(OpDef("slice_grad", _slice_grad, attrs={**_SLICE_ATTRS, "shape": Attr("dims")},
               doc="scatter a slice's cotangent into zeros of the input shape"))
register(OpDef("full", _full, attrs={"shape": Attr("dims"), "value": Attr("float", finite=False), "dtype": Attr("dtype", "float32")},
               inputs=(0, 0), doc="a tensor filled with one value (shape may use N)"))
register(OpDef("random", _random, attrs={"shape": Attr("dims"), "distribution": Attr("str", "normal"),
                                         "dtype": Attr("dtype", "float32")},
               inputs=(0, 0), effects="random",
               doc="draws from the plan's generator, uniform on [0, 1) or standard normal, every run anew "
                   "(gc.rand/randn with a traced size, gc.rand_like/randn_like of a traced tensor)"))
register(OpDef("broadcast_to", _broadcast_to, attrs={"shape": Attr("dims")}, vjp=_vjp_identity))
register(OpDef("stop_gradient", _same, vjp=_vjp_stop,
               doc="the input unchanged (a view), with no gradient: Tensor.detach() and no_grad() values while traced"))
_PADDING = Attr("int", None, optional=True, minimum=0)  # the row whose gradient stays zero
register(OpDef("embedding", _embedding, attrs={"padding_idx": _PADDING}, inputs=(2, 2), vjp=_vjp_embedding,
               doc="(indices, weight): the weight rows (num_embeddings, dim) that int64 indices pick; "
                   "shape indices.shape + (dim,)"))
register(OpDef("embedding_grad", _embedding_grad, inputs=(2, 2),
               attrs={"num_embeddings": Attr("int", minimum=1), "padding_idx": _PADDING},
               doc="scatter-add of embedding's cotangent into (num_embeddings, dim); padding_idx's row stays zero"))
