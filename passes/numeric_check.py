"""Numeric verification of passes: ``gc.compile(..., verify="numeric")``.

Before and after each pass the graph runs on the example inputs, node by node through the
evaluator the caller supplies (the executor's ``run_graph_node``: the one way to run a node),
and every value both graphs hold is compared: the outputs, the state updates and every node
output the pass kept (same name and type before and after). Values only the later graph has
(gradients after ``autodiff``, updated parameters after ``optimizer``) have nothing to be
compared with and are counted as new; so are values that read a gradient placeholder of a
traced step, which ``autodiff`` fills.

Precision. Float inputs, parameters, buffers and constants are widened to float64, and so is
every float32 value type (a ``cast`` or ``full`` to float32 becomes float64), when the op
registry's shape rules accept it (passes/widen.py); integer labels and indices stay integers. Where some op
cannot run in float64 the pass is checked in float32, and the record says why.

Tolerance. A value passes when ``max|after - before| <= rtol * scale``, ``scale`` being the
largest magnitude in the value, its counterpart and the values its node reads. Relative to
the tensor rather than to each element, because a value that cancels to about zero (the
gradient of a conv bias in front of BatchNorm: zero in exact arithmetic) carries rounding of
the size of its terms, not of itself:

- ``RTOL = 1e-9`` in float64. A pass that only regroups arithmetic (fusion, CSE, folding
  order) moves float64 results by ~1e-15 of the scale, 1e-12 after long reductions; 1e-9
  leaves a 1000x margin, while a wrong rewrite moves a value by a visible fraction of it.
- ``ROUNDED_RTOL = 1e-5`` for a pass that stores computed constants in a narrower dtype than
  the check runs in (``fold_bn`` computes in float64 and stores float32, ``fold_constants``
  computes and stores in the graph's float32): each stored number is off by up to float32's
  unit roundoff, 6e-8, which the layers after it may amplify; 1e-5 leaves a 100x margin.
- ``FLOAT32_RTOL = 1e-5`` when the check itself runs in float32 (the fallback): fused
  kernels and reordered sums differ by ~1e-7 of the scale there (the training tests measured
  up to 2.4e-7 between fused and unfused steps).

Integer and boolean values must match exactly; NaN and inf must sit at the same places.
Each run starts from fresh copies of the state (nothing leaks from one run into the next)
and from a generator seeded with the same seed (both runs draw the same dropout masks).
The graph after pass k is the one before pass k+1, so its run is reused: a pipeline of P
passes costs P + 1 interpreted runs and keeps two runs' values in memory at a time.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..ir.errors import GraphcError, VerifyError
from ..ir.graph import Graph
from ..ir.registry import get_op
from ..ir.types import BATCH, DType, TensorType
from .widen import Fallback, wide_nodes

RTOL = 1e-9
ROUNDED_RTOL = 1e-5
FLOAT32_RTOL = 1e-5
VERIFY_VALUES = "False, True (structure: ir.verify after each pass) or 'numeric' (structure and values)"


def check_verify(verify) -> None:
    """Refuse anything but the accepted ``verify`` values.

    >>> check_verify("numeric")
    >>> check_verify("fast")
    Traceback (most recent call last):
    graphc.ir.errors.GraphcError: verify must be False, True (structure: ir.verify after each pass) or ...
    """
    if not (isinstance(verify, bool) or (isinstance(verify, str) and verify == "numeric")):
        raise GraphcError(f"verify must be {VERIFY_VALUES}, got {verify!r}")


class Example(NamedTuple):
    """What the graphs run on: the user's example ``inputs`` (host arrays, in the graph's input
    order), ``state`` (name -> host array; optimizer state the passes add starts at zero, as in
    a new plan), ``rates`` (the learning rate of each optimizer group, fed to the inputs named
    in ``graph.meta["hyper_inputs"]``) and the dropout ``seed``."""

    inputs: list
    state: dict
    rates: tuple = ()
    seed: int = 0


# ---- running a graph --------------------------------------------------------------------
def _batch(graph: Graph, inputs: list):
    """The example batch size: the leading dim of the first input whose leading dim is N."""
    for value, array in zip(graph.inputs, inputs):
        if value.type.shape and value.type.shape[0] == BATCH:
            return int(np.shape(array)[0])
    return None


def _as(array, ttype: TensorType, dtype: str, batch) -> np.ndarray:
    """A fresh host copy in the run's precision (float32 widened in a float64 run)."""
    want = np.float64 if dtype == "float64" and ttype.dtype is DType.float32 else ttype.dtype.numpy
    if array is None:  # optimizer state starts at zero, as in a new plan
        return np.zeros(ttype.bind(batch).shape if batch is not None else ttype.shape, want)
    return np.array(array, dtype=want, copy=True)


def _feeds(graph: Graph, example: Example, dtype: str, batch) -> dict:
    """Values by id for the leaves. A traced step's gradient placeholders (inputs with no
    example) are zeros; ``unfed`` keeps what reads them from being compared across autodiff."""
    rates = dict(zip(graph.meta.get("hyper_inputs", []), example.rates))
    env = {}
    for index, v in enumerate(graph.inputs):
        if index < len(example.inputs):
            env[id(v)] = _as(example.inputs[index], v.type, dtype, batch)
        elif v.name in rates:
            env[id(v)] = np.asarray(rates[v.name], v.type.dtype.numpy)
        else:
            env[id(v)] = _as(None, v.type, dtype, batch)
    env.update((id(v), _as(example.state.get(name), v.type, dtype, batch)) for name, v in graph.state.items())
    env.update((id(v), _as(graph.constant_data[name], v.type, dtype, batch)) for name, v in graph.constants.items())
    return env


def run_graph(graph: Graph, nodes: list, example: Example, dtype: str, evaluate) -> dict:
    """Every value of ``graph`` on ``example``, by name, in ``dtype`` ("float64" or "float32");
    ``nodes`` are the graph's nodes as the evaluator runs them (``wide_nodes`` in float64)."""
    batch = _batch(graph, example.inputs)
    env = _feeds(graph, example, dtype, batch)
    rng = np.random.default_rng(example.seed)  # the same draws for every run
    for node, runnable in zip(graph.nodes, nodes):  # runnable: the node with its widened types
        effects = get_op(node.op).effects
        if effects == "check":  # a guard proves nothing here; the plan keeps it
            results = [np.ones((), bool) for _ in node.outputs]
        elif effects == "collective":  # as in one process: the check stays local, never talks to the others
            results = [env[id(v)].copy() for v in node.inputs]
        else:
            try:
                results = evaluate(runnable, [env[id(v)] for v in node.inputs], rng=rng, batch=batch)
            except GraphcError as e:
                raise e.located(node.location()) from None
        for value, wide, array in zip(node.outputs, runnable.outputs, results):
            array = np.asarray(array)
            if array.dtype != wide.type.dtype.numpy:
                raise Fallback(f"the {node.op} kernel returns {array.dtype} for {wide.type.dtype.name}")
            env[id(value)] = array
    named = {v.name: env[id(v)] for v in graph.leaf_values()}
    named.update((v.name, env[id(v)]) for n in graph.nodes for v in n.outputs)
    return named


# ---- comparing two runs -----------------------------------------------------------------
def _magnitude(array: np.ndarray) -> float:
    """The largest finite ``|x|`` (two reductions, no temporary array, in the usual case)."""
    if array.size == 0:
        return 0.0
    values = array.astype(np.int64) if array.dtype == bool else array
    largest = max(float(values.max()), -float(values.min()))
    if math.isfinite(largest):
        return largest
    finite = values[np.isfinite(values)]
    return float(np.abs(finite).max(initial=0))


def difference(before: np.ndarray, after: np.ndarray) -> float:
    """``max |after - before|`` over finite entries; inf when shapes or NaN/inf places differ.

    >>> difference(np.array([1.0, np.nan]), np.array([1.5, np.nan]))
    0.5
    """
    if before.shape != after.shape:
        return math.inf
    a, b = before.astype(np.float64, copy=False), after.astype(np.float64, copy=False)
    if a.size == 0:
        return 0.0
    largest = float(np.abs(a - b).max())
    if math.isfinite(largest):  # the usual case: one temporary, no masks
        return largest
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb) or not np.array_equal(a[~fa], b[~fb], equal_nan=True):
        return math.inf
    return float(np.abs(a[fa] - b[fb]).max(initial=0))


class Pair(NamedTuple):
    label: str  # "%7", "output loss", "@bn.running_mean (update)"
    before: str  # value names in the two graphs
    after: str
    output: bool  # a graph output or a state update


def unfed(before: Graph, after: Graph) -> set:
    """Names of values that read an input only one of the graphs has: a traced step's gradient
    placeholders, which autodiff replaces by the gradients (zeros before, gradients after)."""
    names = {v.name for v in before.inputs} ^ {v.name for v in after.inputs}
    for graph in (before, after):
        for node in graph.nodes:
            if any(v.name in names for v in node.inputs):
                names.update(v.name for v in node.outputs)
    return names


def pairs(before: Graph, after: Graph) -> tuple[list, int]:
    """The comparable values in the later graph's order (so the first one over its tolerance
    is the first node the pass broke); and how many of the later graph's values are new
    (made by the pass, or reading an input the pass added or removed)."""
    unfed_names = unfed(before, after)
    kept = {v.name: v.type for n in before.nodes for v in n.outputs if v.name not in unfed_names}
    later = [*after.constants.values(), *(v for n in after.nodes for v in n.outputs)]
    roots = [(f"output {name}", b.name, a.name) for name, b, a in zip(after.output_names, before.outputs, after.outputs)
             if len(before.outputs) == len(after.outputs)]
    roots += [(f"@{name} (update)", before.updates[name].name, v.name) for name, v in after.updates.items()
              if name in before.updates]
    outputs = [Pair(label, b, a, True) for label, b, a in roots
               if b not in unfed_names and a not in unfed_names]
    seen = {p.after for p in outputs}
    found = [Pair(f"%{v.name}", v.name, v.name, False) for v in later
             if kept.get(v.name) == v.type and v.name not in seen and v.name not in unfed_names]
    leaves = {v.name for v in before.leaf_values()}  # frozen state and old constants are not new
    new = sum(1 for v in later if kept.get(v.name) != v.type and v.name not in leaves)
    new += sum(1 for n in after.updates if n not in before.updates)
    order = {v.name: i for i, v in enumerate(later)}  # leaves (inputs, state) first
    return sorted(outputs + found, key=lambda p: order.get(p.after, -1)), new


def rounded(before: Graph, after: Graph) -> set:
    """Names of the later graph's values computed from float32 constants the pass made (folded
    BatchNorm weights, folded constants): they are rounded to float32, not float64."""
    affected = {name for name, v in after.constants.items()
                if name not in before.constants and name not in before.state and v.type.dtype is DType.float32}
    for node in after.nodes:
        if affected and any(v.name in affected for v in node.inputs):
            affected.update(v.name for v in node.outputs)
    return affected


class Row(NamedTuple):
    pair: Pair
    abs: float  # max |after - before|
    scale: float
    rtol: float  # 0 for integers and booleans: they must match exactly

    @property
    def rel(self) -> float:
        return self.abs / self.scale if self.scale > 0 else (0.0 if self.abs == 0 else math.inf)

    @property
    def over(self) -> bool:
        return self.abs > self.rtol * self.scale


def _measure(pair: Pair, old: dict, new: dict, node, rtol: float, magnitude) -> Row:
    """The scale is the largest magnitude of the two values and of the float values the later
    graph's node reads to make this one."""
    a, b = old[pair.before], new[pair.after]
    reads = [new[v.name] for v in node.inputs if v.type.dtype.is_float] if node is not None else []
    scale = max([magnitude(a), magnitude(b)] + [magnitude(r) for r in reads])
    return Row(pair, difference(a, b), scale, rtol if a.dtype.kind == "f" and b.dtype.kind == "f" else 0.0)


def _memo(function):
    """``function(array)`` computed once per array (a value is read by several nodes)."""
    seen: dict = {}

    def once(array):
        if id(array) not in seen:
            seen[id(array)] = (array, function(array))  # holding the array keeps its id unique
        return seen[id(array)][1]

    return once


# ---- the check of one pass ----------------------------------------------------------------
class NumericCheck:
    """Checks each pass of one pipeline run; keeps the latest graph's runs for the next pass."""

    def __init__(self, example: Example, evaluate):
        if evaluate is None:
            raise GraphcError("verify='numeric' needs an evaluator (run_graph_node) to run the graphs")
        self.example, self.evaluate = example, evaluate
        # (id(graph), dtype) -> (graph, values by name); holding the graph keeps its id unique
        self.runs: dict = {}
        self.wide: dict = {}  # id(graph) -> (graph, its nodes widened to float64, or why it cannot be)

    def widened(self, graph: Graph) -> list:
        if id(graph) not in self.wide:
            try:
                self.wide[id(graph)] = (graph, wide_nodes(graph))
            except Fallback as e:
                self.wide[id(graph)] = (graph, e)
        result = self.wide[id(graph)][1]
        if isinstance(result, Fallback):
            raise result
        return result

    def run(self, graph: Graph, dtype: str, when: str) -> dict:
        key = (id(graph), dtype)
        if key not in self.runs:
            nodes = self.widened(graph) if dtype == "float64" else graph.nodes
            try:
                self.runs[key] = (graph, run_graph(graph, nodes, self.example, dtype, self.evaluate))
            except Fallback:
                raise
            except GraphcError as e:
                raise VerifyError(f"verify='numeric': the graph {when} failed to run: {e.message}", e.where) from None
        return self.runs[key][1]

    def runs_of(self, before: Graph, after: Graph, name: str) -> tuple:
        """``(dtype, note, before's run, after's run)``: float64 unless either graph cannot."""
        try:
            return "float64", "", self.run(before, "float64", f"before pass {name!r}"), self.run(
                after, "float64", f"after pass {name!r}")
        except Fallback as e:
            note = f"checked in float32: {e}"
        return "float32", note, self.run(before, "float32", f"before pass {name!r}"), self.run(
            after, "float32", f"after pass {name!r}")

    def check(self, before: Graph, after: Graph, name: str) -> dict:
        """The record of pass ``name`` (``before`` -> ``after``); raises ``VerifyError`` naming
        the pass and the first value over its tolerance, with its node's location."""
        dtype, note, old, new = self.runs_of(before, after, name)
        self.runs = {k: v for k, v in self.runs.items() if v[0] is after}
        self.wide = {k: v for k, v in self.wide.items() if v[0] is after}
        compared, count_new = pairs(before, after)
        loose = rounded(before, after) if dtype == "float64" else set()
        producers = {v.name: n for n in after.nodes for v in n.outputs}
        base = RTOL if dtype == "float64" else FLOAT32_RTOL
        magnitude = _memo(_magnitude)
        rows = [_measure(p, old, new, producers.get(p.after), ROUNDED_RTOL if p.after in loose else base, magnitude)
                for p in compared]
        over = [row for row in rows if row.over]
        if over:
            raise _failure(name, over, dtype, producers)
        return _entry(name, dtype, base, rows, count_new, note, _batch(after, self.example.inputs), producers)


def _entry(name: str, dtype: str, base: float, rows: list, new: int, note: str, batch, producers: dict) -> dict:
    """One pass's record: plain data (the plan file keeps it in ``graph.meta["verification"]``)."""
    outputs = [row for row in rows if row.pair.output]
    worst = max(rows, key=lambda row: row.rel, default=None)
    node = producers.get(worst.pair.after) if worst is not None and worst.abs > 0 else None
    return {"pass": name, "dtype": dtype, "batch": batch or 0, "rtol": max([base] + [r.rtol for r in rows]),
            "outputs": len(outputs), "kept": len(rows) - len(outputs), "new": new,
            "max_abs": max((r.abs for r in rows), default=0.0), "max_rel": worst.rel if worst else 0.0,
            "outputs_max_rel": max((r.rel for r in outputs), default=0.0),
            "worst": worst.pair.label if worst is not None and worst.abs > 0 else "",
            "where": (node.location() or "") if node is not None else "", "note": note}


def _failure(name: str, over: list, dtype: str, producers: dict) -> VerifyError:
    """The error for a pass that changed values: the first one over its tolerance in the later
    graph's order, its node and where the user wrote it, and the worst."""
    first, worst = over[0], max(over, key=lambda row: row.rel)
    node = producers.get(first.pair.after)
    what = first.pair.label
    if node is not None:
        what += f" ({node.op}{'' if what == '%' + first.pair.after else ' %' + first.pair.after})"
    limit = "must match exactly" if first.rtol == 0 else f"over the {dtype} tolerance {first.rtol:g} of the scale"
    text = (f"verify='numeric': pass {name!r} changed {what} by {first.abs:.3g} ({first.rel:.3g} of its scale "
            f"{first.scale:.3g}; {limit})")
    if len(over) > 1:
        text += f"; {len(over)} values differ, the worst {worst.pair.label} by {worst.rel:.3g} of its scale"
    return VerifyError(text, node.location() if node is not None else None)
