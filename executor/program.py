"""Binding a graph to one batch size: a flat instruction list over numbered slots.

A :class:`Program` is what a Plan caches per batch size: each node becomes
``(run, input slots, output slots)`` where ``run`` is the backend kernel specialised to the
node's concrete shapes, so the per-step loop does no lookups.
"""
from __future__ import annotations

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from .kernels import KernelSpec


class Program:
    def __init__(self, graph: Graph, batch: int, backend, rng, constants: dict):
        self.batch = batch
        slots: dict[int, int] = {}

        def slot(value):
            if id(value) not in slots:
                slots[id(value)] = len(slots)
            return slots[id(value)]

        self.input_slots = [slot(v) for v in graph.inputs]
        self.state_slots = {name: slot(v) for name, v in graph.state.items()}
        const_slots = {name: slot(v) for name, v in graph.constants.items()}
        self.instructions = []
        self.nodes = graph.nodes
        for node in graph.nodes:
            spec = KernelSpec(node.attrs, tuple(v.type.bind(batch) for v in node.inputs),
                              tuple(v.type.bind(batch) for v in node.outputs), rng)
            try:
                run = backend.kernels[node.op](spec)
            except GraphcError as e:
                raise e.located(node.location()) from None
            self.instructions.append((run, tuple(slot(v) for v in node.inputs),
                                      tuple(slot(v) for v in node.outputs)))
        self.output_slots = [slot(v) for v in graph.outputs]
        self.update_slots = {name: slot(v) for name, v in graph.updates.items()}
        self.template = [None] * len(slots)
        for name, s in const_slots.items():
            self.template[s] = constants[name]

    def run(self, inputs: list, state: dict) -> list:
        env = list(self.template)
        for s, a in zip(self.input_slots, inputs):
            env[s] = a
        for name, s in self.state_slots.items():
            env[s] = state[name]
        index = 0
        try:
            for index, (run, ins, outs) in enumerate(self.instructions):
                result = run(*[env[i] for i in ins])
                if len(outs) == 1:
                    env[outs[0]] = result
                else:
                    for s, a in zip(outs, result):
                        env[s] = a
        except GraphcError as e:
            raise e.located(self.nodes[index].location()) from None
        except (ValueError, TypeError, ArithmeticError, IndexError, MemoryError) as e:
            node = self.nodes[index]
            raise GraphcError(f"kernel {node.op!r} failed at node {index}: {e}", node.location()) from e
        for name, s in self.update_slots.items():
            target = state[name]
            if env[s] is not target:
                target[...] = env[s]
        return [env[s] for s in self.output_slots]


def evaluate_node(node, arrays: list, backend=None) -> list:
    """Run one node on numpy arrays (constant folding uses this); shapes must be static."""
    from .backends import get_backend

    backend = backend or get_backend("cpu")
    spec = KernelSpec(node.attrs, tuple(v.type for v in node.inputs), tuple(v.type for v in node.outputs), None)
    result = backend.kernels[node.op](spec)(*arrays)
    return list(result) if len(node.outputs) > 1 else [result]
