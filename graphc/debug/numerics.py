"""Where numbers go wrong: compare two backends node by node, and find the first node that
makes a NaN or an infinity."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..executor.backends import get_backend
from ..executor.run_node import run_graph_node
from ..ir.errors import GraphcError

__all__ = ["Comparison", "Mismatch", "NonFiniteNode", "compare_backends", "find_nonfinite"]


@dataclass
class Mismatch:
    index: int
    op: str
    where: str
    output: int
    max_abs_diff: float

    def __str__(self) -> str:
        return (f"node {self.index} ({self.op}) output {self.output} differs by {self.max_abs_diff:.3g}"
                f"{' at ' + self.where if self.where else ''}")


@dataclass
class Comparison:
    devices: tuple
    nodes_checked: int
    first_mismatch: Mismatch | None

    def __str__(self) -> str:
        head = f"compared {self.nodes_checked} nodes on {self.devices[0]} and {self.devices[1]}: "
        return head + ("all within tolerance" if self.first_mismatch is None else f"first mismatch: {self.first_mismatch}")


def compare_backends(plan, inputs, devices=("cpu", "cuda"), rtol: float = 1e-4, atol: float = 1e-5) -> Comparison:
    """Run ``plan``'s graph on two backends node by node and report the first node whose
    outputs differ beyond ``rtol``/``atol``.

    Each node of the second backend gets the first backend's inputs, so a mismatch points at
    that node's kernel rather than at differences accumulated upstream. Both runs start from
    copies of the plan's state and RNG, so the plan itself is not changed.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Sequential(nn.Linear(3, 4), nn.ReLU()).eval(), (np.ones((2, 3), np.float32),))
    >>> print(compare_backends(plan, [np.ones((2, 3), np.float32)], devices=("cpu", "cpu")))
    compared 1 nodes on cpu and cpu: all within tolerance
    """
    first, second = (get_backend(d) if isinstance(d, str) else d for d in devices)
    if not plan.graph.nodes:
        raise GraphcError("the plan has no nodes to compare")
    env, batch = _step_inputs(plan, inputs, first)
    rngs = [np.random.default_rng() for _ in range(2)]
    for rng in rngs:  # both draw what the plan would: same dropout masks
        rng.bit_generator.state = plan.rng.bit_generator.state
    for index, node in enumerate(plan.graph.nodes):
        ins = [env[id(v)] for v in node.inputs]
        expected = run_graph_node(node, ins, first, rngs[0], batch)
        got = run_graph_node(node, [second.asarray(first.to_numpy(a)) for a in ins], second, rngs[1], batch)
        for k, (value, a, b) in enumerate(zip(node.outputs, expected, got)):
            env[id(value)] = a
            a, b = first.to_numpy(a), second.to_numpy(b)
            if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.shape == b.shape else np.inf
                return Comparison((first.name, second.name), index + 1,
                                  Mismatch(index, node.op, node.location() or "", k, diff))
    return Comparison((first.name, second.name), len(plan.graph.nodes), None)


@dataclass
class NonFiniteNode:
    """The first node of a step that produced NaN or inf (``gc.debug.find_nonfinite``)."""

    index: int
    op: str
    phase: str  # "forward", "backward" or "update"
    module: str | None
    source: str | None
    output: int
    nan: int
    inf: int
    grad_of: str | None = None  # backward nodes: the forward node they differentiate, with its location
    where: str | None = None  # "features.0 (Conv2d) at net.py:12"

    def __str__(self) -> str:
        text = (f"{self.phase} node {self.index} ({self.op}){' [' + self.where + ']' if self.where else ''}: "
                f"output {self.output} has {self.nan} NaN and {self.inf} infinite values")
        return text + (f"; it is the gradient of {self.grad_of}" if self.grad_of else "")


def find_nonfinite(plan, *inputs) -> NonFiniteNode | None:
    """Rerun one step of ``plan`` node by node on copies of its state and return the first
    node (forward, backward or update) whose output holds NaN or inf, or None. The plan and
    its state are not changed.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> class LogRelu(nn.Module):
    ...     def forward(self, x):
    ...         return x.relu().log()
    >>> plan = gc.compile(LogRelu(), (np.ones((1, 2), np.float32),))
    >>> found = find_nonfinite(plan, np.full((1, 2), -100.0, np.float32))
    >>> found.op, found.phase, found.inf
    ('log', 'forward', 2)
    """
    from ..ir.registry import get_op

    backend = plan.backend
    env, batch = _step_inputs(plan, inputs, backend)
    rng = np.random.default_rng()
    rng.bit_generator.state = plan.rng.bit_generator.state
    producers = {f"%{v.name}": n for n in _with_fused_ops(plan.graph.nodes) for v in n.outputs}
    for index, node in enumerate(plan.graph.nodes):
        if get_op(node.op).effects == "check":
            continue
        if node.op == "fused_elementwise":  # its ops one by one: the report names the op itself
            inner = {id(b): env[id(v)] for b, v in zip(node.attrs["body"].inputs, node.inputs)}
            found = _first_nonfinite(index, node.attrs["body"].nodes, inner, backend, rng, batch, producers)
            if found is None:
                env.update((id(v), inner[id(b)]) for b, v in zip(node.attrs["body"].outputs, node.outputs))
        else:
            found = _first_nonfinite(index, [node], env, backend, rng, batch, producers)
        if found is not None:
            return found
    return None


def _with_fused_ops(nodes):
    """The nodes, a fused_elementwise node replaced by its body's ops (the names a report uses)."""
    for node in nodes:
        yield from node.attrs["body"].nodes if node.op == "fused_elementwise" else (node,)


def _first_nonfinite(index, nodes, env, backend, rng, batch, producers) -> NonFiniteNode | None:
    """Run ``nodes`` in order over ``env`` (values by id); the first non-finite float output,
    reported as node ``index`` of the plan (a fused node's body shares its index)."""
    for node in nodes:
        results = run_graph_node(node, [env[id(v)] for v in node.inputs], backend, rng, batch)
        for k, (value, array) in enumerate(zip(node.outputs, results)):
            env[id(value)] = array
            if value.type.dtype.is_float:
                host = backend.to_numpy(array)
                if not np.isfinite(host).all():
                    return _nonfinite_node(index, node, k, host, producers)
    return None


def _step_inputs(plan, inputs, backend):
    """Values by id for one step: the user's inputs, the learning rates, copies of the state
    (kernels never write their inputs, but a copy keeps the plan's arrays out of reach)."""
    arrays, batch = plan._check_inputs(plan.flat_inputs(inputs))
    arrays += plan.hyper_arrays()
    graph = plan.graph
    env = {id(v): backend.asarray(plan.backend.to_numpy(a)) for v, a in zip(graph.inputs, arrays)}
    env.update({id(v): backend.asarray(plan.backend.to_numpy(plan.state[name]).copy())
                for name, v in graph.state.items()})
    env.update({id(v): backend.asarray(graph.constant_data[name]) for name, v in graph.constants.items()})
    return env, batch


def _nonfinite_node(index, node, output, array, producers) -> NonFiniteNode:
    phase = node.meta.get("phase") or "forward"
    grad_of = node.meta.get("grad_of")
    if grad_of:  # "%7 (conv2d)" -> add where that forward node came from
        forward = producers.get(grad_of.split(" ")[0])
        where = forward.location() if forward is not None else None
        grad_of = f"{grad_of} at {where}" if where else grad_of
    return NonFiniteNode(index, node.op, phase, node.meta.get("module"), node.meta.get("source"), output,
                         int(np.isnan(array).sum()), int(np.isinf(array).sum()), grad_of, node.location())
