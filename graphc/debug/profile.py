"""``gc.debug.profile``: where a plan's step spends its time, node by node and per op kind."""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..ir.errors import GraphcError


@dataclass
class NodeTime:
    """One node's mean time per step."""

    index: int
    op: str
    phase: str  # "forward", "backward" or "update"
    where: str | None  # "features.0 (Conv2d) at net.py:12"
    ms: float
    share: float  # of the summed node time


@dataclass
class OpTime:
    """All nodes of one op kind together."""

    op: str
    count: int
    ms: float
    share: float


@dataclass
class Profile:
    """What ``profile`` measured; ``str()`` is the table, the fields are the data."""

    device: str
    batch: int
    steps: int
    step_ms: float  # median wall time of a whole step (nodes plus the executor's own work)
    nodes: list = field(default_factory=list)  # NodeTime, slowest first
    ops: list = field(default_factory=list)  # OpTime, slowest first

    def table(self, limit: int | None = 15) -> str:
        """The per-op-kind table and the ``limit`` slowest nodes (all with ``limit=None``)."""
        node_ms = sum(n.ms for n in self.nodes)
        head = (f"{len(self.nodes)} nodes, batch {self.batch}, {self.device}, mean of {self.steps} steps: "
                f"{node_ms:.3f} ms in nodes, step {self.step_ms:.3f} ms (median)")
        lines = [head, "", f"{'op':<24} {'nodes':>5} {'ms':>9} {'share':>6}"]
        lines += [f"{o.op:<24} {o.count:>5} {o.ms:>9.3f} {o.share:>6.1%}" for o in self.ops[:limit]]
        lines += ["", f"{'node':>5} {'op':<24} {'phase':<8} {'ms':>9} {'share':>6}  where"]
        lines += [f"{n.index:>5} {n.op:<24} {n.phase:<8} {n.ms:>9.3f} {n.share:>6.1%}  {n.where or ''}"
                  for n in self.nodes[:limit]]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def profile(plan, *inputs, steps: int = 10) -> Profile:
    """Time every node of ``plan`` over ``steps`` steps on ``inputs`` (after one warm-up
    step) and return a :class:`Profile`: per node and per op kind, slowest first, with each
    node's module path and source line. It runs the plan's own kernels and memory plan, on
    copies of its state: the plan, its parameters and its RNG are not changed. Each node is
    timed alone (on a GPU the backend is synchronised after every node).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval(), (np.ones((2, 8), np.float32),))
    >>> report = gc.debug.profile(plan, np.ones((2, 8), np.float32), steps=3)
    >>> [n.op for n in report.nodes], report.nodes[0].where.split(" at ")[0]
    (['linear_relu'], '0 (Linear)')
    >>> print(report.table().splitlines()[2].split())
    ['op', 'nodes', 'ms', 'share']
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise GraphcError(f"profile: steps must be a positive integer, got {steps!r}")
    arrays, batch = plan._check_inputs(plan.flat_inputs(inputs))
    arrays += plan.hyper_arrays()
    backend, graph = plan.backend, plan.graph
    program = plan.detached_program(batch)
    seconds = [0.0] * len(graph.nodes)
    with np.errstate(all="ignore"):
        program.run(arrays)  # warm-up: first-touch pages, BLAS buffers
        walls = []
        for _ in range(steps):
            start = time.perf_counter()
            program.run(arrays, seconds)
            walls.append(time.perf_counter() - start)
    return _summarize(graph, seconds, steps, batch, backend.name, float(np.median(walls)) * 1e3)


def _summarize(graph, seconds, steps, batch, device, step_ms) -> Profile:
    total = sum(seconds) or 1.0
    nodes = [NodeTime(i, node.op, node.meta.get("phase") or "forward", node.location(), s / steps * 1e3, s / total)
             for i, (node, s) in enumerate(zip(graph.nodes, seconds))]
    by_op: dict = defaultdict(lambda: [0, 0.0])
    for node, s in zip(graph.nodes, seconds):
        by_op[node.op][0] += 1
        by_op[node.op][1] += s
    ops = [OpTime(op, count, s / steps * 1e3, s / total) for op, (count, s) in by_op.items()]
    return Profile(device, batch, steps, step_ms, sorted(nodes, key=lambda n: -n.ms), sorted(ops, key=lambda o: -o.ms))
