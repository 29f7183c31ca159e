"""ONNX export of control flow: ``cond`` as ``If``, ``scan`` as ``Scan``, ``while_loop`` as ``Loop``.

A graphc body reads only its own inputs (captured values are trailing operands of the node);
an ONNX subgraph reads its formal inputs and, by name, any value of the enclosing graphs. So
each body is written with its inputs bound to names: ``If`` branches have no inputs at all and
read the node's operands by their outer names; ``Scan`` and ``Loop`` bodies take the carries
(and the scanned slices) as formal inputs and read the trailing operands by outer name.

- ``cond(pred, *operands)`` -> ``If(pred)``, the predicate cast to bool when it is not one.
- ``scan(*init, *xs, *consts)[dim, reverse]`` -> ``Scan(*init, *xs)`` with every scan input
  and output on axis ``dim``; ``reverse`` reads the inputs last to first
  (``scan_input_directions`` 1) and, since graphc's ys keep their xs' positions, writes the
  outputs last to first too (``scan_output_directions`` 1). ``saves=True`` (a training
  graph's residuals) is refused: an exported graph is an inference graph.
- ``while_loop(*carried, *consts)[cond, body]`` -> ``Loop("", c0, *carried)``: ``c0`` is the
  cond body written once in the enclosing graph on the initial values, and the Loop body
  writes the body and then the cond body on its results, returning the next condition
  (the cond is evaluated before every trip, as graphc's kernel does). The iteration count
  input of the Loop body is unused.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.graph import Value
from ..ir.ops.control import split_scan
from ..ir.types import DType, TensorType
from .dtypes import ELEMENT_TYPES
from .export_numbers import cast

_INT64, _BOOL = ELEMENT_TYPES[DType.int64], ELEMENT_TYPES[DType.bool]


def write_body(w, body, input_names: list) -> list:
    """Write ``body``'s nodes into writer ``w`` with its inputs read as ``input_names``;
    returns the names of its outputs."""
    for value, name in zip(body.inputs, input_names):
        w.names[id(value)] = name
    for node in body.nodes:
        w.write(node)
    return [w.name(v) for v in body.outputs]


def subgraph(w, name: str, inputs: list, values: list, output_names: list):
    """The ``GraphProto`` of sub-writer ``w``'s nodes. ``inputs``: value_infos; ``values``:
    the outputs' graphc Values (for their types). An output a node of this subgraph computes
    is named directly, the others (an input or an outer value passed through, an output
    listed twice) get an Identity of their own."""
    computed = {n for node in w.nodes for n in node.output}
    outputs, used = [], set()
    for value, out in zip(values, output_names):
        if out not in computed or out in used:
            copy = w.fresh("out")
            w.nodes.append(w.onnx.helper.make_node("Identity", [out], [copy], name=w.fresh("Identity")))
            out = copy
        used.add(out)
        outputs.append(w.info(value, out))
    return w.onnx.helper.make_graph(w.nodes, w.fresh(name), inputs, outputs, value_info=w.typed)


def _scalar_bool(w, node, name: str, ttype) -> str:
    """A one-element predicate as ONNX's bool scalar (Loop's condition is a scalar)."""
    if ttype.dtype is not DType.bool:
        name = cast(w, node, name, DType.bool)
    if ttype.rank:
        flat = w.fresh("scalar")
        w.node("Reshape", [name, w.constant(np.zeros(0, np.int64), "scalar_shape")], [flat], node.meta)
        name = flat
    return name


def _cond(w, node, ins, outs):
    pred = ins[0]
    if node.inputs[0].type.dtype is not DType.bool:
        pred = cast(w, node, pred, DType.bool)
    branches = {}
    for key, attr in (("true_branch", "then_branch"), ("false_branch", "else_branch")):
        body, sub = node.attrs[key], w.sub()
        names = write_body(sub, body, ins[1:])  # a branch reads the If's operands by their outer names
        branches[attr] = subgraph(sub, body.name, [], body.outputs, names)
    w.node("If", [pred], outs, node.meta, **branches)


def _scan(w, node, ins, outs):
    attrs = node.attrs
    if attrs["saves"]:
        raise GraphcError("ONNX export: a scan that saves its carries for a gradient belongs to a training graph; "
                          "export the inference graph", node.location())
    init, xs, consts = split_scan(ins, attrs)
    body, sub = attrs["body"], w.sub()
    formal = [sub.fresh(f"{kind}{i}") for kind, group in (("carry", init), ("x", xs)) for i in range(len(group))]
    names = write_body(sub, body, [*formal, *consts])
    inputs = [sub.info(v, n) for v, n in zip(body.inputs, formal)]
    n_y = len(body.outputs) - len(init)
    dim, direction = int(attrs["dim"]), int(bool(attrs["reverse"]))
    w.node("Scan", [*init, *xs], outs, node.meta, body=subgraph(sub, body.name, inputs, body.outputs, names),
           num_scan_inputs=len(xs), scan_input_axes=[dim] * len(xs), scan_input_directions=[direction] * len(xs),
           scan_output_axes=[dim] * n_y, scan_output_directions=[direction] * n_y)


def _while_loop(w, node, ins, outs):
    n = node.attrs["carried"]
    test, body = node.attrs["cond"], node.attrs["body"]
    carried, consts = ins[:n], ins[n:]
    first = _scalar_bool(w, node, write_body(w, test, ins)[0], test.outputs[0].type)
    sub = w.sub()
    count, cond_in = sub.fresh("iteration"), sub.fresh("cond_in")
    formal = [sub.fresh(f"carried{i}") for i in range(n)]
    after = write_body(sub, body, [*formal, *consts])
    again = _scalar_bool(sub, node, write_body(sub, test, [*after, *consts])[0], test.outputs[0].type)
    helper = w.onnx.helper
    inputs = [helper.make_tensor_value_info(count, _INT64, []), helper.make_tensor_value_info(cond_in, _BOOL, []),
              *(sub.info(v, name) for v, name in zip(body.inputs, formal))]
    condition = Value("cond", TensorType((), DType.bool))  # the Loop body's first output: the next condition
    graph = subgraph(sub, body.name, inputs, [condition, *body.outputs], [again, *after])
    w.node("Loop", ["", first, *carried], outs, node.meta, body=graph)


CONTROL_WRITERS = {"cond": _cond, "scan": _scan, "while_loop": _while_loop}
