"""Kernel of ``custom_call``: run the forward body's nodes in order with their own kernels.

The body's types may hold the batch symbol ``N`` (a body traced inside a model); the factory
binds them to the batch size the node's concrete input types show, and builds every inner
kernel once, as a plan builds its nodes' kernels. Compiled plans usually never get here: the
``inline_calls`` pass replaces the node with its body, so the arena and fusions see its ops.
"""
from __future__ import annotations

from ...ir.types import binding_of


def batch_of(symbolic: list, concrete: tuple) -> dict | None:
    """The binding (``{symbol: size}``) that turns the ``symbolic`` types into the
    ``concrete`` ones, or None when they hold no symbol."""
    return binding_of([t.shape for t in symbolic], [t.shape for t in concrete]) or None


def _custom_call(xp, spec):
    from . import TABLE, KernelSpec
    from .base import as_kernel

    body = spec.attrs["forward"]
    batch = batch_of([v.type for v in body.inputs], spec.in_types)

    def bound(value):
        return value.type.bind(batch) if batch is not None else value.type

    steps, views = [], {id(v) for v in body.inputs}  # values that may share an input's memory
    for node in body.nodes:
        inner = KernelSpec(node.attrs, tuple(bound(v) for v in node.inputs), tuple(bound(v) for v in node.outputs),
                           spec.rng)
        kernel = as_kernel(TABLE[node.op](xp, inner))
        if kernel.view_of is not None and id(node.inputs[kernel.view_of]) in views:
            views.update(id(v) for v in node.outputs)
        steps.append((kernel.run, [id(v) for v in node.inputs], [id(v) for v in node.outputs]))
    inputs, outputs = [id(v) for v in body.inputs], [id(v) for v in body.outputs]
    copies = [key in views for key in outputs]  # an output that is an input, or a view of one, gets its own copy

    def run(*arrays):
        env = dict(zip(inputs, arrays))
        for kernel, ins, outs in steps:
            result = kernel(*(env[k] for k in ins))
            env.update(zip(outs, result if len(outs) > 1 else (result,)))
        results = tuple(xp.array(env[k], copy=True) if copy else env[k] for k, copy in zip(outputs, copies))
        return results if len(results) > 1 else results[0]
    return run


KERNELS = {"custom_call": _custom_call}
