"""The pass manager and the pipelines, defined here and nowhere else.

A pipeline is a list of steps; a step is required (the graph would be wrong without it:
freezing, autodiff, the optimizer update) or optional (``passes="none"`` drops it, a list of
names keeps the named ones). Every pass records its name and node counts in
``graph.meta["passes"]``; ``verify=True`` runs ``ir.verify`` after each, ``verify="numeric"``
also runs the example inputs through the graph before and after each and compares the values
(passes/numeric_check.py), recording the differences in ``graph.meta["verification"]``.

- inference: inline_calls (custom ops' bodies) -> dce -> cse -> fold_constants -> fuse_conv_bn
  -> fuse_conv_relu -> fuse_linear_relu -> fuse_elementwise
- training: fusions on the forward graph (their fused ops carry fused backwards), then
  autodiff, the non-finite guard and the optimizer update, then inline_calls -> cse -> dce
  -> fuse_elementwise (last everywhere: it groups the backward's and the update's ops too)
- step (a traced training step function): the training pipeline without its optimizer step,
  since ``optimizer.step()`` recorded the update while tracing
- export: freeze (parameters become constants) -> inline_calls -> fold_bn -> fold_constants ->
  cse -> dce -> fusions (the ONNX writer writes a fused_elementwise node's ops one by one)
- import (an ONNX model): export without freeze, since its weights are constants already, and
  with fuse_linear_bias and fuse_rsqrt, which put ONNX's spellings back into graphc's ops
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from ..ir.verify import verify as verify_graph
from .cleanup import cse, dce, fold_constants
from .freeze import fold_bn
from .inline import inline_calls
from .fuse_elementwise import fuse_elementwise
from .fusion import fuse_conv_bn, fuse_conv_relu, fuse_linear_bias, fuse_linear_relu, fuse_rsqrt
from .numeric_check import Example, NumericCheck, check_verify
from .training import TRAINING, apply_optimizer, differentiate, guard_finite


class Step(NamedTuple):
    name: str
    required: bool = False


_FUSIONS = [Step("fuse_conv_bn"), Step("fuse_conv_relu"), Step("fuse_linear_relu")]
PIPELINES = {
    "inference": [Step("inline_calls"), Step("dce"), Step("cse"), Step("fold_constants"), *_FUSIONS,
                  Step("fuse_elementwise")],
    # custom ops are inlined after autodiff, which must use their own backward
    "training": [Step("fuse_linear_relu"), Step("fuse_conv_bn"), Step("fuse_conv_relu"),
                 Step("autodiff", True), Step("guard_finite", True), Step("optimizer", True), Step("inline_calls"),
                 Step("cse"), Step("dce"), Step("fuse_elementwise")],
    # a traced step function: its optimizer update is already in the graph (optimizer.step())
    "step": [Step("fuse_linear_relu"), Step("fuse_conv_bn"), Step("fuse_conv_relu"), Step("autodiff", True),
             Step("guard_finite", True), Step("inline_calls"), Step("cse"), Step("dce"), Step("fuse_elementwise")],
    "export": [Step("freeze", True), Step("inline_calls"), Step("fold_bn"), Step("fold_constants"), Step("cse"),
               Step("dce"), *_FUSIONS, Step("fuse_elementwise")],
    # an imported ONNX model: already frozen (its weights are constants)
    "import": [Step("fold_bn"), Step("fold_constants"), Step("cse"), Step("dce"), Step("fuse_linear_bias"),
               Step("fuse_rsqrt"), *_FUSIONS, Step("fuse_elementwise")],
}
OPTIONAL = {s.name for steps in PIPELINES.values() for s in steps if not s.required}
INFERENCE_DEFAULT = [s.name for s in PIPELINES["inference"]]


def pass_table(evaluate=None) -> dict:
    """Name -> ``Graph -> Graph``. ``evaluate(node, arrays)`` runs a node (for folding)."""
    table = {"dce": dce, "cse": cse, "fuse_linear_relu": fuse_linear_relu, "fuse_conv_bn": fuse_conv_bn,
             "fuse_conv_relu": fuse_conv_relu, "fuse_linear_bias": fuse_linear_bias, "fuse_rsqrt": fuse_rsqrt,
             "fold_bn": fold_bn, "autodiff": differentiate, "inline_calls": inline_calls,
             "guard_finite": guard_finite, "optimizer": apply_optimizer,
             "fuse_elementwise": fuse_elementwise}
    if evaluate is not None:
        table["fold_constants"] = partial(fold_constants, evaluate=evaluate)
    return table


def resolve(passes, pipeline: str, skip=()) -> list[str]:
    """The step names of ``pipeline`` to run: ``"default"`` all, ``"none"`` the required ones,
    a list of names the required ones plus those named. ``skip`` drops steps (the guard, when
    ``check_finite=False``)."""
    if passes == "default":
        wanted = None
    elif passes == "none" or passes is None:
        wanted = set()
    elif isinstance(passes, str) or not all(isinstance(p, str) for p in passes):
        raise GraphcError(f"passes must be 'default', 'none' or a list of pass names, got {passes!r}")
    else:
        unknown = [p for p in passes if p not in OPTIONAL]
        if unknown:
            raise GraphcError(f"unknown passes {unknown}; known: {sorted(OPTIONAL)}")
        wanted = set(passes)
    steps = PIPELINES[pipeline]
    names = [s.name for s in steps if s.name not in skip and (s.required or wanted is None or s.name in wanted)]
    if wanted:  # named passes the pipeline does not list run after it, in the order given
        names += [p for p in passes if p not in names]
    return names


def record(graph: Graph, name: str, nodes_before: int) -> Graph:
    graph.meta["passes"] = list(graph.meta.get("passes", [])) + [
        {"name": name, "nodes_before": nodes_before, "nodes_after": len(graph.nodes)}]
    return graph


def run_passes(graph: Graph, names: list, evaluate=None, verify=False, extra: dict | None = None,
               example: Example | None = None) -> Graph:
    """Run the named passes in order; each plan records node counts before/after each pass.
    ``extra``: passes with their arguments bound (``freeze`` with the weights). ``verify``:
    False, True (``ir.verify`` after each pass) or ``"numeric"`` (that, and the values of
    ``example`` compared before and after each pass; ``evaluate`` runs the nodes)."""
    check_verify(verify)
    table = {**pass_table(evaluate), **(extra or {})}
    numeric = _numeric_check(verify, example, evaluate)
    records = []
    for name in names:
        if name not in table:
            raise GraphcError(f"pass {name!r} is not available here")
        before, count = graph, len(graph.nodes)
        graph = record(table[name](graph), name, count)
        if verify:
            _verify_structure(graph, name)
        if numeric is not None:
            records.append(numeric.check(before, graph, name))
    if numeric is not None:  # accumulates over pipelines, as meta["passes"] does
        graph.meta["verification"] = list(graph.meta.get("verification", [])) + records
    graph.meta.pop(TRAINING, None)  # the training passes' working data is not part of the plan
    return graph


def _numeric_check(verify, example, evaluate) -> NumericCheck | None:
    if verify != "numeric":
        return None
    if example is None:
        raise GraphcError("verify='numeric' needs the example inputs to run the graph on")
    return NumericCheck(example, evaluate)


def _verify_structure(graph: Graph, name: str) -> None:
    try:
        verify_graph(graph)
    except GraphcError as e:
        raise GraphcError(f"graph invalid after pass {name!r}: {e.message}", e.where) from None


def run_pipeline(graph: Graph, pipeline: str, passes="default", evaluate=None, verify=False,
                 skip=(), extra: dict | None = None, example: Example | None = None) -> Graph:
    """Run ``pipeline`` (``"inference"``, ``"training"`` or ``"export"``) on ``graph``."""
    return run_passes(graph, resolve(passes, pipeline, skip), evaluate, verify, extra, example)
