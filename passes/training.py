"""The training passes of the pipeline: differentiate, guard_finite, apply_optimizer. Each is
a plain ``Graph -> Graph`` function; what they need besides the graph (which parameters to
differentiate, the optimizer groups) travels as plain data in ``graph.meta["training"]``,
and the gradients they make are found by value name."""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.errors import GraphcError
from ..ir.graph import Graph
from .autodiff import autodiff
from .distributed import average_gradients
from .guard import guard_finite as _guard, guard_values
from .optimizers import append_optimizer
from .rewrite import substitute

# graph.meta key: {"wrt": [param names], "groups": [...], "grads": {param: value name}} for
# gc.compile(model, loss_fn=, optimizer=); {"placeholders": [...], "losses": [...]} for a traced
# step function (graphc/core/step_trace.py), whose optimizer update is already in the graph.
TRAINING = "training"


def training_meta(graph: Graph) -> dict:
    meta = graph.meta.get(TRAINING)
    if not isinstance(meta, dict):
        raise GraphcError("the training passes need graph.meta['training'] (set by the training pipeline)")
    return meta


def _gradients(graph: Graph) -> dict:
    values = graph.value_by_name()
    return {param: values[name] if name is not None else None for param, name in training_meta(graph)["grads"].items()}


def differentiate(graph: Graph) -> Graph:
    """Append the backward graph of the loss (output 0) w.r.t. ``meta["training"]["wrt"]``;
    in a traced step, replace each gradient placeholder by its gradient instead. With
    ``meta["training"]["data_parallel"]`` the gradients are averaged over the processes
    (passes/distributed.py) before the guard and the update read them."""
    meta = training_meta(graph)
    if "placeholders" in meta:
        return _fill_placeholders(graph, meta)
    out, grads = autodiff(graph, graph.outputs[0], list(meta["wrt"]))
    if meta.get("data_parallel"):  # every process then applies the same, averaged gradients
        grads.update(average_gradients(Builder(out), list(grads.items()), meta["data_parallel"]["bucket_bytes"]))
    out.meta[TRAINING] = {**meta, "grads": {p: g.name if g is not None else None for p, g in grads.items()}}
    return out


def guard_finite(graph: Graph) -> Graph:
    """One ``assert_finite`` over the loss and every gradient, before any update."""
    meta = training_meta(graph)
    if "placeholders" in meta:
        if not meta["losses"]:
            return graph
        values = graph.value_by_name()
        losses = [(f"the loss{'' if i == 0 else f' of backward() call {i + 1}'}", values[name])
                  for i, name in enumerate(meta["losses"])]
        return guard_values(graph, losses + [(f"the gradient of {param}", values[name])
                                             for param, name in meta["gradients"]])
    return _guard(graph, graph.outputs[0], _gradients(graph))


def _fill_placeholders(graph: Graph, meta: dict) -> Graph:
    """Each ``backward()`` of a traced step left one placeholder input per parameter; derive
    that loss's gradients with the autodiff pass and splice its backward nodes in just before
    the first node that reads one of them (after the loss: they read forward values only)."""
    out, mapping, gradients = graph.copy(), {}, []
    by_loss: dict = {}
    for entry in meta["placeholders"]:
        by_loss.setdefault(entry["loss"], []).append(entry)
    for loss_name, entries in by_loss.items():
        values = out.value_by_name()
        read_at = {e["param"]: values[e["at"]] for e in entries if "at" in e}  # read after an update in the step
        diffed, grads = autodiff(out, values[loss_name], list(dict.fromkeys(e["param"] for e in entries)), read_at)
        builder = Builder(diffed, meta={"pass": "autodiff", "phase": "backward"})
        for param, grad in grads.items():
            if grad is None:  # reached only through integer ops: a zero gradient, as PyTorch gives
                ttype = out.state[param].type
                grads[param] = builder.emit1("full", [], {"shape": list(ttype.shape), "value": 0.0,
                                                          "dtype": ttype.dtype.name})
        if meta.get("data_parallel"):  # averaged where the backward ends, before anything reads them
            grads.update(average_gradients(builder, list(grads.items()), meta["data_parallel"]["bucket_bytes"]))
        placeholders = {id(values[e["value"]]) for e in entries}
        at = next((i for i, n in enumerate(out.nodes) if any(id(v) in placeholders for v in n.inputs)), len(out.nodes))
        forward = diffed.nodes[:len(out.nodes)]  # out's nodes, a scan among them with its saving twin
        diffed.nodes = forward[:at] + diffed.nodes[len(out.nodes):] + forward[at:]
        for e in entries:
            mapping[id(values[e["value"]])] = grads[e["param"]]
            gradients.append((e["param"], grads[e["param"]].name))
        out = diffed
    out = substitute(out, mapping)
    out.inputs = [v for v in out.inputs if id(v) not in mapping]
    out.meta[TRAINING] = {**meta, "gradients": gradients}
    return out


def apply_optimizer(graph: Graph) -> Graph:
    """The optimizer update of every parameter with a gradient, as graph ops."""
    return append_optimizer(graph, _gradients(graph), training_meta(graph)["groups"])
