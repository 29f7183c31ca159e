"""ONNX import of control flow: ``If`` as ``cond``, ``Scan`` as ``scan``, ``Loop`` as
``while_loop`` or ``scan``.

An ONNX subgraph may read any name of the graphs around it; a graphc body reads only its own
inputs. A :class:`BodyReader` reads a subgraph with the enclosing reader as its parent: a name
it does not define is looked up outside, a Value found there becomes an input of the body
(``captured``) and a trailing operand of the node, as ``gc.cond`` does with a closure's
tensors. Arrays known while importing (initializers, Constants, shapes) stay known inside the
body, so shape arithmetic still folds; one used as a tensor becomes a constant of the
enclosing graph, captured the same way (a body holds no constants). Nested subgraphs capture
through every level.

- ``If``: both branches read the same operands (the union of what either captured). A
  predicate known while importing picks its branch at once: its nodes are read in place.
- ``Scan`` (opsets 9+): per-input axes and directions become one ``scan`` over dim 0 reading
  in the first input's direction; other inputs are moved to dim 0 and flipped where their
  direction differs, outputs flipped and moved to their axes after. ``Scan`` of opset 8
  (a batch dim first, the sequence dim second) is a scan over the batch whose body scans one
  item's sequence; its ``sequence_lens`` must be absent or the full length.
- ``Loop`` without scan outputs: a ``while_loop`` carrying an iteration counter and the
  condition next to the loop's values; its cond body is ``i < M`` and/or the condition.
- ``Loop`` with scan outputs: their length is the number of iterations, and graphc's shapes
  are static, so the trip count must be known while importing and the loop must not be able
  to stop early (its condition absent or true, and the body's condition output true); then it
  is a ``scan`` over ``arange(M)``, the iteration number being the scanned input.
"""
from __future__ import annotations

import re

import numpy as np

from ..ir.builder import Builder
from ..ir.errors import show
from ..ir.graph import Graph, Value
from ..ir.ops.control import step_type
from ..ir.types import DType, TensorType
from .graph_reader import GraphReader, clean_name, tensor_array
from .shape_readers import _known, _shape

_I64, _BOOL = TensorType((), DType.int64), TensorType((), DType.bool)


class BodyReader(GraphReader):
    """Reads one ONNX subgraph into a body graph inside ``parent`` (the model's reader or another
    BodyReader), with the parent's table of readers. Inputs come first, as the caller binds them
    (:meth:`bind`), then the captured values (:func:`join` orders them across bodies)."""

    def __init__(self, parent: GraphReader, name: str):  # noqa: super().__init__ reads a model; this shares one
        self.parent = parent
        for key in ("readers", "onnx", "model", "where", "budget", "external", "opset", "opsets", "version",
                    "graphc_made", "array_names", "node"):
            setattr(self, key, getattr(parent, key))
        self.meta = dict(parent.meta)
        self.scope = f" in subgraph {show(name)}{parent.scope}"
        name = re.sub(r"__\d+$", "", name) if parent.graphc_made else name  # the export's unique suffix
        self.graph = Graph(clean_name(name, "body"))
        self.builder = Builder(self.graph)
        self.env, self.constants = {}, {}
        self.formal: list[Value] = []
        self.captured: dict[int, Value] = {}  # id(the parent's Value) -> the body input reading it
        self.outer: list[Value] = []

    def knows(self, name: str) -> bool:
        return name in self.env or self.parent.knows(name)

    def lookup(self, name: str):
        if name in self.env:
            return self.env[name]
        found = self.parent.lookup(name)
        return self.capture(found) if isinstance(found, Value) else found

    def capture(self, outer: Value) -> Value:
        """The body input reading the parent's Value ``outer``."""
        if id(outer) not in self.captured:
            self.captured[id(outer)] = self._input("captured", outer.type)
            self.outer.append(outer)
        return self.captured[id(outer)]

    def take(self, x) -> Value:
        """The body input reading ``x``, a Value or known array of the parent."""
        return self.capture(self.parent.value(x))

    def value(self, x) -> Value:
        return x if isinstance(x, Value) else self.take(x)  # a known array: a constant outside, captured

    def _input(self, base: str, ttype) -> Value:
        value = self.graph.add_input(Value(self.graph.unique_name(base, self.builder._taken), ttype))
        self.builder.reserve(value.name)
        return value

    def bind(self, name: str | None, ttype) -> Value:
        """A formal input of the body, standing for the ONNX name ``name`` (if any)."""
        value = self._input(clean_name(name or "", "arg"), ttype)
        self.formal.append(value)
        if name:
            self.env[name] = value
        return value

    def read(self, onnx_graph) -> list:
        """Read the subgraph's initializers and nodes; returns its outputs (Values or arrays)."""
        if onnx_graph.sparse_initializer:
            raise self.error(f"subgraph {show(onnx_graph.name)} has sparse initializers, which graphc does not import")
        for tensor in onnx_graph.initializer:
            self.env[tensor.name] = tensor_array(self.onnx, tensor, self.where, f"initializer {show(tensor.name)}",
                                                 self.external)
        for index, node in enumerate(onnx_graph.node):
            self._read_node(index, node)
        outputs = []
        for info in onnx_graph.output:
            if not self.knows(info.name):
                raise self.error(f"subgraph {show(onnx_graph.name)} output {show(info.name)} is not computed")
            outputs.append(self.lookup(info.name))
        return outputs

    def finish(self, outputs: list) -> Graph:
        self.graph.outputs = [self.value(x) for x in outputs]
        return self.graph


def join(bodies: list) -> list:
    """Give every body one input per value any of them captured, in one shared order after its
    formal inputs; returns those values of the parent (the node's trailing operands)."""
    order: dict[int, Value] = {}
    for body in bodies:
        for v in body.outer:
            order.setdefault(id(v), v)
    for body in bodies:
        caps = [body.captured.get(key) or body._input("unused", v.type) for key, v in order.items()]
        body.graph.inputs = body.formal + caps
    return list(order.values())


def _types(values) -> str:
    return "(" + ", ".join(str(v.type) for v in values) + ")"


def _scalar(r, x, dtype: DType, what: str):
    """A one-element ``x`` as a 0-d tensor of ``dtype`` (a trip count, a condition)."""
    if _known(x):
        array = np.asarray(x)
        if array.size != 1:
            raise r.error(f"{what} must have one element, got shape {list(array.shape)}")
        return array.reshape(()).astype(dtype.numpy)
    if any(d != 1 for d in x.type.shape):
        raise r.error(f"{what} must have one element, got {x.type}")
    if x.type.dtype is not dtype:
        x = r.emit("cast", [x], {"dtype": dtype.name})
    return r.emit("reshape", [x], {"shape": []}) if x.type.rank else x


# ---- If ---------------------------------------------------------------------------------------
def _inline(r, branch) -> list:
    """A branch chosen while importing: its nodes read into ``r`` in place."""
    node, meta = r.node, r.meta
    for tensor in branch.initializer:
        r.env[tensor.name] = tensor_array(r.onnx, tensor, r.where, f"initializer {show(tensor.name)}", r.external)
    for index, inner in enumerate(branch.node):
        r._read_node(index, inner)
    r.node, r.meta = node, meta
    return [r.lookup(info.name) for info in branch.output]


def _if(r, args):
    attrs = r.attrs()
    branches = (attrs["then_branch"], attrs["else_branch"])
    if _known(args[0]):
        return _inline(r, branches[0] if bool(np.asarray(args[0]).reshape(-1)[0]) else branches[1])
    pred = _scalar(r, args[0], DType.bool, "If's condition")
    bodies = [BodyReader(r, g.name or label) for g, label in zip(branches, ("then_branch", "else_branch"))]
    for body, g in zip(bodies, branches):
        body.finish(body.read(g))
    true, false = (b.graph for b in bodies)
    if [v.type for v in true.outputs] != [v.type for v in false.outputs]:
        raise r.error(f"If's branches return {_types(true.outputs)} and {_types(false.outputs)}; graphc's cond "
                      "needs both to return the same types (shapes are static apart from the batch dim)")
    operands = join(bodies)
    return r.builder.emit("cond", [r.value(pred), *operands], {"true_branch": true, "false_branch": false}, r.meta)


# ---- Scan -------------------------------------------------------------------------------------
def _move(r, x, source: int, target: int):
    if source == target:
        return x
    if _known(x):
        return np.moveaxis(x, source, target)
    order = [d for d in range(x.type.rank) if d != source]
    order.insert(target, source)
    return r.emit("permute", [x], {"perm": order})


def _flip(r, x, dim: int):
    """``x`` reversed along ``dim``."""
    if _known(x):
        return np.flip(x, dim)
    length = x.type.shape[dim]
    slices = [[None, None, 1] for _ in x.type.shape]
    slices[dim] = [length - 1 if isinstance(length, int) else None, None, -1]
    return r.emit("slice", [x], {"slices": slices})


def _scan_node(p, states: list, xs: list, g, reverse: bool) -> list:
    """A graphc ``scan`` over dim 0 of ``xs`` emitted into reader ``p``, ``g`` its body."""
    states, xs = [p.value(s) for s in states], [p.value(x) for x in xs]
    if len(g.input) != len(states) + len(xs) or len(g.output) < len(states):
        raise p.error(f"Scan's body takes {len(g.input)} inputs and returns {len(g.output)} outputs for "
                      f"{len(states)} states and {len(xs)} scan inputs")
    body = BodyReader(p, g.name or "scan_body")
    for info, v in zip(g.input, states):
        body.bind(info.name, v.type)
    for info, x in zip(g.input[len(states):], xs):
        if x.type.rank == 0:
            raise p.error(f"Scan input {show(info.name)} is a scalar: there is no axis to scan")
        body.bind(info.name, step_type(x.type, 0))
    graph = body.finish(body.read(g))
    got = graph.outputs[:len(states)]
    if [v.type for v in got] != [v.type for v in states]:
        raise p.error(f"Scan's body returns states {_types(got)} for states {_types(states)}; graphc's scan keeps "
                      "their types")
    operands = join([body])
    attrs = {"body": graph, "carries": len(states), "scanned": len(xs), "dim": 0, "reverse": bool(reverse)}
    return p.builder.emit("scan", [*states, *xs, *operands], attrs, p.meta)


def _per(attrs, key: str, count: int) -> list:
    values = [int(v) for v in attrs.get(key, [0] * count)]
    return values + [0] * (count - len(values))


def _scan(r, args):
    attrs = r.attrs()
    g, nx = attrs["body"], int(attrs["num_scan_inputs"])
    if r.opset < 9:
        return _scan8(r, args, attrs, g, nx)
    if not 0 < nx <= len(args):
        raise r.error(f"Scan with num_scan_inputs={nx} and {len(args)} inputs")
    states, xs = args[:len(args) - nx], args[len(args) - nx:]
    n_y = len(g.output) - len(states)
    in_dirs, out_dirs = _per(attrs, "scan_input_directions", nx), _per(attrs, "scan_output_directions", n_y)
    reverse = bool(in_dirs[0])
    moved = []
    for x, axis, direction in zip(xs, _per(attrs, "scan_input_axes", nx), in_dirs):
        x = _move(r, x, axis % max(len(_shape(x)), 1), 0)
        moved.append(_flip(r, x, 0) if bool(direction) != reverse else x)
    out = _scan_node(r, states, moved, g, reverse)
    finals, ys = out[:len(states)], out[len(states):]
    for k, (axis, direction) in enumerate(zip(_per(attrs, "scan_output_axes", n_y), out_dirs)):
        y = _flip(r, ys[k], 0) if bool(direction) != reverse else ys[k]  # graphc's ys sit at their xs' positions
        ys[k] = _move(r, y, 0, axis % y.type.rank)
    return [*finals, *ys]


def _scan8(r, args, attrs, g, nx):
    """Scan of opset 8: every input has the batch dim first, scan inputs their sequence second;
    scan outputs are appended in iteration order. One scan over the batch, scanning each item."""
    lengths, rest = args[0], list(args[1:])
    n = len(rest) - nx
    if not 0 < nx <= len(rest):
        raise r.error(f"Scan with num_scan_inputs={nx} and {len(rest)} inputs")
    dirs = _per(attrs, "directions", nx)
    reverse = bool(dirs[0])
    xs = [r.value(x) for x in rest[n:]]
    if lengths is not None:
        full = xs[0].type.shape[1]
        if not _known(lengths) or np.any(np.asarray(lengths) != full):
            raise r.error("Scan (opset 8) with sequence_lens shorter than the sequence: graphc scans whole "
                          "sequences (shapes are static)")
    xs = [_flip(r, x, 1) if bool(d) != reverse else x for x, d in zip(xs, dirs)]
    states = [r.value(s) for s in rest[:n]]
    item = BodyReader(r, "scan_batch_item")
    inner = _scan_node(item, [item.bind(None, step_type(s.type, 0)) for s in states],
                       [item.bind(None, step_type(x.type, 0)) for x in xs], g, reverse)
    graph = item.finish(inner)
    operands = join([item])
    out = r.builder.emit("scan", [*states, *xs, *operands],
                         {"body": graph, "carries": 0, "scanned": n + nx, "dim": 0, "reverse": False}, r.meta)
    return [*out[:n], *(_flip(r, y, 1) if reverse else y for y in out[n:])]


# ---- Loop -------------------------------------------------------------------------------------
def _loop(r, args):
    g = r.attrs()["body"]
    trip, cond, initial = (list(args) + [None, None])[0], (list(args) + [None, None])[1], list(args[2:])
    n = len(initial)
    if len(g.input) != n + 2 or len(g.output) < n + 1:
        raise r.error(f"Loop's body takes {len(g.input)} inputs and returns {len(g.output)} outputs for {n} "
                      "loop-carried values (it takes the iteration number, the condition and each value, and "
                      "returns the condition, each value and any scan outputs)")
    if trip is None and cond is None:
        raise r.error("ONNX op 'Loop' is not supported with neither a trip count nor a condition: that loop never "
                      "ends")
    initial = [r.value(v) for v in initial]
    trip = None if trip is None else _scalar(r, trip, DType.int64, "Loop's trip count")
    cond = None if cond is None else _scalar(r, cond, DType.bool, "Loop's condition")
    if len(g.output) > n + 1:
        return _loop_as_scan(r, g, trip, cond, initial)
    body = BodyReader(r, g.name or "loop_body")
    count, flag = body.bind(g.input[0].name, _I64), body.bind(g.input[1].name, _BOOL)
    for info, v in zip(g.input[2:], initial):
        body.bind(info.name, v.type)
    outs = body.read(g)
    body.meta = dict(r.meta)  # the counter is the Loop's own
    step = body.emit("add", [count, np.ones((), np.int64)])
    graph = body.finish([step, _scalar(body, outs[0], DType.bool, "Loop's condition output"), *outs[1:]])
    _same_types(r, graph.outputs[2:], initial)
    test = BodyReader(r, "loop_cond")
    count, flag = test.bind(None, _I64), test.bind(None, _BOOL)
    for v in initial:
        test.bind(None, v.type)
    within = None if trip is None else test.emit("lt", [count, test.take(trip)])
    keep = flag if within is None else within if cond is None else test.emit("where", [flag, within, flag])
    test.finish([keep])
    operands = join([test, body])
    first = r.value(np.ones((), np.bool_) if cond is None else cond)
    out = r.builder.emit("while_loop", [r.value(np.zeros((), np.int64)), first, *initial, *operands],
                         {"cond": test.graph, "body": graph, "carried": n + 2}, r.meta)
    return out[2:]


def _same_types(r, got: list, want: list) -> None:
    if [v.type for v in got] != [v.type for v in want]:
        raise r.error(f"Loop's body returns {_types(got)} for the loop-carried values {_types(want)}; graphc's "
                      "loops keep their types (static shapes)")


def _loop_as_scan(r, g, trip, cond, initial) -> list:
    if trip is None or not _known(trip):
        raise r.error("Loop with scan outputs and a trip count computed at run time: the scan outputs' length "
                      "(the number of iterations) would be known only at run time, and graphc's shapes are "
                      "static apart from the batch dim")
    if cond is not None and not (_known(cond) and bool(cond)):
        raise r.error("Loop with scan outputs and a condition computed at run time: it may stop early, so the "
                      "scan outputs' length would be known only at run time (graphc's shapes are static)")
    body = BodyReader(r, g.name or "loop_body")
    for info, v in zip(g.input[2:], initial):
        body.bind(info.name, v.type)
    body.bind(g.input[0].name, _I64)
    body.env[g.input[1].name] = np.ones((), np.bool_)  # never false: the loop runs its trip count through
    outs = body.read(g)
    if cond is not None and not (_known(outs[0]) and bool(np.all(outs[0]))):
        raise r.error("Loop with scan outputs whose body computes its condition: it may stop early, so the scan "
                      "outputs' length would be known only at run time (graphc's shapes are static)")
    n = len(initial)
    graph = body.finish(outs[1:])
    _same_types(r, graph.outputs[:n], initial)
    operands = join([body])
    m = int(trip)
    r.allow((max(m, 0),), np.int64, "Loop's iteration numbers")
    counter = r.value(np.arange(max(m, 0), dtype=np.int64))
    attrs = {"body": graph, "carries": n, "scanned": 1, "dim": 0, "reverse": False}
    return r.builder.emit("scan", [*initial, counter, *operands], attrs, r.meta)


CONTROL_READERS = {"If": _if, "Loop": _loop, "Scan": _scan}
