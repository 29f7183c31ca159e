"""Debugging helpers: compare two backends node by node."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .executor.backends import get_backend
from .executor.program import Program
from .ir.errors import GraphcError


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
    arrays, batch = plan._check_inputs(list(inputs))
    arrays += [np.asarray(float(g["lr"]), np.float64) for g in plan.param_groups]
    state = {k: plan.backend.to_numpy(v).copy() for k, v in plan._state.items()}
    rng_state = plan.rng.bit_generator.state
    programs = []
    for backend in (first, second):
        rng = np.random.default_rng()
        rng.bit_generator.state = rng_state
        consts = {k: backend.asarray(v) for k, v in plan.graph.constant_data.items()}
        programs.append(Program(plan.graph, batch, backend, rng, consts,
                                {k: backend.asarray(v.copy()) for k, v in state.items()}, planned=False))
    ref, other = programs
    env = list(ref.template)
    for s, a in zip(ref.input_slots, arrays):
        env[s] = first.asarray(a)
    for index, node in enumerate(plan.graph.nodes):
        ins = [env[ref.slots[id(v)]] for v in node.inputs]
        with np.errstate(all="ignore"):
            expected = ref.runs[index](*ins)
            got = other.runs[index](*[second.asarray(first.to_numpy(a)) for a in ins])
        expected = expected if len(node.outputs) > 1 else (expected,)
        got = got if len(node.outputs) > 1 else (got,)
        for k, (value, a, b) in enumerate(zip(node.outputs, expected, got)):
            env[ref.slots[id(value)]] = a
            a, b = first.to_numpy(a), second.to_numpy(b)
            if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.shape == b.shape else np.inf
                return Comparison((first.name, second.name), index + 1,
                                  Mismatch(index, node.op, node.location() or "", k, diff))
    if not plan.graph.nodes:
        raise GraphcError("the plan has no nodes to compare")
    return Comparison((first.name, second.name), len(plan.graph.nodes), None)
