"""The pass manager: run named passes in order, record what each did, optionally verify.

Pipelines:
- inference: dce -> cse -> fold_constants -> fuse_conv_bn -> fuse_conv_relu -> fuse_linear_relu
- training: fusions on the forward graph (fuse_linear_relu, fuse_conv_bn, fuse_conv_relu:
  their fused ops carry fused backwards), then autodiff + optimizer update, then cse -> dce.
"""
from __future__ import annotations

from functools import partial

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from ..ir.verify import verify as verify_graph
from .cleanup import cse, dce, fold_constants
from .freeze import fold_bn
from .fusion import fuse_conv_bn, fuse_conv_relu, fuse_linear_relu

FORWARD_PASSES = ("fuse_linear_relu", "fuse_conv_bn", "fuse_conv_relu")
INFERENCE_DEFAULT = ["dce", "cse", "fold_constants", "fuse_conv_bn", "fuse_conv_relu", "fuse_linear_relu"]
TRAINING_DEFAULT = ["fuse_linear_relu", "fuse_conv_bn", "fuse_conv_relu", "cse", "dce"]


def pass_table(evaluate=None) -> dict:
    """Name -> ``Graph -> Graph``. ``evaluate(node, arrays)`` runs a node (for folding)."""
    table = {"dce": dce, "cse": cse, "fuse_linear_relu": fuse_linear_relu, "fuse_conv_bn": fuse_conv_bn,
             "fuse_conv_relu": fuse_conv_relu, "fold_bn": fold_bn}
    if evaluate is not None:
        table["fold_constants"] = partial(fold_constants, evaluate=evaluate)
    return table


def resolve(passes, kind: str) -> list[str]:
    """``"default"`` / ``"none"`` / a list of names -> the list of names to run."""
    if passes == "default":
        return list(TRAINING_DEFAULT if kind == "training" else INFERENCE_DEFAULT)
    if passes == "none" or passes is None:
        return []
    if isinstance(passes, str) or not all(isinstance(p, str) for p in passes):
        raise GraphcError(f"passes must be 'default', 'none' or a list of pass names, got {passes!r}")
    known = set(pass_table(lambda n, a: a)) | {"fold_constants"}
    unknown = [p for p in passes if p not in known]
    if unknown:
        raise GraphcError(f"unknown passes {unknown}; known: {sorted(known)}")
    return list(passes)


def record(graph: Graph, name: str, nodes_before: int) -> Graph:
    graph.meta["passes"] = list(graph.meta.get("passes", [])) + [
        {"name": name, "nodes_before": nodes_before, "nodes_after": len(graph.nodes)}]
    return graph


def run_passes(graph: Graph, names: list, evaluate=None, verify: bool = False) -> Graph:
    """Run the named passes in order; each plan records node counts before/after each pass."""
    table = pass_table(evaluate)
    for name in names:
        if name not in table:
            raise GraphcError(f"pass {name!r} is not available here")
        before = len(graph.nodes)
        graph = record(table[name](graph), name, before)
        if verify:
            try:
                verify_graph(graph)
            except GraphcError as e:
                raise GraphcError(f"graph invalid after pass {name!r}: {e.message}", e.where) from None
    return graph
