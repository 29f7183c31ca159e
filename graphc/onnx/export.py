"""ONNX export: a frozen inference graph as an ONNX model in the default domain only.

Each graphc op maps to standard ONNX ops (fused ones are written back as their parts:
``linear_relu`` -> Gemm + Relu, ``conv2d_relu`` -> Conv + Relu, ``attention`` -> MatMul, Softmax,
MatMul: ``export_attention``; ``lstm_cell``, ``gru_cell`` -> Split, Sigmoid, Tanh, Mul, Add:
``export_recurrent_cell``; ``cond``, ``scan`` and
``while_loop`` -> If, Scan and Loop with their bodies as subgraphs: ``control_export``), so
Netron opens the file and onnxruntime runs it. The batch dim is the named dynamic dim ``N``;
constants (the frozen weights) are initializers; node names carry the module path, doc strings
the source line. The ``onnx`` package is an optional extra, imported only here.
"""
from __future__ import annotations

import os

import numpy as np

from ..ir.errors import GraphcError
from ..ir.types import DType, is_static
from .dtypes import ELEMENT_TYPES as _ELEMENT_TYPES
from .control_export import CONTROL_WRITERS
from .export_attention import write_attention
from .export_fill import shape_tensor, write_full
from .export_recurrent_cell import RECURRENT_CELL_WRITERS
from .export_conv_transpose import CONV_TRANSPOSE_WRITERS
from .vision_export import VISION_WRITERS
from .export_cumulative import WRITERS as CUMULATIVE_WRITERS
from .export_numbers import cast_inputs, write_div, write_sign

DEFAULT_OPSET = 17
# the opsets whose forms of the ops below this writer knows: of the ops it writes, only the
# reductions' axes (an input from 18) and Split's sizes (an input from 13) changed form in 13-28;
# 22-28 only added types (tests/test_onnx_export_opsets.py writes every family at each of them)
OPSETS = range(13, 29)


def onnx_module():
    """The ``onnx`` package, or a GraphcError naming the extra that brings it."""
    try:
        import onnx
    except ImportError:
        raise GraphcError("ONNX export and import need the onnx package: pip install 'graphc[onnx]'") from None
    return onnx


class _Writer:
    """Collects ONNX nodes and initializers with unique names while one graph is translated.
    A body of a control-flow node is written by a :meth:`sub` writer: its own nodes and
    value_info, the model's initializers and name counter (names are unique model-wide, as
    ONNX's scoping requires), and the enclosing writers' names visible (outer-scope reads)."""

    def __init__(self, onnx, graph, opset: int, parent: _Writer | None = None):
        self.onnx, self.graph, self.opset = onnx, graph, opset
        self.nodes, self.typed = [], []
        self.initializers = parent.initializers if parent is not None else []
        self._count = parent._count if parent is not None else [0]
        self.names = dict(parent.names) if parent is not None else {id(v): v.name for v in graph.inputs}

    def name(self, value) -> str:
        return self.names[id(value)]

    def fresh(self, base: str) -> str:
        self._count[0] += 1
        return f"{base}__{self._count[0]}"

    def sub(self) -> _Writer:
        """A writer for a subgraph of the graph this one writes."""
        return _Writer(self.onnx, self.graph, self.opset, parent=self)

    def info(self, value, name: str):
        return _value_info(self.onnx, value, name)

    def write(self, node, renamed: dict | None = None) -> None:
        """Write one graphc node. Its outputs take ``renamed``'s names, else their own (the
        main graph), or fresh ones (``renamed`` None: a body, whose names repeat the outer ones)."""
        control, writer = MULTI_OUTPUT_WRITERS.get(node.op), WRITERS.get(node.op)
        if control is None and writer is None:
            raise GraphcError(f"ONNX export: graphc op {node.op!r} has no ONNX form yet", node.location())
        if control is None and len(node.outputs) != 1:
            raise GraphcError(f"ONNX export: {node.op!r} with {len(node.outputs)} outputs", node.location())
        if any(v.type.dtype.is_complex for v in (*node.inputs, *node.outputs)):  # ONNX has no complex kernels
            raise GraphcError(f"ONNX export: {node.op!r} on complex values (ONNX runtimes have no complex tensors); "
                              "keep complex numbers out of the exported function", node.location())
        for value in node.outputs:
            if renamed is not None and id(value) in renamed:
                self.names[id(value)] = renamed[id(value)]
                continue
            self.names[id(value)] = value.name if renamed is not None else self.fresh(_safe(value.name))
            self.typed.append(_value_info(self.onnx, value, self.names[id(value)]))
        ins = [self.name(v) for v in node.inputs]
        if control is not None:
            control(self, node, ins, [self.name(v) for v in node.outputs])
        else:
            writer(self, node, cast_inputs(self, node, ins), self.name(node.outputs[0]))

    def constant(self, array, base: str = "const") -> str:
        name = self.fresh(base)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op_type: str, inputs: list, outputs: list, meta: dict, **attrs) -> None:
        label = meta.get("module") or meta.get("module_type") or op_type
        self.nodes.append(self.onnx.helper.make_node(
            op_type, inputs, outputs, name=self.fresh(label), doc_string=meta.get("source", ""), **attrs))


def _pairs(attrs, key):
    return [int(v) for v in attrs[key]]


def _gemm(w: _Writer, node, ins, out, relu=False):
    x = node.inputs[0]
    target = w.fresh("linear") if relu else out
    if x.type.rank == 2:
        w.node("Gemm", ins, [target], node.meta, transB=1)
    else:  # Gemm is 2-D only: MatMul with the transposed weight, then the bias
        wt = w.fresh("weight_t")
        w.node("Transpose", [ins[1]], [wt], node.meta, perm=[1, 0])
        product = w.fresh("matmul") if len(ins) == 3 else target
        w.node("MatMul", [ins[0], wt], [product], node.meta)
        if len(ins) == 3:
            w.node("Add", [product, ins[2]], [target], node.meta)
    if relu:
        w.node("Relu", [target], [out], node.meta)


def _conv(w: _Writer, node, ins, out, relu=False):
    a = node.attrs
    ph, pw = _pairs(a, "padding")
    target = w.fresh("conv") if relu else out
    w.node("Conv", ins, [target], node.meta, strides=_pairs(a, "stride"), pads=[ph, pw, ph, pw],
           dilations=_pairs(a, "dilation"), group=int(a["groups"]))
    if relu:
        w.node("Relu", [target], [out], node.meta)


def _adaptive_avg_pool(w: _Writer, node, ins, out):
    if list(node.attrs["output_size"]) != [1, 1]:
        raise GraphcError(f"ONNX export: adaptive_avg_pool2d to {tuple(node.attrs['output_size'])} has no ONNX op "
                          "(only output size 1, GlobalAveragePool)", node.location())
    w.node("GlobalAveragePool", ins, [out], node.meta)


def _shape_data(node) -> list:
    """The output shape for Reshape: the symbolic batch dim becomes -1 (inferred)."""
    dims = []
    for d in node.outputs[0].type.shape:
        dims.append(d if is_static(d) else -1)
    if dims.count(-1) > 1:
        raise GraphcError(f"ONNX export: the shape {node.outputs[0].type} has more than one batch-dependent dim",
                          node.location())
    return dims


def _reshape(w: _Writer, node, ins, out):
    if sum(not is_static(d) for d in node.outputs[0].type.shape) > 1:  # [N,T,2,4]: the shape read at run time
        w.node("Reshape", [ins[0], shape_tensor(w, node, node.outputs[0].type.shape)], [out], node.meta)
        return
    w.node("Reshape", [ins[0], w.constant(np.array(_shape_data(node), np.int64), "shape")], [out], node.meta)


def _flatten(w: _Writer, node, ins, out):
    rank = node.inputs[0].type.rank
    start, end = node.attrs["start_dim"] % max(rank, 1), node.attrs["end_dim"] % max(rank, 1)
    if end == rank - 1 and rank > 0:
        w.node("Flatten", ins, [out], node.meta, axis=start)
    else:
        _reshape(w, node, ins, out)


def _softmax(op_type):
    def write(w: _Writer, node, ins, out):
        w.node(op_type, ins, [out], node.meta, axis=int(node.attrs["dim"]))
    return write


def _hardtanh(w: _Writer, node, ins, out):
    dtype = node.inputs[0].type.dtype.numpy
    low = w.constant(np.array(node.attrs["min_val"], dtype), "min")
    high = w.constant(np.array(node.attrs["max_val"], dtype), "max")
    w.node("Clip", [ins[0], low, high], [out], node.meta)


def _batch_norm(w: _Writer, node, ins, out):
    w.node("BatchNormalization", ins, [out], node.meta, epsilon=float(node.attrs["eps"]))


def _cast(w: _Writer, node, ins, out):
    w.node("Cast", ins, [out], node.meta, to=_ELEMENT_TYPES[DType[node.attrs["dtype"]]])


def _simple(op_type, **fixed):
    def write(w: _Writer, node, ins, out):
        w.node(op_type, ins, [out], node.meta, **fixed)
    return write


def _rounding(op_type):
    """ONNX's Floor, Ceil and Round take floats; graphc leaves integers unchanged (Identity)."""
    def write(w: _Writer, node, ins, out):
        w.node(op_type if node.inputs[0].type.dtype.is_float else "Identity", ins, [out], node.meta)
    return write


def _leaky_relu(w: _Writer, node, ins, out):
    w.node("LeakyRelu", ins, [out], node.meta, alpha=float(node.attrs["negative_slope"]))


def _reduce(op_type, axes_input_from: int):
    def write(w: _Writer, node, ins, out):
        dims = node.attrs["dims"]  # None: every dim (x.sum())
        dims = list(range(node.inputs[0].type.rank)) if dims is None else [int(d) for d in dims]
        keep = int(node.attrs["keepdim"])
        if w.opset >= axes_input_from:  # newer opsets take the axes as an input
            w.node(op_type, [ins[0], w.constant(np.array(dims, np.int64), "axes")], [out], node.meta, keepdims=keep)
        else:
            w.node(op_type, ins, [out], node.meta, axes=dims, keepdims=keep)
    return write


def _squeeze(w: _Writer, meta, source: str, axes: list, out: str) -> None:
    if w.opset >= 13:
        w.node("Squeeze", [source, w.constant(np.array(axes, np.int64), "axes")], [out], meta)
    else:
        w.node("Squeeze", [source], [out], meta, axes=axes)


_INT64_MAX, _INT64_MIN = 2**63 - 1, -2**63


def _slice(w: _Writer, node, ins, out):
    starts, ends, axes, steps = [], [], [], []
    drop = [int(d) for d in node.attrs["drop"]]
    for axis, (start, stop, step) in enumerate(node.attrs["slices"]):
        if axis in drop:  # an integer index: a one-element slice, squeezed below
            start, stop, step = start, (start + 1) or _INT64_MAX, 1
        elif (start, stop, step) in ((None, None, 1), (0, None, 1)):
            continue
        starts.append(start if start is not None else (0 if step > 0 else _INT64_MAX))
        ends.append(stop if stop is not None else (_INT64_MAX if step > 0 else _INT64_MIN))
        axes.append(axis)
        steps.append(step)
    sliced = w.fresh("slice") if drop else out
    arrays = [w.constant(np.array(v, np.int64), name) for v, name in
              ((starts, "starts"), (ends, "ends"), (axes, "axes"), (steps, "steps"))]
    w.node("Slice", [ins[0], *arrays], [sliced], node.meta)
    if drop:
        _squeeze(w, node.meta, sliced, drop, out)


def _rsqrt(w: _Writer, node, ins, out):
    root = w.fresh("sqrt")
    w.node("Sqrt", ins, [root], node.meta)
    w.node("Reciprocal", [root], [out], node.meta)


def _log1p(w: _Writer, node, ins, out):
    shifted = w.fresh("plus_one")
    one = w.constant(np.array(1, node.inputs[0].type.dtype.numpy), "one")
    w.node("Add", [ins[0], one], [shifted], node.meta)
    w.node("Log", [shifted], [out], node.meta)


def _ne(w: _Writer, node, ins, out):
    equal = w.fresh("equal")
    w.node("Equal", ins, [equal], node.meta)
    w.node("Not", [equal], [out], node.meta)


def _broadcast_to(w: _Writer, node, ins, out):
    # Expand broadcasts both ways: a 1 keeps the input's dim, which is how a symbolic dim the input
    # already has is written; one the input lacks (a scalar filled to [N, 1]) is read at run time
    target, have = list(node.attrs["shape"]), list(node.inputs[0].type.shape)
    aligned = [None] * (len(target) - len(have)) + have
    if all(isinstance(d, int) or d == a for d, a in zip(target, aligned)):
        shape = w.constant(np.array([d if isinstance(d, int) else 1 for d in target], np.int64), "shape")
    else:
        shape = shape_tensor(w, node, target)
    w.node("Expand", [ins[0], shape], [out], node.meta)


def _argmax(w: _Writer, node, ins, out):
    w.node("ArgMax", ins, [out], node.meta, axis=int(node.attrs["dim"]), keepdims=int(node.attrs["keepdim"]))


WRITERS = {
    "linear": _gemm, "linear_relu": lambda w, n, i, o: _gemm(w, n, i, o, relu=True),
    "conv2d": _conv, "conv2d_relu": lambda w, n, i, o: _conv(w, n, i, o, relu=True),
    "matmul": _simple("MatMul"),
    "adaptive_avg_pool2d": _adaptive_avg_pool, "reshape": _reshape, "flatten": _flatten,
    "permute": lambda w, n, i, o: w.node("Transpose", i, [o], n.meta, perm=[int(p) for p in n.attrs["perm"]]),
    "concat": lambda w, n, i, o: w.node("Concat", i, [o], n.meta, axis=int(n.attrs["dim"])),
    "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"), "hardtanh": _hardtanh,
    "batch_norm": _batch_norm, "cast": _cast, "leaky_relu": _leaky_relu,
    "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"), "exp": _simple("Exp"),
    "log": _simple("Log"), "sqrt": _simple("Sqrt"), "neg": _simple("Neg"), "abs": _simple("Abs"),
    "add": _simple("Add"), "sub": _simple("Sub"), "mul": _simple("Mul"), "div": write_div,
    "pow": _simple("Pow"), "where": _simple("Where"), "eq": _simple("Equal"), "lt": _simple("Less"),
    "gt": _simple("Greater"), "le": _simple("LessOrEqual"), "ge": _simple("GreaterOrEqual"),
    "stop_gradient": _simple("Identity"), "erf": _simple("Erf"),
    "floor": _rounding("Floor"), "ceil": _rounding("Ceil"), "round": _rounding("Round"),
    "sign": write_sign, "maximum": _simple("Max"), "minimum": _simple("Min"), "logical_not": _simple("Not"),
    "ne": _ne, "rsqrt": _rsqrt, "log1p": _log1p, "mean": _reduce("ReduceMean", 18), "sum": _reduce("ReduceSum", 13),
    "max": _reduce("ReduceMax", 18), "slice": _slice, "broadcast_to": _broadcast_to, "argmax": _argmax,
    "embedding": lambda w, n, i, o: w.node("Gather", [i[1], i[0]], [o], n.meta), "full": write_full,
    "attention": write_attention,
}
WRITERS.update(CONV_TRANSPOSE_WRITERS)  # conv_transpose2d, im2col, col2im
WRITERS.update(CUMULATIVE_WRITERS)  # cumulative sum -> CumSum
WRITERS.update(VISION_WRITERS)  # max/avg pooling (ceil_mode, indices), adaptive max pooling, max unpooling


def _fused_elementwise(w: _Writer, node, ins, outs):
    """A fused group as its ops, one ONNX node each (ONNX runtimes fuse them their own way);
    the group's outputs keep the fused node's names."""
    body = node.attrs["body"]
    w.names.update((id(value), name) for value, name in zip(body.inputs, ins))
    renamed = {id(value): name for value, name in zip(body.outputs, outs)}
    for inner in body.nodes:
        w.write(inner, renamed)


MULTI_OUTPUT_WRITERS = {**CONTROL_WRITERS, **RECURRENT_CELL_WRITERS,  # writer(w, node, ins, outs)
                        "fused_elementwise": _fused_elementwise}


def _safe(name: str) -> str:
    return "v" + name if name[:1].isdigit() else name


def _value_info(onnx, value, name: str):
    dims = []
    for d in value.type.shape:
        dims.append(d if is_static(d) else str(d))  # a symbolic dim (N, T, or N*128) is a named dim
    return onnx.helper.make_tensor_value_info(name, _ELEMENT_TYPES[value.type.dtype], dims)


def _output_names(graph) -> dict:
    """id(value) -> the plan's output name, for outputs a node computes: the node writes that
    name directly (no trailing Identity). Inputs, constants, outputs listed twice and names
    another value already has keep an Identity."""
    names = graph.output_names or [v.name for v in graph.outputs]
    computed = {id(v) for node in graph.nodes for v in node.outputs}
    taken = graph.value_names()
    renamed = {}
    for value, name in zip(graph.outputs, names):
        listed_once = sum(v is value for v in graph.outputs) == 1
        if id(value) in computed and listed_once and (name == value.name or name not in taken):
            renamed[id(value)] = name
    return renamed


def graph_to_onnx(graph, opset: int = DEFAULT_OPSET):
    """An ``onnx.ModelProto`` for a frozen inference ``graph`` (no state, no updates)."""
    onnx = onnx_module()
    if opset not in OPSETS:
        raise GraphcError(f"ONNX export: opset {opset} is not supported; graphc writes opsets "
                          f"{OPSETS.start}-{OPSETS.stop - 1}")
    if opset > onnx.defs.onnx_opset_version():
        raise GraphcError(f"ONNX export: opset {opset} is newer than the installed onnx {onnx.__version__} defines "
                          f"({onnx.defs.onnx_opset_version()}); upgrade onnx or write an older opset")
    if graph.state or graph.updates:
        raise GraphcError("ONNX export takes a frozen inference graph (gc.export freezes one); this graph has "
                          f"state {sorted(graph.state)[:3]} or updates")
    w = _Writer(onnx, graph, opset)
    for name, value in graph.constants.items():
        w.names[id(value)] = name
        w.initializers.append(onnx.numpy_helper.from_array(np.asarray(graph.constant_data[name], order="C"), name))
    renamed = _output_names(graph)
    for node in graph.nodes:  # value_info for every value a node computes: Netron labels each edge with its shape
        w.write(node, renamed)
    outputs, names = [], []
    for value, out_name in zip(graph.outputs, graph.output_names or [v.name for v in graph.outputs]):
        if w.name(value) != out_name:  # outputs carry the plan's output names
            w.node("Identity", [w.name(value)], [out_name], {})
        outputs.append(_value_info(onnx, value, out_name))
        names.append(out_name)
    model = onnx.helper.make_model(
        onnx.helper.make_graph(w.nodes, graph.name, [_value_info(onnx, v, v.name) for v in graph.inputs], outputs,
                               w.initializers, value_info=w.typed),
        opset_imports=[onnx.helper.make_opsetid("", opset)], producer_name="graphc")
    return model


def save_onnx(plan, path, opset: int = DEFAULT_OPSET) -> None:
    """Write ``plan``'s graph to ``path`` as ONNX (checked by ``onnx.checker`` first)."""
    onnx = onnx_module()
    model = graph_to_onnx(plan.graph, opset)
    onnx.checker.check_model(model, full_check=True)
    try:
        with open(os.fspath(path), "wb") as f:
            f.write(model.SerializeToString())
    except OSError as e:
        raise GraphcError(f"cannot write {os.fspath(path)}: {e.strerror or e}") from None
