"""Readers of ONNX's shape and data-movement ops (see ``readers`` for the contract).

Known arrays are computed on at once; a shape read from a graph value with ``Shape`` is an
object array whose batch entry is the symbolic dim ``"N"``, so that ``x.view(x.size(0), -1)``
exported by PyTorch imports as one ``reshape`` with the symbolic dim in it.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Value
from ..ir.ops._shapes import broadcast
from ..ir.types import DType, dim_div, numel

_INT64_MAX = 2**63 - 1


def _shape(x) -> tuple:
    return tuple(x.type.shape) if isinstance(x, Value) else tuple(np.shape(x))


def _rank(x) -> int:
    return len(_shape(x))


def _known(*args) -> bool:
    return all(a is not None and not isinstance(a, Value) for a in args)


def _ints(array) -> list:
    """A known 1-D int array (or object array of dims) as a list of ints and dim strings."""
    return [d if isinstance(d, str) else int(d) for d in np.asarray(array).reshape(-1).tolist()]


def _raw_axes(r, args, position: int, attrs: dict) -> list | None:
    """Axes from the attribute (older opsets) or from input ``position`` (newer ones)."""
    axes = attrs.get("axes")
    if axes is None and len(args) > position and args[position] is not None:
        axes = _ints(r.static(args[position], "axes"))
    return None if axes is None else [int(a) for a in axes]


def _axes(r, args, position: int, attrs: dict, rank: int) -> list | None:
    """The axes normalized to ``0 <= axis < rank``."""
    axes = _raw_axes(r, args, position, attrs)
    return None if axes is None else [a % rank if rank else 0 for a in axes]


def _constant(r, args):
    attrs = r.attrs()
    if "value" in attrs:
        return [attrs["value"]]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return [np.asarray(attrs[key], dtype)]
    raise r.error(f"Constant with attributes {sorted(attrs)}; graphc reads value, value_float(s), value_int(s)")


def _constant_of_shape(r, args):
    shape = _ints(r.static(args[0], "ConstantOfShape's shape"))
    fill = r.attrs().get("value", np.zeros(1, np.float32)).reshape(-1)[0]
    if all(isinstance(d, int) for d in shape):
        r.allow(shape, np.asarray(fill).dtype, "ConstantOfShape")
        return [np.full(shape, fill)]
    if float(fill) != np.asarray(fill).item():  # an int64 past 2**53 (compared as Python numbers, exactly): full's value is a float, so broadcast the exact one
        return [r.emit("broadcast_to", [np.asarray(fill)], {"shape": shape})]
    dtype = DType.from_any(np.asarray(fill).dtype)
    return [r.emit("full", [], {"shape": shape, "value": float(fill), "dtype": dtype.name})]


def _shape_of(r, args):
    attrs = r.attrs()
    dims = list(_shape(args[0]))[attrs.get("start", 0):attrs.get("end", None)]
    if all(isinstance(d, int) for d in dims):
        return [np.asarray(dims, np.int64)]
    return [np.asarray(dims, object)]


def _reshape(r, args):
    x, target = args[0], _ints(r.static(args[1], "Reshape's shape"))
    if not r.attrs().get("allowzero", 0):  # 0 copies the input's dim
        target = [_shape(x)[i] if d == 0 else d for i, d in enumerate(target)]
    if _known(x) and all(isinstance(d, int) for d in target):
        return [np.reshape(x, target)]
    return [r.emit("reshape", [x], {"shape": target})]


def _flatten(r, args):
    x, shape = args[0], _shape(args[0])
    axis = int(r.attrs().get("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise r.error(f"Flatten axis {axis} of a rank-{len(shape)} input; ONNX allows {-len(shape)} to {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis  # -1 splits off the last dim (x % (rank + 1) was one off)
    target = [numel(shape[:axis]), numel(shape[axis:])]
    if _known(x):
        return [np.reshape(x, target)]
    if axis == 1 and len(shape) > 1:
        return [r.emit("flatten", [x], {"start_dim": 1, "end_dim": -1})]
    return [r.emit("reshape", [x], {"shape": target})]


def _transpose(r, args):
    perm = r.attrs().get("perm") or list(reversed(range(_rank(args[0]))))
    if _known(args[0]):
        return [r.name_like(np.transpose(args[0], perm), args[0])]
    return [r.emit("permute", args[:1], {"perm": list(perm)})]


def _concat(r, args):
    axis = int(r.attrs()["axis"])
    if _known(*args):
        kind = object if any(np.asarray(a).dtype == object for a in args) else None
        return [np.concatenate([np.asarray(a, kind) for a in args], axis=axis)]
    return [r.emit("concat", args, {"dim": axis})]


def _unsqueeze(r, args):
    x, raw = args[0], _raw_axes(r, args, 1, r.attrs()) or []
    rank = _rank(x) + len(raw)  # axes count in the output's dims
    axes = sorted(a % rank for a in raw)
    if _known(x):
        return [np.expand_dims(x, tuple(axes))]
    shape = list(_shape(x))
    for axis in axes:
        shape.insert(axis, 1)
    return [r.emit("reshape", [x], {"shape": shape})]


def _squeeze(r, args):
    x, shape = args[0], _shape(args[0])
    axes = _axes(r, args, 1, r.attrs(), len(shape))
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    if any(shape[a] != 1 for a in axes):
        raise r.error(f"Squeeze of axes {axes} of a tensor of shape {list(shape)}: not all of them are 1")
    if _known(x):
        return [np.squeeze(x, tuple(axes))]
    return [r.emit("reshape", [x], {"shape": [d for i, d in enumerate(shape) if i not in axes]})]


def _slice(r, args):
    if r.version < 10:  # starts, ends and axes were attributes
        attrs = r.attrs()
        axes = attrs.get("axes")
        args = [args[0], np.asarray(attrs["starts"], np.int64), np.asarray(attrs["ends"], np.int64),
                None if axes is None else np.asarray(axes, np.int64)]
    x, shape = args[0], _shape(args[0])
    starts, ends = _ints(r.static(args[1], "Slice's starts")), _ints(r.static(args[2], "Slice's ends"))
    axes = _axes(r, args, 3, {}, len(shape)) or list(range(len(starts)))
    steps = _ints(r.static(args[4], "Slice's steps")) if len(args) > 4 and args[4] is not None else [1] * len(starts)
    slices = [[None, None, 1] for _ in shape]
    for axis, start, end, step in zip(axes, starts, ends, steps):
        to_the_edge = end >= _INT64_MAX if step > 0 else end <= -_INT64_MAX - 1  # "to the end" / "to the start"
        slices[axis] = [start, None if to_the_edge else end, step]
    if _known(x):
        return [np.asarray(x)[tuple(slice(*s) for s in slices)]]
    for axis, (start, end, step) in enumerate(slices):  # graphc's slice takes exact bounds on static dims
        if isinstance(shape[axis], int):
            slices[axis] = list(slice(start, end, step).indices(shape[axis]))
            if slices[axis][1] < 0:
                slices[axis][1] = None  # a reversed slice that runs to the start
    return [r.emit("slice", [x], {"slices": slices})]


def _gather(r, args):
    data, indices = args
    axis = int(r.attrs().get("axis", 0)) % max(_rank(data), 1)
    if _known(data, indices):
        row = math.prod(d for i, d in enumerate(np.shape(data)) if i != axis)
        r.allow([np.size(indices), row], np.asarray(data).dtype, "Gather")
        return [np.take(data, np.asarray(indices).astype(np.int64), axis=axis)]
    if _known(data) and axis == 0 and np.ndim(data) == 2:  # an embedding table read by index
        return [r.emit("embedding", [indices, data])]
    if _known(indices) and np.ndim(indices) == 0:  # x[:, i]: one index on one axis
        index = int(indices)
        slices = [[None, None, 1] for _ in _shape(data)]
        slices[axis] = [index, None, 1]
        return [r.emit("slice", [data], {"slices": slices, "drop": [axis]})]
    raise r.error("Gather of a graph tensor by an index array; graphc imports table lookups (embeddings) and "
                  "single constant indices")


def _expand(r, args):
    x, target = args[0], _ints(r.static(args[1], "Expand's shape"))
    shape = broadcast(_shape(x), tuple(target))
    if _known(x) and all(isinstance(d, int) for d in shape):
        r.allow(shape, np.asarray(x).dtype, "Expand")
        return [np.broadcast_to(x, shape).copy()]
    return [r.emit("broadcast_to", [x], {"shape": list(shape)})]


def _split_sizes(r, args, dim) -> list:
    attrs = r.attrs()
    sizes = attrs.get("split")
    if sizes is None and len(args) > 1 and args[1] is not None:
        sizes = _ints(r.static(args[1], "Split's sizes"))
    if sizes is None:
        parts = int(attrs.get("num_outputs", len(r.node.output)))
        size = dim_div(dim, parts)
        if size is None:  # onnx's reference: parts of ceil(dim / parts), the last one smaller
            size = -(-dim // parts) if isinstance(dim, int) and parts > 0 else 0
            if size == 0 or dim - size * (parts - 1) <= 0:
                raise r.error(f"Split of a dim of {dim} into {parts} parts (equal ones, or ceil-sized ones and "
                              "a smaller last one)")
            return [size] * (parts - 1) + [dim - size * (parts - 1)]
        sizes = [size] * parts
    return list(sizes)


def _split(r, args):
    x = args[0]
    axis = int(r.attrs().get("axis", 0)) % _rank(x)
    dim = _shape(x)[axis]
    if not isinstance(dim, int):
        raise r.error("Split along the batch dim; graphc splits static dims only")
    outputs, start = [], 0
    for size in _split_sizes(r, args, dim):
        slices = [[None, None, 1] for _ in _shape(x)]
        slices[axis] = [start, start + size, 1]
        outputs.append(np.asarray(x)[tuple(slice(*s) for s in slices)] if _known(x)
                       else r.emit("slice", [x], {"slices": slices}))
        start += size
    return outputs


def _range(r, args):
    # onnx's spec asks for scalars; its reference (and its own function expansions) pass 1-element arrays too
    start, limit, delta = (_scalar(r, r.static(a, "Range's bounds"), "Range's bounds") for a in args)
    if any(v.dtype == object for v in (start, limit, delta)):
        return [_symbolic_range(r, start, limit, delta)]
    dtype = np.result_type(start, limit, delta)
    if float(delta) == 0:
        raise r.error("Range with a step of 0")
    r.allow([max(0, math.ceil((float(limit) - float(start)) / float(delta)))], dtype, "Range")
    return [np.arange(start, limit, delta, dtype=dtype)]


def _symbolic_range(r, start, limit, delta) -> Value:
    """``Range(0, N, 1)`` with the batch dim (or ``N*k``) as its limit: the dynamo exporter's
    index arithmetic for ``as_strided`` (a flatten after a pool). A run-time iota of that length,
    the running sum of ones minus one; other symbolic bounds are refused."""
    if start.dtype == object or delta.dtype == object or int(start) != 0 or int(delta) != 1:
        raise r.error(f"Range({start}, {limit}, {delta}) over a symbolic dim; graphc imports Range(0, N, 1)")
    dtype = DType.from_any(np.result_type(start, delta))  # the static bounds' type (the limit is a dim)
    ones = r.emit("full", [], {"shape": [limit.item()], "value": 1.0, "dtype": dtype.name})
    running = r.emit("cumulative", [ones], {"kind": "sum", "dim": 0, "reverse": False})
    return r.emit("sub", [running, np.asarray(1, dtype.numpy)])


def _scalar(r, value, what: str) -> np.ndarray:
    value = np.asarray(value)
    if value.size != 1:
        raise r.error(f"{what} must be scalars, got shape {list(value.shape)}")
    return value.reshape(())


SHAPE_READERS = {
    "Constant": _constant, "ConstantOfShape": _constant_of_shape, "Shape": _shape_of, "Reshape": _reshape,
    "Flatten": _flatten, "Transpose": _transpose, "Concat": _concat, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Slice": _slice, "Gather": _gather, "Expand": _expand, "Split": _split, "Range": _range,
}
