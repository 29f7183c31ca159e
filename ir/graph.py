"""Graph IR: values, nodes (plain data, like ONNX) and graphs.

A Graph is SSA: every Value is defined once, by a graph input, a state entry
(parameter, buffer, optimizer state), a constant, or exactly one node output.
Nodes are kept in topological order in a plain list, which is what passes walk;
networkx is used for algorithms (graph layout in ``graphc.viz``), not as this storage.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .types import TensorType

STATE_ROLES = ("param", "buffer", "optim")


class Value:
    """An SSA value: a name and a :class:`TensorType`. Compared by identity."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: TensorType):
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"%{self.name}:{self.type}"


@dataclass(eq=False)
class Node:
    """One op application. ``attrs`` hold plain data only (ints, floats, bools, strs,
    lists of those); ``meta`` holds the module path, source line and creating pass."""

    op: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    @property
    def output(self) -> Value:
        return self.outputs[0]

    def location(self) -> str | None:
        """``features.3 (Conv2d) at net.py:42``, or None when nothing is known."""
        return describe_location(self.meta)


def describe_location(meta: dict) -> str | None:
    parts = []
    if meta.get("module"):
        kind = f" ({meta['module_type']})" if meta.get("module_type") else ""
        parts.append(f"{meta['module']}{kind}")
    elif meta.get("module_type"):  # the root module: no path, just its class
        parts.append(meta["module_type"])
    if meta.get("source"):
        parts.append(f"at {meta['source']}")
    return " ".join(parts) or None


class Graph:
    """A whole program: inputs, state, constants, nodes in order, outputs, updates.

    ``updates`` maps a state name to the Value it holds after one run (running stats,
    updated parameters); the executor writes them back into the shared storage.

    >>> from graphc.ir import Graph, Value, TensorType, DType
    >>> g = Graph(name="f")
    >>> x = g.add_input(Value("x", TensorType(("N", 3), DType.float32)))
    >>> len(g.inputs)
    1
    """

    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[Value] = []
        self.state: dict[str, Value] = {}
        self.state_roles: dict[str, str] = {}
        self.constants: dict[str, Value] = {}
        self.constant_data: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.output_names: list[str] = []
        self.updates: dict[str, Value] = {}
        self.meta: dict = {}

    # ---- building ---------------------------------------------------------------
    def add_input(self, value: Value) -> Value:
        self.inputs.append(value)
        return value

    def add_state(self, value: Value, role: str) -> Value:
        assert role in STATE_ROLES, role
        self.state[value.name] = value
        self.state_roles[value.name] = role
        return value

    def add_constant(self, value: Value, data: np.ndarray) -> Value:
        self.constants[value.name] = value
        self.constant_data[value.name] = data
        return value

    def copy(self) -> "Graph":
        """A new Graph sharing Values and Nodes (passes never mutate nodes in place)."""
        g = Graph(self.name)
        g.inputs = list(self.inputs)
        g.state = dict(self.state)
        g.state_roles = dict(self.state_roles)
        g.constants = dict(self.constants)
        g.constant_data = dict(self.constant_data)
        g.nodes = list(self.nodes)
        g.outputs = list(self.outputs)
        g.output_names = list(self.output_names)
        g.updates = dict(self.updates)
        g.meta = {k: (list(v) if isinstance(v, list) else v) for k, v in self.meta.items()}
        return g

    def value_names(self) -> set:
        """Every name in use: inputs, state, constants and node outputs."""
        return {v.name for v in self.leaf_values()} | {v.name for n in self.nodes for v in n.outputs}

    def value_by_name(self) -> dict:
        """``name -> Value`` for inputs, state, constants and node outputs."""
        out = {v.name: v for v in self.leaf_values()}
        out.update({v.name: v for n in self.nodes for v in n.outputs})
        return out

    def unique_name(self, base: str, taken: set | None = None) -> str:
        """``base``, or ``base_1``, ``base_2``... if a value already has that name
        (pass ``taken``, e.g. from :meth:`value_names`, to avoid rescanning)."""
        taken = self.value_names() if taken is None else taken
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        return name

    # ---- views ------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Value]:
        return {k: v for k, v in self.state.items() if self.state_roles[k] == "param"}

    @property
    def buffers(self) -> dict[str, Value]:
        return {k: v for k, v in self.state.items() if self.state_roles[k] == "buffer"}

    def leaf_values(self) -> list[Value]:
        """Values not produced by a node: inputs, state and constants."""
        return [*self.inputs, *self.state.values(), *self.constants.values()]

    def producers(self) -> dict[int, Node]:
        """``id(value) -> node`` for every node output."""
        return {id(v): n for n in self.nodes for v in n.outputs}

    def users(self) -> dict[int, list[Node]]:
        """``id(value) -> [nodes reading it]`` (a node appears once per input slot)."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(id(v), []).append(n)
        return out

    def root_values(self) -> list[Value]:
        """Values the caller observes: outputs and state updates."""
        return [*self.outputs, *self.updates.values()]

    def bodies(self) -> list["Graph"]:
        """The graphs the nodes hold as attrs (custom op bodies), nested ones too, each once and
        after the bodies it calls (the order a plan file stores them in)."""
        order, seen = [], set()
        stack = [(self, iter(self.nodes), iter(()))]
        while stack:  # iterative depth-first walk: callees are appended before their callers
            graph, nodes, attrs = stack[-1]
            body = next((v for v in attrs if isinstance(v, Graph) and id(v) not in seen), None)
            if body is not None:
                seen.add(id(body))
                stack.append((body, iter(body.nodes), iter(())))
                continue
            node = next(nodes, None)
            if node is not None:
                stack[-1] = (graph, nodes, iter(node.attrs.values()))
                continue
            stack.pop()
            if graph is not self:
                order.append(graph)
        return order

    def __str__(self) -> str:
        from .printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"
