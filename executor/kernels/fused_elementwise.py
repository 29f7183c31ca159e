"""Kernel of ``fused_elementwise``: one compiled loop over the group, or its ops one by one.

With numba (the ``fast`` extra) on the CPU the body becomes one loop (``_loops``), over both
cores for large groups, from the kernel's third call on (``_loops.Tiered``: a plan run once
compiles nothing). Before that, without numba, on another array module, or for a group under
``_loops.COMPILE_MIN`` elements (not worth a compile), the body's nodes run in order with their
own kernels, which gives exactly what the unfused plan gives. Both write into the planner's
output buffers, never into an input's (see ``_compiled``).
"""
from __future__ import annotations

import math

from ...ir.ops.fused_elementwise import DTYPES
from . import _loops
from .base import as_kernel, writes_out


def fused_elementwise_kernel(xp, spec, compiled: bool | None = None):
    """``compiled``: None gives the op-by-op path that switches to the compiled loop on its
    ``_loops.WARM_CALLS``-th call where a loop pays (``_loops.tiered``); False the op-by-op
    path (the reference the loop is tested against), True the loop from the first call."""
    if compiled is None:
        size = math.prod(spec.out_types[0].shape)
        dtypes = [t.dtype.numpy for t in (*spec.in_types, *spec.out_types)]
        run = _loops.tiered(xp, dtypes, size, _op_by_op(xp, spec).run, lambda: _compiled(xp, spec).run,
                            allowed=DTYPES)
        return writes_out(run, alias_safe=True)  # both forms: an output may be an input's buffer
    return _compiled(xp, spec) if compiled else _op_by_op(xp, spec)


def _compiled(xp, spec):
    body = spec.attrs["body"]
    shape = spec.out_types[0].shape
    n = math.prod(shape)
    key = _loops.loop_key(body)
    dtypes = [t.dtype.numpy for t in spec.out_types]
    single = len(dtypes) == 1
    loops = {}  # per pattern of outputs written in place (one, in a plan: the planner's buffers are fixed)

    def loop_for(into):
        loop = loops.get(into)
        if loop is None:
            loop = loops[into] = _loops.compiled_loop(key, into)
        return loop

    def run(*arrays, out=None):
        outs = (out,) if single and out is not None else out
        if outs is None:
            outs = tuple(xp.empty(shape, d) for d in dtypes)
        ins = tuple(xp.ascontiguousarray(a).reshape(-1) for a in arrays)
        into = _into(ins, outs)
        direct = into is not None and all(o.flags.c_contiguous for o in outs)
        if direct:
            loop_for(into)(ins, tuple(o.reshape(-1) for o in outs), n)
        else:  # a strided buffer, or one overlapping an input other than exactly: fresh ones, copied
            flat = tuple(xp.empty(n, d) for d in dtypes)
            loop_for((-1,) * len(outs))(ins, flat, n)
            for o, f in zip(outs, flat):
                o[...] = f.reshape(o.shape)
        return outs[0] if single else tuple(outs)
    return writes_out(run, alias_safe=True)


def _extent(a) -> tuple:
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def _into(ins: tuple, outs: list) -> tuple | None:
    """Per output, the input that is its very buffer (a state update in place) or -1; None
    when an output overlaps an input any other way."""
    spans = [_extent(a) for a in ins]
    into = []
    for o in outs:
        start, stop = _extent(o)
        same = [j for j, (a, b) in enumerate(spans) if (a, b) == (start, stop) and ins[j].dtype == o.dtype]
        if len(same) > 1 or any(a < stop and start < b for j, (a, b) in enumerate(spans) if j not in same and b > a):
            return None  # one buffer through two arrays: the loop's promise would not hold
        into.append(same[0] if same else -1)
    return tuple(into)


def _op_by_op(xp, spec):
    from . import TABLE, KernelSpec

    body = spec.attrs["body"]
    bound = {id(v): t for v, t in zip(body.inputs, spec.in_types)}
    steps = []
    for node in body.nodes:
        out_t = node.outputs[0].type
        concrete = spec.out_types[0].with_dtype(out_t.dtype)  # every node makes the group's shape
        bound[id(node.outputs[0])] = concrete
        inner = KernelSpec(node.attrs, tuple(bound[id(v)] for v in node.inputs), (concrete,), spec.rng)
        steps.append((as_kernel(TABLE[node.op](xp, inner)).run, [id(v) for v in node.inputs], id(node.outputs[0])))
    inputs, outputs = [id(v) for v in body.inputs], [id(v) for v in body.outputs]
    single = len(outputs) == 1

    def run(*arrays, out=None):
        env = dict(zip(inputs, arrays))
        for kernel, ins, o in steps:
            env[o] = kernel(*(env[k] for k in ins))
        results = tuple(env[k] for k in outputs)
        if out is None:
            return results[0] if single else results
        outs = (out,) if single else out
        for o, r in zip(outs, results):  # after every op ran: an output may be an input's buffer
            xp.copyto(o, r)
        return out
    return writes_out(run, alias_safe=True)


KERNELS = {"fused_elementwise": fused_elementwise_kernel}
