"""Binding a graph to one batch size: a flat list of steps over numbered slots and an arena.

A :class:`Program` is what a Plan caches per batch size. Each node's kernel is specialised
to the concrete shapes once; its outputs are placed by the memory planner:

- kernels with ``writes_out`` (see ``kernels.base.Kernel``) write into planned buffers: arena
  regions reused once a value is dead, or the state array itself when an elementwise update
  can run in place (``alias_safe``);
- kernels with ``view_of = i`` return a view of input ``i`` (reshape, permute, slice):
  the viewed buffer stays live as long as the view;
- other kernels allocate their results, as do kernels whose results the caller receives.

In steady state a step allocates only what it returns plus kernels' own temporaries.
"""
from __future__ import annotations

import time

import numpy as np

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from ..ir.registry import get_op
from .budget import out_of_memory, refuse, value_bytes
from .kernels import KernelSpec
from .kernels.base import allocating_step, as_kernel, keeps_declared_dtypes
from .memory import Buffer, assign_offsets


class Program:
    def __init__(self, graph: Graph, batch: int, backend, rng, constants: dict, state: dict, planned: bool = True,
                 budget: int | None = None, allocate: bool = True):
        """``planned=False`` makes every kernel allocate its outputs (the baseline the
        planner is measured and tested against). ``budget``: bytes no value and no arena may
        exceed, checked before anything is allocated. ``allocate=False`` plans without
        allocating the arena (for reports); such a program cannot run."""
        self.batch, self.nodes, self.backend, self.planned = batch, graph.nodes, backend, planned
        self._bind = bind = _binder(batch)
        if budget is not None:
            _check_values(graph, bind, batch, budget)
        self.slots: dict[int, int] = {}
        self.types: list = []
        for v in [*graph.inputs, *graph.state.values(), *graph.constants.values()]:
            self._slot(v)
        self.input_slots = [self.slots[id(v)] for v in graph.inputs]
        runs, specs = [], []
        for node in graph.nodes:
            spec = KernelSpec(node.attrs, tuple(bind(v.type) for v in node.inputs),
                              tuple(bind(v.type) for v in node.outputs), rng)
            try:
                runs.append(keeps_declared_dtypes(as_kernel(backend.kernels[node.op](spec)), spec))
            except GraphcError as e:
                raise e.located(node.location()) from None
            except Exception as e:
                raise GraphcError(f"cannot prepare kernel {node.op!r}: {e}", node.location()) from e
            specs.append(spec)
            for v in node.outputs:
                self._slot(v)
        self.runs = runs  # the specialised kernels, for tools that step through nodes
        self.template = [None] * len(self.types)
        for name, v in graph.state.items():
            self.template[self.slots[id(v)]] = state[name]
        for name, v in graph.constants.items():
            self.template[self.slots[id(v)]] = constants[name]
        self.state_bytes = sum(int(state[k].nbytes) for k in graph.state) + sum(int(c.nbytes) for c in constants.values())
        self.output_slots = [self.slots[id(v)] for v in graph.outputs]
        self._plan_memory(graph, runs, state, budget, allocate)
        if not allocate:
            self.steps = []
            return
        self.steps = [self._make_step(run, node, i) for i, (run, node) in enumerate(zip(runs, graph.nodes))]

    def _slot(self, value):
        if id(value) not in self.slots:
            self.slots[id(value)] = len(self.types)
            self.types.append(self._bind(value.type))
        return self.slots[id(value)]

    # ---- memory planning ------------------------------------------------------------
    def _plan_memory(self, graph, runs, state, budget=None, allocate=True) -> None:
        slot = self.slots
        n = len(graph.nodes)
        root = list(range(len(self.types)))  # slot -> slot owning its bytes (views share)
        kinds = []
        for node, run in zip(graph.nodes, runs):
            if run.view_of is not None:
                root[slot[id(node.outputs[0])]] = root[slot[id(node.inputs[run.view_of])]]
            writes = self.planned and run.writes_out
            kinds.append("view" if run.view_of is not None else "out" if writes else "alloc")
        last_read = {}
        for i, node in enumerate(graph.nodes):
            for v in node.inputs:
                last_read[root[slot[id(v)]]] = i
        returned = {root[s] for s in self.output_slots}
        for s in returned | {root[slot[id(v)]] for v in graph.updates.values()}:
            last_read[s] = n  # read after the last step: by the caller, or by the copy into state
        producer_of = {id(v): i for i, nd in enumerate(graph.nodes) for v in nd.outputs}
        # elementwise updates write straight into the state array once nothing reads the old value,
        # but never before a check node (the non-finite guard): a step it stops must change nothing
        checks = [i for i, nd in enumerate(graph.nodes) if get_op(nd.op).effects == "check"]
        last_check = max(checks, default=-1)
        self.copy_back = []
        in_place = {}
        for name, value in graph.updates.items():
            s, target = slot[id(value)], slot[id(graph.state[name])]
            producer = producer_of.get(id(value))
            if (producer is not None and producer > last_check and kinds[producer] == "out"
                    and runs[producer].alias_safe
                    and root[s] == s and s not in returned and s not in in_place
                    and last_read.get(root[target], -1) <= producer and root[target] == target):
                in_place[s] = name
                self.template[s] = state[name]
            else:
                self.copy_back.append((s, state[name]))
        self.fresh: set[int] = set()  # nodes whose outputs are allocated per step
        buffers = []
        for i, (node, kind) in enumerate(zip(graph.nodes, kinds)):
            outs = [slot[id(v)] for v in node.outputs]
            if kind != "out" or any(s in returned for s in outs):
                if kind == "out":
                    self.fresh.add(i)
                continue
            for s in outs:
                if s not in in_place:
                    nbytes = value_bytes(self.types[s])  # Python ints: no wrap-around
                    buffers.append(Buffer(s, nbytes, i, max(i, last_read.get(s, i))))
        self.kinds = kinds
        self.buffers = buffers
        self.arena_bytes = assign_offsets(buffers)
        self.unplanned_bytes = sum(b.nbytes for b in buffers)
        if budget is not None and self.arena_bytes > budget:
            refuse(*self._arena_described(graph), budget, self.batch, self._arena_location(graph))
        if not allocate:
            self.arena = None
            return
        try:
            self.arena = self.backend.xp.empty(self.arena_bytes, dtype=np.uint8)
        except MemoryError:
            out_of_memory(*self._arena_described(graph), self.batch, self._arena_location(graph))
        for b in buffers:
            t = self.types[b.key]
            self.template[b.key] = self.arena[b.offset:b.offset + b.nbytes].view(t.dtype.numpy).reshape(t.shape)

    def _largest_buffer(self):
        return max(self.buffers, key=lambda b: b.nbytes)

    def _arena_described(self, graph) -> tuple:
        """``("the activation arena (largest buffer: ...)", bytes)`` for errors."""
        biggest = self._largest_buffer()
        op = graph.nodes[biggest.start].op
        return f"the activation arena (largest buffer: {op} output {self.types[biggest.key]})", self.arena_bytes

    def _arena_location(self, graph):
        return graph.nodes[self._largest_buffer().start].location()

    # ---- steps ------------------------------------------------------------------------
    def _make_step(self, kernel, node, index):
        run = kernel.run  # the bare function: one call less per node and step
        ins = tuple(self.slots[id(v)] for v in node.inputs)
        outs = tuple(self.slots[id(v)] for v in node.outputs)
        if self.kinds[index] == "out" and index not in self.fresh:
            out = self.template[outs[0]] if len(outs) == 1 else tuple(self.template[s] for s in outs)
            if len(ins) == 1:
                a, = ins
                return lambda env: run(env[a], out=out)
            if len(ins) == 2:
                a, b = ins
                return lambda env: run(env[a], env[b], out=out)
            return lambda env: run(*[env[i] for i in ins], out=out)
        return allocating_step(run, ins, outs)

    def run(self, inputs: list, seconds: list | None = None) -> list:
        """One step. ``seconds`` (one float per node) gets each node's wall time added, the
        backend synchronised after each node (the profiler's path; the plain one is untimed)."""
        env = list(self.template)
        for s, a in zip(self.input_slots, inputs):
            env[s] = a
        index = 0
        try:
            if seconds is None:
                for index, step in enumerate(self.steps):
                    step(env)
            else:
                sync, clock = self.backend.synchronize, time.perf_counter
                sync()
                for index, step in enumerate(self.steps):
                    start = clock()
                    step(env)
                    sync()
                    seconds[index] += clock() - start
        except GraphcError as e:
            raise e.located(self.nodes[index].location()) from None
        except Exception as e:  # any kernel failure becomes a GraphcError naming the node
            node = self.nodes[index]
            raise GraphcError(f"kernel {node.op!r} failed at node {index}: {e}", node.location()) from e
        for s, target in self.copy_back:
            if env[s] is not target:
                target[...] = env[s]
        return [env[s] for s in self.output_slots]


def _binder(batch: int):
    """``type -> the type bound at batch``, binding each distinct type once: a plan's values share
    few types, and binding (parsing symbolic dims, building a type) dominated long plans' builds."""
    bound: dict = {}

    def bind(tensor_type):
        concrete = bound.get(tensor_type)
        if concrete is None:
            concrete = bound[tensor_type] = tensor_type.bind(batch)
        return concrete
    return bind


def _check_values(graph: Graph, bind, batch: int, budget: int) -> None:
    """Refuse any single value over the budget before a kernel or the arena allocates."""
    for node in graph.nodes:
        for v in node.outputs:
            nbytes = value_bytes(bind(v.type))
            if nbytes > budget:
                refuse(f"{node.op} output %{v.name} {v.type}", nbytes, budget, batch, node.location())
