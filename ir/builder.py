"""A small helper that appends shape-checked nodes to a Graph.

Both the tracer (``graphc.jit.trace``) and the passes (autodiff's vjp rules) emit nodes
through it, so every node gets the same attr normalisation and type inference.
"""
from __future__ import annotations

import numpy as np

from .errors import GraphcError
from .graph import Graph, Node, Value
from .registry import get_op, infer_types
from .types import DType, TensorType


class Builder:
    """Emit nodes into ``graph`` with fresh SSA names.

    >>> from graphc.ir import Graph, Value, TensorType, DType, Builder
    >>> g = Graph()
    >>> x = g.add_input(Value("x", TensorType(("N", 4), DType.float32)))
    >>> y = Builder(g).emit("relu", [x])[0]
    >>> str(y.type)
    'f32[N,4]'
    """

    def __init__(self, graph: Graph, meta: dict | None = None):
        self.graph = graph
        self.meta = dict(meta or {})
        self._counter = _next_free_number(graph)
        self._taken = graph.value_names()

    def reserve(self, name: str) -> None:
        """Note a name added to the graph behind the builder's back (inputs, state)."""
        self._taken.add(name)

    def fresh_name(self) -> str:
        name = str(self._counter)
        self._counter += 1
        while name in self._taken:
            name = str(self._counter)
            self._counter += 1
        self._taken.add(name)
        return name

    def emit(self, op: str, inputs: list, attrs: dict | None = None, meta: dict | None = None) -> list:
        """Append ``op(inputs)`` and return its output Values."""
        opdef = get_op(op)
        attrs = opdef.normalize_attrs(attrs or {})
        out_types = infer_types(opdef, [v.type for v in inputs], attrs)
        outputs = [Value(self.fresh_name(), t) for t in out_types]
        node = Node(op, list(inputs), outputs, attrs, {**self.meta, **(meta or {})})
        self.graph.nodes.append(node)
        return list(outputs)  # a copy: callers may pop from it

    def inline(self, body: Graph, inputs: list) -> list:
        """Append a copy of ``body``'s nodes reading ``inputs`` (fresh names); returns what it
        returns. The body's constants (a vjp rule's scalar zero) become constants here."""
        env = {id(b): v for b, v in zip(body.inputs, inputs)}
        for name, value in body.constants.items():
            env[id(value)] = self.constant(body.constant_data[name], value.type.dtype)
        for node in body.nodes:
            outputs = [Value(self.fresh_name(), v.type) for v in node.outputs]
            self.graph.nodes.append(Node(node.op, [env[id(v)] for v in node.inputs], outputs, node.attrs, node.meta))
            env.update(zip((id(v) for v in node.outputs), outputs))
        return [env[id(v)] for v in body.outputs]

    def emit1(self, op: str, inputs: list, attrs: dict | None = None, meta: dict | None = None) -> Value:
        return self.emit(op, inputs, attrs, meta)[0]

    def constant(self, data, dtype: DType | None = None) -> Value:
        """Add a constant (kept in ``graph.constant_data``); scalars print inline."""
        arr = np.asarray(data, dtype=(dtype.numpy if dtype else None))
        if arr.dtype == np.float64 and dtype is None:
            raise GraphcError("constant dtype must be given for float data")
        name = self.graph.unique_name(f"c{len(self.graph.constants)}", self._taken)
        self._taken.add(name)
        return self.graph.add_constant(Value(name, TensorType(arr.shape, DType.from_any(arr.dtype))), arr)


def _next_free_number(graph: Graph) -> int:
    best = -1
    for n in graph.nodes:
        for v in n.outputs:
            if v.name.isdigit():
                best = max(best, int(v.name))
    return best + 1

