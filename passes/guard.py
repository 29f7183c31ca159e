"""The non-finite guard of a training step: one ``assert_finite`` node over the loss and
every gradient, placed after the backward pass and before any optimizer update.

The executor never writes state in place before this node (see ``Program``), so when it
raises, parameters, optimizer state and BatchNorm statistics are exactly as they were.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.graph import Graph, Value


def guard_finite(graph: Graph, loss: Value, grads: dict) -> Graph:
    """Append ``assert_finite(loss, grad...)``; its names say what each input is.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> from graphc.compile import trace_model
    >>> from graphc.passes.autodiff import autodiff
    >>> model = nn.Linear(3, 1)
    >>> graph, _ = trace_model(lambda x: model(x).sum(), (np.ones((4, 3), np.float32),), root=model)
    >>> graph, grads = autodiff(graph, graph.outputs[0], ["weight", "bias"])
    >>> guard_finite(graph, graph.outputs[0], grads).nodes[-1].attrs["names"]
    ('the loss', 'the gradient of weight', 'the gradient of bias')
    """
    checked = [("the loss", loss)] + [(f"the gradient of {name}", g) for name, g in grads.items() if g is not None]
    return guard_values(graph, checked)


def guard_values(graph: Graph, checked: list) -> Graph:
    """Append one ``assert_finite`` over ``checked`` (``(what it is, Value)`` pairs, the loss
    first), pointing at the loss's source line."""
    out = graph.copy()
    producer = graph.producers().get(id(checked[0][1]))
    meta = {"pass": "guard_finite", "phase": "check"}
    if producer is not None and producer.meta.get("source"):  # point at the user's loss line
        meta["source"] = producer.meta["source"]
    Builder(out, meta=meta).emit(
        "assert_finite", [v for _, v in checked], {"names": [name for name, _ in checked]})
    return out
