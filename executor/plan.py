"""A compiled plan: a graph, its state (shared with the model) and a backend.

Calling a plan binds the batch size from the inputs, builds (once per batch size) a
:class:`~graphc.executor.program.Program`, runs it and writes state updates back in place.

Threads: a Program's arena and kernel scratch serve one call at a time. Calls to a stateless
plan (inference) from several threads each get their own Program: the cached one when it
is free, else a spare (kept for reuse, at most ``max_spares`` per batch size). Calls to a
plan that updates state (training) run one at a time, as the steps must be sequential.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

from ..ir.errors import NonFiniteError, ShapeError
from ..ir.graph import Graph
from ..ir.registry import get_op
from ..ir.types import BATCH, as_binding, dim_terms
from .backends import backend_of, get_backend
from .budget import check_budget, default_budget
from .plan_meta import describe_array, flat_call_inputs, nest_outputs, tensor_array
from .program import Program


class Plan:
    """Run a compiled graph. Inference plans return the model's output(s).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> model = nn.Linear(4, 2).eval()
    >>> infer = gc.compile(model, example_inputs=(np.zeros((8, 4), np.float32),))
    >>> infer(np.ones((3, 4), np.float32)).shape
    (3, 2)
    """

    def __init__(self, graph: Graph, state: dict, *, device="cpu", seed: int = 0, kind: str = "inference",
                 param_groups: list | None = None, max_programs: int = 4, memory_budget: int | None = None):
        self.graph = graph
        self.kind = kind
        self.backend = get_backend(device)
        self.device = self.backend.name
        # Bytes no single value and no arena may exceed (checked before allocating).
        self.memory_budget = check_budget(memory_budget) or default_budget(self.backend)
        # Shared with the model where given; optimizer state starts at zero (PyTorch's lazy init).
        self._state = {name: self.backend.asarray(state[name]) if name in state
                       else self.backend.xp.zeros(v.type.shape, v.type.dtype.numpy) for name, v in graph.state.items()}
        self._constants = {k: self.backend.asarray(v) for k, v in graph.constant_data.items()}
        self.rng = np.random.default_rng(seed)
        self._programs: dict[int, Program] = {}  # per batch size, least recently used first
        self.max_programs = max_programs  # each holds an arena and kernel scratch
        self.max_spares = 4  # extra programs per batch size kept for concurrent callers
        self._spares: dict[int, list] = {}
        self._busy: set[int] = set()  # ids of programs running a call now
        self._lock = threading.Lock()  # guards the caches above
        # A plan that writes state (parameters, BN statistics, optimizer state) runs one call at a time.
        self._serial = threading.Lock() if graph.updates else contextlib.nullcontext()
        # Only a plan with both random ops and a non-finite guard must restore its RNG after a
        # refused step; reading the generator's state every step elsewhere would be wasted.
        effects = {get_op(n.op).effects for n in graph.nodes}
        self._guards_rng = {"random", "check"} <= effects
        self._collective = "collective" in effects  # data-parallel: save() is a collective call too
        self._none_outputs = tuple(graph.meta.get("none_outputs", ()))  # the traced function returned None there
        self._returns_all = graph.meta.get("returns") == "all"  # a compiled step function: what it returned
        self._gradients = list(graph.meta.get("gradients", []))  # {param, accumulates} per trailing output
        self.gradients: dict = {}  # the last call's gradients, by state name (see _take_gradients)
        self.on_gradients = None  # called with them after each call
        self.before_save = None  # called first by save(); raises what the file cannot hold
        self._last_batch = None
        self._expected: dict[int, list] = {}
        # a plan specialised on Python numbers (graph.meta["guards"]) builds another for other values
        # through this (set by gc.compile for inference plans; None: a clear error instead)
        self.respecialize = None
        self._specialised: dict = {}
        self.hyper_inputs = list(graph.meta.get("hyper_inputs", []))
        # Each group's "lr" is read every step (schedulers edit these dicts).
        self.param_groups = param_groups if param_groups is not None else [{"lr": 0.0} for _ in self.hyper_inputs]
        user_inputs = graph.inputs[:len(graph.inputs) - len(self.hyper_inputs)]
        self.input_names = [v.name for v in user_inputs]
        # (input, axis, symbol, coefficient) of each user input dim that gives a symbol its size
        self._symbol_dims = [(i, axis, powers[0][0], coef) for i, v in enumerate(user_inputs)
                             for axis, (coef, powers) in enumerate(map(dim_terms, v.type.shape))
                             if len(powers) == 1 and powers[0][1] == 1 and coef]
        self.output_names = list(graph.output_names) or [v.name for v in graph.outputs]
        self.metadata: dict = {}  # free-form plain data saved with the plan
        # Learning-rate schedulers driving param_groups; a training plan saves their state. Loaded
        # by the executor alone they are plain {"type", "state"} entries; gc.load rebuilds them.
        self.lr_schedulers: list = []
        self.producer = self.format_version = None  # set when loaded from a file

    @classmethod
    def from_parts(cls, parts, device="cpu", memory_budget: int | None = None) -> Plan:
        """The plan a file's checked parts (``serialize.PlanParts``) describe, on ``device``."""
        plan = cls(parts.graph, parts.state, device=device, kind=parts.kind, param_groups=parts.param_groups,
                   memory_budget=memory_budget)
        plan.rng.bit_generator.state = parts.rng_state
        plan.metadata = parts.metadata
        plan.lr_schedulers = parts.lr_schedulers
        plan.producer = parts.producer
        plan.format_version = parts.format_version
        return plan

    # ---- running ----------------------------------------------------------------
    def __call__(self, *inputs, return_outputs: bool = False, **named):
        """Inference: the output(s). Training: one step, returning the loss as a 0-d array,
        or ``(loss, outputs)`` with ``return_outputs=True``; a compiled step function returns
        what the function returned. Inputs may also be passed by
        name (``plan(x=...)``)."""
        if named:
            inputs = self._inputs_by_name(inputs, named)
        outputs = self.run(self.flat_inputs(inputs))
        if self._gradients:
            outputs = self._take_gradients(outputs)
        for position in self._none_outputs:
            outputs.insert(position, None)
        tree = self.graph.meta.get("output_tree")
        if tree is not None and (self.kind != "training" or self._returns_all):
            return nest_outputs(tree, outputs)  # nested outputs, as the traced function returned them
        if self.kind == "training" and not self._returns_all:
            loss, model_outputs = outputs[0], outputs[1:]
            if not return_outputs:
                return loss
            return loss, (model_outputs[0] if len(model_outputs) == 1 else tuple(model_outputs))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _take_gradients(self, outputs: list) -> list:
        """A function that only differentiates (an L-BFGS closure) returns its parameters'
        gradients after its own outputs: keep them in ``self.gradients`` (state name -> array)
        and hand them to ``on_gradients`` (set by ``gc.compile``: it puts them on the
        parameters' ``.grad``); return the function's own outputs."""
        count = len(self._gradients)
        own, grads = outputs[:-count], outputs[-count:]
        self.gradients = {entry["param"]: grad.copy() for entry, grad in zip(self._gradients, grads)}
        if self.on_gradients is not None:
            self.on_gradients(self.gradients)
        return own

    def flat_inputs(self, inputs) -> list:
        """The call's inputs as the plan's inputs: a tuple among the traced function's inputs
        (an LSTM's ``(h0, c0)``) is one plan input per tensor (``graph.meta["input_tree"]``)."""
        tree = self.graph.meta.get("input_tree")
        return list(inputs) if tree is None else flat_call_inputs(tree, inputs)

    def _inputs_by_name(self, positional, named) -> list:
        unknown = sorted(set(named) - set(self.input_names))
        if unknown:
            raise ShapeError(f"unknown input name(s) {unknown}; this plan takes {self.input_names}")
        names = self.input_names[len(positional):]
        missing = [n for n in names if n not in named]
        if missing:
            raise ShapeError(f"missing input(s) {missing}; this plan takes {self.input_names}")
        return list(positional) + [named[n] for n in names]

    def run(self, inputs: list) -> list:
        """Run once on a list of user inputs; return the list of graph outputs."""
        other = self._specialised_for(inputs)
        if other is not None:
            return other.run(inputs)
        arrays, batch = self._check_inputs(inputs)
        with self._serial:
            arrays += self.hyper_arrays()
            program = self._checkout(batch)
            rng_state = self.rng.bit_generator.state if self._guards_rng else None
            try:
                with np.errstate(all="ignore"):
                    outs = program.run(arrays)
            except NonFiniteError as e:
                if rng_state is not None:  # a stopped step must not advance the RNG either
                    self.rng.bit_generator.state = rng_state
                raise NonFiniteError(f"training step {self.step_count + 1}: {e.message}; parameters, optimizer "
                                     "state and BatchNorm statistics are unchanged (gc.debug.find_nonfinite(plan, "
                                     "*inputs) names the first node that made it)", e.where) from None
            finally:
                self._checkin(batch, program)
        return [self.backend.asarray(o) for o in outs]

    def hyper_arrays(self) -> list:
        """The hyper-parameter inputs (each group's learning rate, float64 0-d arrays on the
        plan's device: cupy kernels take no host arrays) that follow the user's inputs: the one
        place the plan turns ``param_groups`` into graph inputs."""
        rates = [float(group["lr"]) for group in self.param_groups]
        for index, lr in enumerate(rates):
            if not math.isfinite(lr):  # it would silently turn every parameter into NaN
                raise NonFiniteError(f"training step {self.step_count + 1}: the learning rate of parameter group "
                                     f"{index} is {lr}; no state was changed")
        return [self.backend.asarray(np.asarray(lr, np.float64)) for lr in rates]

    @property
    def step_count(self) -> int:
        """Training steps run so far (0 for inference plans)."""
        step = self._state.get("optim.step")
        return int(step) if step is not None else 0

    def _check_inputs(self, inputs: list):
        expected = self.graph.inputs[:len(self.input_names)]
        if len(inputs) != len(expected):
            names = ", ".join(self.input_names)
            raise ShapeError(f"plan takes {len(expected)} input(s) ({names}), got {len(inputs)}")
        arrays = [self._as_array(a, v.name) for a, v in zip(inputs, expected)]
        sizes = {}
        for index, axis, symbol, coef in self._symbol_dims:  # read once per plan, not parsed per call
            shape = arrays[index].shape
            if axis < len(shape):
                sizes.setdefault(symbol, shape[axis] // coef)
        batch = sizes.pop(BATCH, None)
        self._check_fixed(sizes)
        fixed = self.graph.meta.get("fixed_batch")
        if fixed and batch is not None and batch != fixed["size"]:
            raise ShapeError(f"this plan only runs at batch size {fixed['size']}, got {batch}: the traced code used "
                             f"the batch size as a plain number ({fixed['where']}); keep it symbolic "
                             "(x.shape[0] in reshape/view) or compile at this batch size")
        batch = batch if batch is not None else 0
        if sizes:  # symbols beyond the batch (dynamic_dims): programs are per binding of all of them
            batch = tuple(sorted({BATCH: batch, **sizes}.items()))
        wanted = self._expected.get(batch)
        if wanted is None:  # bound shapes per batch size, computed once (the per-call check is cheap)
            wanted = [(t.shape, t.dtype.numpy) for t in (v.type.bind(batch) for v in expected)]
            if len(self._expected) < 64:
                self._expected[batch] = wanted
        for a, v, (shape, dtype) in zip(arrays, expected, wanted):
            if fixed and a.ndim and shape and a.shape[0] != shape[0] and a.shape[0] != fixed["size"] \
                    and shape[0] == fixed["size"]:  # a plan traced at a fixed batch: say why it is fixed
                raise ShapeError(f"this plan only runs at batch size {fixed['size']}, got {a.shape[0]} (input "
                                 f"{v.name!r}): it was traced at that size because {fixed['where']}; "
                                 "compile at this batch size")
            if a.dtype != dtype or a.shape != shape:
                bound = ", ".join(f"{k}={n}" for k, n in as_binding(batch).items())
                shown = str(v.type) + (f" ({bound})" if not v.type.is_static else "")
                hint = f" (cast it: .astype(np.{dtype.name}))" if a.shape == shape else ""
                raise ShapeError(f"input {v.name!r}: expected {shown}, got {describe_array(a)}{hint}")
        return arrays, batch

    def _specialised_for(self, inputs: list):
        """None when the inputs meet the guards (Python numbers the trace used as shapes or
        counts); else the plan for their values, built once (at most 8 kept)."""
        guards = self.graph.meta.get("guards")
        if not guards:
            return None
        names = [v.name for v in self.graph.inputs[:len(inputs)]]
        values = {name: np.asarray(self.backend.to_numpy(x) if hasattr(x, "__array__") else x).item()
                  for name, x in zip(names, inputs) if name in guards}
        missed = {name: v for name, v in values.items() if v != guards[name]["value"]}
        if not missed:
            return None
        key = tuple(sorted(values.items()))
        if key not in self._specialised:
            if self.respecialize is None:
                name, value = next(iter(missed.items()))
                raise ShapeError(f"this plan was specialised on {name}={guards[name]['value']} (a Python number the "
                                 f"trace used as a shape or a count: {guards[name]['where']}), got {value}: compile it "
                                 "for that value (gc.compile of an inference function or model does so by itself)")
            if len(self._specialised) >= 8:
                del self._specialised[next(iter(self._specialised))]
            self._specialised[key] = self.respecialize(inputs)
        return self._specialised[key]

    def _check_fixed(self, sizes: dict) -> None:
        for name, fixed in self.graph.meta.get("fixed_dims", {}).items():
            if name in sizes and sizes[name] != fixed["size"]:
                raise ShapeError(f"this plan only runs with {name}={fixed['size']}, got {sizes[name]}: the traced code "
                                 f"used that dim as a plain number ({fixed['where']}); keep it symbolic or compile at "
                                 "this size")

    def _as_array(self, data, name):
        if isinstance(data, self.backend.xp.ndarray):
            return data
        backing = tensor_array(data)
        if backing is not None:  # an eager gc.Tensor: its own array, copied only across devices
            if isinstance(backing, self.backend.xp.ndarray):
                return backing
            return self.backend.asarray(backend_of(backing).to_numpy(backing))
        if hasattr(data, "__array__") or isinstance(data, (list, tuple, int, float)):
            return self.backend.asarray(np.asarray(data))
        raise ShapeError(f"input {name!r}: expected an array, got {type(data).__name__}")

    # ---- state ------------------------------------------------------------------
    @property
    def state(self) -> dict:
        """Every state array by name, live: parameters, buffers and optimizer state (``optim.*``)."""
        return self._state

    def state_dict(self) -> dict:
        """Current parameters and buffers by the model's state_dict names (live arrays)."""
        roles = self.graph.state_roles
        return {k: v for k, v in self._state.items() if roles[k] in ("param", "buffer")}

    def memory_report(self, batch: int | None = None):
        """The memory plan for ``batch`` (default: the batch size run last): arena bytes,
        bytes without reuse, the live peak, and the activations kept for the backward pass
        with their shapes, sizes and source lines."""
        from ..ir.errors import GraphcError
        from .memory import MemoryReport

        if batch is None and self._last_batch is None:
            raise GraphcError("run the plan once, or pass batch=, before asking for its memory report")
        batch = self._last_batch if batch is None else batch
        with self._lock:
            program = self._programs.get(batch)
        return MemoryReport(program or self._build(batch, allocate=False), self.graph)

    def _program(self, batch: int) -> Program:
        """The cached program for ``batch``, built once and kept while it is among the
        ``max_programs`` most recently used batch sizes."""
        with self._lock:
            return self._cached(batch)

    def _cached(self, batch: int) -> Program:
        program = self._programs.pop(batch, None)
        if program is None:
            program = self._build(batch)
        self._programs[batch] = program
        while len(self._programs) > max(1, self.max_programs):
            evicted = next(iter(self._programs))
            del self._programs[evicted]
            self._spares.pop(evicted, None)
        return program

    def _build(self, batch: int, allocate: bool = True) -> Program:
        return Program(self.graph, batch, self.backend, self.rng, self._constants, self._state,
                       budget=self.memory_budget, allocate=allocate)

    def detached_program(self, batch: int) -> Program:
        """A program for ``batch`` over copies of the state and the RNG: tools such as
        ``gc.debug.profile`` run the plan's own kernels and memory plan without changing it."""
        rng = np.random.default_rng()
        rng.bit_generator.state = self.rng.bit_generator.state
        state = {name: array.copy() for name, array in self._state.items()}
        return Program(self.graph, batch, self.backend, rng, self._constants, state, budget=self.memory_budget)

    def _checkout(self, batch: int) -> Program:
        """A program no other call is using: the cached one, a spare, or a new spare."""
        with self._lock:
            self._last_batch = batch
            program = self._cached(batch)
            if id(program) in self._busy:
                spares = self._spares.get(batch)
                program = spares.pop() if spares else None
            if program is not None:
                self._busy.add(id(program))
                return program
        program = self._build(batch)  # outside the lock: other batch sizes keep running
        with self._lock:
            self._busy.add(id(program))
        return program

    def _checkin(self, batch: int, program: Program) -> None:
        with self._lock:
            self._busy.discard(id(program))
            if self._programs.get(batch) is not program:
                spares = self._spares.setdefault(batch, []) if batch in self._programs else []
                if len(spares) < self.max_spares:
                    spares.append(program)

    def save(self, path) -> None:
        """Write the plan (graph, weights, optimizer/BN/RNG state, step) to one file, a msgpack
        header followed by the tensors as one raw section, atomically; ``gc.load(path)`` runs it
        with no model code. In a data-parallel job every process calls ``save`` with the same
        path and rank 0 writes the file; a call from one process alone is a GraphcError after
        the process group's timeout."""
        from .comm import agree, group
        from .serialize import save_plan

        if self.before_save is not None:  # gc.compile's refusals of what a file cannot hold yet
            self.before_save()
        pg = group()
        if pg is None or pg.size == 1 or not self._collective:
            save_plan(self, path, self.metadata)
            return
        # A data-parallel plan: every process holds the same state, so rank 0 writes the one
        # file (the same as a single process's) and the barrier keeps the others from racing it.
        agree(pg, os.fspath(path), f"plan.save({os.fspath(path)!r})")
        if pg.rank == 0:
            save_plan(self, path, self.metadata)
        pg.comm.Barrier()

    def __repr__(self) -> str:
        return f"<Plan {self.kind} {self.graph.name}: {len(self.graph.nodes)} nodes on {self.device}>"


def load_plan(path, device="cpu", memory_budget: int | None = None) -> Plan:
    """Read a plan file (``serialize.read_plan``: every problem is a ``PlanFormatError`` naming
    ``path``) and build the plan on ``device``."""
    from .serialize import read_plan

    return Plan.from_parts(read_plan(path), device, memory_budget)


def plan_from_bytes(data, device="cpu", memory_budget: int | None = None) -> Plan:
    """A plan from a file's bytes (any buffer; ``serialize.read_plan_bytes``)."""
    from .serialize import read_plan_bytes

    return Plan.from_parts(read_plan_bytes(data), device, memory_budget)
