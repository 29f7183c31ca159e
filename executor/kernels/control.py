"""Kernels of ``cond``, ``scan`` and ``while_loop``: a loop over a body's prepared steps.

A :class:`Body` binds a body graph to concrete input types once: every inner kernel is built
once, and every intermediate a kernel can write into (``writes_out``) gets its buffer once,
reused at every iteration. Only the body's results are new arrays per iteration (a carry
must outlive the next iteration); a result that may share memory with a body input (an
identity branch, a view of a scanned slice) is copied before it leaves the node.
"""
from __future__ import annotations

from ...ir.ops.control import split_scan, step_type
from .base import allocating_step, as_kernel
from .custom import batch_of


class Body:
    """``body(arrays) -> [arrays]``: one run of a body graph at fixed concrete types."""

    def __init__(self, xp, graph, in_types, rng):
        from . import TABLE, KernelSpec

        batch = batch_of([v.type for v in graph.inputs], in_types)
        bind = (lambda t: t.bind(batch)) if batch is not None else (lambda t: t)
        slots = {id(v): i for i, v in enumerate(graph.inputs)}
        root = list(range(len(graph.inputs)))  # slot -> the slot owning its memory (views share)
        prepared = []
        for node in graph.nodes:
            spec = KernelSpec(node.attrs, tuple(bind(v.type) for v in node.inputs),
                              tuple(bind(v.type) for v in node.outputs), rng)
            kernel = as_kernel(TABLE[node.op](xp, spec))
            ins = [slots[id(v)] for v in node.inputs]
            outs = []
            for v in node.outputs:
                slots[id(v)] = len(root)
                root.append(root[ins[kernel.view_of]] if kernel.view_of is not None else len(root))
                outs.append(slots[id(v)])
            prepared.append((kernel, ins, outs, spec.out_types))
        self.size, self.inputs = len(root), len(graph.inputs)
        self.out_slots = [slots[id(v)] for v in graph.outputs]
        kept = {root[s] for s in self.out_slots}  # buffers a result lives in: fresh every run
        self.aliases_input = [root[s] < self.inputs for s in self.out_slots]
        self.steps = [self._step(xp, kernel, ins, outs, types, kept, root) for kernel, ins, outs, types in prepared]

    @staticmethod
    def _step(xp, kernel, ins, outs, types, kept, root):
        run = kernel.run
        if kernel.writes_out and not any(root[s] in kept for s in outs):
            buffers = [xp.empty(t.shape, t.dtype.numpy) for t in types]  # planned once, reused every run
            out = buffers[0] if len(buffers) == 1 else tuple(buffers)

            def step(env):
                run(*[env[i] for i in ins], out=out)
                for s, buffer in zip(outs, buffers):
                    env[s] = buffer
            return step
        return allocating_step(run, tuple(ins), tuple(outs))

    def __call__(self, arrays) -> list:
        env = [None] * self.size
        env[:self.inputs] = arrays
        for step in self.steps:
            step(env)
        return [env[s] for s in self.out_slots]


def _own(xp, results, aliases) -> list:
    """Copy the results that may share memory with the node's inputs."""
    return [xp.array(r, copy=True) if alias else r for r, alias in zip(results, aliases)]


def _one_or_tuple(results):
    return results[0] if len(results) == 1 else tuple(results)


def _cond(xp, spec):
    types = spec.in_types[1:]
    branches = [Body(xp, spec.attrs[key], types, spec.rng) for key in ("true_branch", "false_branch")]

    def run(pred, *operands):
        body = branches[0] if bool(pred.reshape(())) else branches[1]
        return _one_or_tuple(_own(xp, body(list(operands)), body.aliases_input))
    return run


def _scan(xp, spec):
    attrs = spec.attrs
    init, xs, consts = split_scan(spec.in_types, attrs)
    dim, n_c = attrs["dim"], len(init)
    body = Body(xp, attrs["body"], [*init, *(step_type(t, dim) for t in xs), *consts], spec.rng)
    length = xs[0].shape[dim]
    ys_types = spec.out_types[n_c:n_c + len(attrs["body"].outputs) - n_c]
    order = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
    lead = (slice(None),) * dim

    def run(*arrays):
        carry, scanned, fixed = split_scan(arrays, attrs)
        ys = [xp.empty(t.shape, t.dtype.numpy) for t in ys_types]
        saved = [xp.empty((length,) + tuple(c.shape), c.dtype) for c in carry] if attrs["saves"] else []
        for pos in order:
            for s, c in zip(saved, carry):
                s[pos] = c
            key = (*lead, pos)
            results = body([*carry, *(x[key] for x in scanned), *fixed])
            carry = results[:n_c]
            for y, r in zip(ys, results[n_c:]):
                y[key] = r
        # a carry may be an input itself (no positions, or a body that passes it through)
        carry = [xp.array(c, copy=True) for c in carry] if length == 0 or any(body.aliases_input[:n_c]) else carry
        return _one_or_tuple([*carry, *ys, *saved])
    return run


def _while_loop(xp, spec):
    n = spec.attrs["carried"]
    cond = Body(xp, spec.attrs["cond"], spec.in_types, spec.rng)
    body = Body(xp, spec.attrs["body"], spec.in_types, spec.rng)

    def run(*arrays):
        carried, fixed = list(arrays[:n]), list(arrays[n:])
        while bool(cond([*carried, *fixed])[0].reshape(())):
            carried = body([*carried, *fixed])
        return _one_or_tuple([xp.array(c, copy=True) for c in carried])  # may be the inputs themselves
    return run


KERNELS = {"cond": _cond, "scan": _scan, "while_loop": _while_loop}
