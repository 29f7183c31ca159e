"""The training passes of the pipeline: differentiate, guard_finite, apply_optimizer. Each is
a plain ``Graph -> Graph`` function; what they need besides the graph (which parameters to
differentiate, the optimizer groups) travels as plain data in ``graph.meta["training"]``,
and the gradients they make are found by value name."""
from __future__ import annotations

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from .autodiff import autodiff
from .guard import guard_finite as _guard
from .optimizers import append_optimizer

TRAINING = "training"  # graph.meta key: {"wrt": [param names], "groups": [...], "grads": {param: value name}}


def training_meta(graph: Graph) -> dict:
    meta = graph.meta.get(TRAINING)
    if not isinstance(meta, dict):
        raise GraphcError("the training passes need graph.meta['training'] (set by the training pipeline)")
    return meta


def _gradients(graph: Graph) -> dict:
    values = graph.value_by_name()
    return {param: values[name] if name is not None else None for param, name in training_meta(graph)["grads"].items()}


def differentiate(graph: Graph) -> Graph:
    """Append the backward graph of the loss (output 0) w.r.t. ``meta["training"]["wrt"]``."""
    meta = training_meta(graph)
    out, grads = autodiff(graph, graph.outputs[0], list(meta["wrt"]))
    out.meta[TRAINING] = {**meta, "grads": {p: g.name if g is not None else None for p, g in grads.items()}}
    return out


def guard_finite(graph: Graph) -> Graph:
    """One ``assert_finite`` over the loss and every gradient, before any update."""
    return _guard(graph, graph.outputs[0], _gradients(graph))


def apply_optimizer(graph: Graph) -> Graph:
    """The optimizer update of every parameter with a gradient, as graph ops."""
    return append_optimizer(graph, _gradients(graph), training_meta(graph)["groups"])
