"""Kernel of ``fused_elementwise``: one compiled loop over the group, or its ops one by one.

With numba (the ``fast`` extra) on the CPU the body becomes one loop (``_loops``), over both
cores for large groups, from the kernel's third call on (``_loops.Tiered``: a plan run once
compiles nothing). Before that, without numba, on another array module, or for a group under
``_loops.COMPILE_MIN`` elements (not worth a compile), the body's nodes run in order with their
own kernels, which gives exactly what the unfused plan gives. Both write into the planner's output buffers and may update a state in place.
"""
from __future__ import annotations

import math

from . import _loops
from .base import as_kernel, writes_out


def fused_elementwise_kernel(xp, spec, compiled: bool | None = None):
    """``compiled``: None gives the op-by-op path that switches to the compiled loop on its
    ``_loops.WARM_CALLS``-th call, when numba and numpy are there and the group is large enough
    to repay compiling it; False the op-by-op path (the reference the loop is tested
    against), True the loop from the first call."""
    if compiled is None:
        if (xp.__name__ == "numpy" and _loops.available()
                and math.prod(spec.out_types[0].shape) >= _loops.COMPILE_MIN):
            return writes_out(_loops.Tiered(_op_by_op(xp, spec).run, lambda: _compiled(xp, spec).run),
                              alias_safe=True)
        compiled = False
    return _compiled(xp, spec) if compiled else _op_by_op(xp, spec)


def _compiled(xp, spec):
    body = spec.attrs["body"]
    shape = spec.out_types[0].shape
    n = math.prod(shape)
    loop = _loops.compiled_loop(_loops.loop_key(body))
    dtypes = [t.dtype.numpy for t in spec.out_types]
    single = len(dtypes) == 1

    def run(*arrays, out=None):
        outs = (out,) if single and out is not None else out
        if outs is None:
            outs = tuple(xp.empty(shape, d) for d in dtypes)
        flat = tuple(o.reshape(-1) if o.flags.c_contiguous else xp.empty(n, o.dtype) for o in outs)
        loop(tuple(xp.ascontiguousarray(a).reshape(-1) for a in arrays), flat, n)
        for o, f in zip(outs, flat):
            if not o.flags.c_contiguous:  # a strided buffer: the loop wrote a flat copy
                o[...] = f.reshape(o.shape)
        return outs[0] if single else tuple(outs)
    return writes_out(run, alias_safe=True)


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


def _fused_elementwise(xp, spec):
    return fused_elementwise_kernel(xp, spec)


KERNELS = {"fused_elementwise": _fused_elementwise}
