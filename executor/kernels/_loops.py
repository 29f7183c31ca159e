"""One numba loop per ``fused_elementwise`` body, composed from the ops' scalar rules.

No source text is generated: each body value becomes a small jitted closure (a load from an
input, or an op's scalar rule applied to the closures of its operands) and numba compiles
the loop that calls the closures of the outputs, inlining them all into one function
(``inline="always"``: one function for LLVM, Adam's loop compiles in 1.4 s instead of 4.6) where
LLVM merges the values several outputs share. An output that is an input's buffer (a state
updated in place) is stored through that input's array, a loop compiled per such pattern.

A loop depends only on its :func:`loop_key` (ops, attrs, wiring, dtypes, which inputs are
broadcast), so equal groups (Adam's update of every parameter, relu6's gradient after every
convolution) share one compiled loop: the cache is keyed by that description alone. numba's
own on-disk cache cannot hold closures, so a new process compiles each distinct loop once.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...ir.ops.fused_elementwise import SCALAR_RULES, is_scalar_like

# A kernel with a compiled form runs its numpy form for its first calls and compiles on this
# one: a plan run once or twice (a CLI inference, a test, an export check) never waits for numba,
# a training loop compiles in its third step
WARM_CALLS = 3
# Below this many elements a group runs op by op: compiling a loop takes 0.3-1 s once per
# process, and saves a few microseconds per call on small arrays (onnx's backend cases, tiny
# models run a handful of times, would spend minutes compiling)
COMPILE_MIN = 1 << 15
# x / 0 is inf, as in numpy (numba's default raises); nogil: the parts of a split run at once
JIT = {"error_model": "numpy", "nogil": True}


def available() -> bool:
    """Whether numba is installed (the ``fast`` extra)."""
    return importlib.util.find_spec("numba") is not None


def threads() -> int:
    """How many parts a large loop is split into (one per core, at most 8)."""
    return max(1, min(8, os.cpu_count() or 1))


_POOL: list = []  # the worker threads, made on the first split (a pool, not state: it holds no data)
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: its first split makes a new pool
    (the old one would take the work and never run it)."""
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool)


def _pool():
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=threads() - 1, thread_name_prefix="graphc-loop"))
        return _POOL[0]


def split(loop, n: int, *args, grain: int = 1 << 16) -> None:
    """``loop(*args, lo, hi)`` over [0, n), in one part per core, each of ``grain`` items at
    least (elements: a part under 65536 costs more to hand to a thread than to run; image
    planes: 1). The parts but the last run on worker threads (numba releases the GIL in
    ``nogil`` loops), the last on this one. The loops write disjoint parts of their outputs, so the parts may run in
    any order. The bounds are unsigned: numba then indexes without its negative-index check,
    which is what lets LLVM vectorise the loops (Adam over 400k floats: 0.93 ms with signed
    bounds, 0.14 ms so, on one core). Not numba's ``parallel=True``: each launch of its
    workqueue layer costs about 80 us (a dozen fused groups a step: a millisecond), its parfor
    pass doubles compile time, its OpenMP layer's threads spin after each loop and take the
    cores from OpenBLAS, and workqueue aborts the process when two threads launch at once."""
    parts = min(threads(), n // grain)
    if parts <= 1:
        loop(*args, np.uint64(0), np.uint64(n))
        return
    bounds = [np.uint64(n * k // parts) for k in range(parts + 1)]
    pending = [_pool().submit(loop, *args, lo, hi) for lo, hi in zip(bounds[:-2], bounds[1:-1])]
    loop(*args, bounds[-2], bounds[-1])
    for future in pending:
        future.result()


def tiered(xp, dtypes, size: int, first, make_fast, allowed=("float32", "float64")):
    """``first``, or a Tiered of it and ``make_fast`` where a compiled form pays: numba is
    installed, the array module is numpy, every dtype is ``allowed`` (what the loop was written
    for), and the work is ``COMPILE_MIN`` elements or more. The one gate of every kernel with
    a compiled form."""
    if (xp.__name__ == "numpy" and size >= COMPILE_MIN and available()
            and all(np.dtype(d).name in allowed for d in dtypes)):
        return Tiered(first, make_fast)
    return first


class Tiered:
    """``run(*arrays, out=...)``: ``first`` for the first ``WARM_CALLS - 1`` calls, then the
    function ``make_fast()`` returns (built once, on the call that reaches ``WARM_CALLS``). The
    two forms compute the same values (bit for bit, or to float32 rounding where a loop sums in
    another order: each kernel says which)."""

    def __init__(self, first, make_fast):
        self.current, self.make_fast, self.calls = first, make_fast, 0

    def __call__(self, *arrays, **kwargs):
        if self.make_fast is not None:
            self.calls += 1
            if self.calls >= WARM_CALLS:
                self.current, self.make_fast = self.make_fast(), None
        return self.current(*arrays, **kwargs)


def loop_key(body) -> tuple:
    """A hashable description of everything the compiled loop depends on."""
    index = {id(v): k for k, v in enumerate(body.inputs)}
    shape = body.outputs[0].type.shape
    inputs = tuple((v.type.dtype.name, v.type.shape == shape and not is_scalar_like(v.type.shape))
                   for v in body.inputs)
    nodes = []
    for node in body.nodes:
        nodes.append((node.op, tuple(sorted(node.attrs.items())), tuple(index[id(v)] for v in node.inputs),
                      node.outputs[0].type.dtype.name))
        index[id(node.outputs[0])] = len(index)
    return tuple(nodes), inputs, tuple(index[id(v)] for v in body.outputs)


@functools.lru_cache(maxsize=512)  # memoised compilation: the result is a pure function of the key
def compiled_loop(key: tuple, into: tuple | None = None):
    """``run(inputs, outputs, n)`` over flat arrays for the loop ``key`` describes; ``into``
    (one entry per output): the input whose buffer that output is (a state updated in place:
    the loop stores through that input's array), or -1. A numba
    loop over the elements, split over the cores (``split``). Every buffer is reached through
    one array only: an output that is an input's buffer is stored through that input (read
    first, then written, as the loop body orders them), so LLVM's runtime alias checks pass and
    the loop is vectorised; another overlap would only send it down the scalar path."""
    import numba

    jit = functools.partial(numba.njit, inline="always", **JIT)  # one function for LLVM: 4.6 -> 1.4 s
    nodes, inputs, outputs = key
    values = [_load(jit, k, full) for k, (_, full) in enumerate(inputs)]
    for op, attrs, refs, dtype in nodes:
        fn = jit(SCALAR_RULES[op](dict(attrs), np.dtype(dtype)))
        values.append(_apply(jit, fn, [values[r] for r in refs]))
    store = _stores(jit, [values[r] for r in outputs], 0, into or (-1,) * len(outputs))

    @numba.njit(**JIT)
    def part(ins, outs, lo, hi):
        for i in range(lo, hi):
            store(ins, outs, i)

    def run(ins, outs, n):
        split(part, n, ins, outs)
    run.compiled = part  # for inspection (the LLVM a test reads)
    return run


def _load(jit, k: int, full: bool):
    if full:
        return jit(lambda ins, i: ins[k][i])
    return jit(lambda ins, i: ins[k][0])  # one element, broadcast


def _apply(jit, fn, operands: list):
    if len(operands) == 1:
        a, = operands
        return jit(lambda ins, i: fn(a(ins, i)))
    if len(operands) == 2:
        a, b = operands
        return jit(lambda ins, i: fn(a(ins, i), b(ins, i)))
    a, b, c = operands
    return jit(lambda ins, i: fn(a(ins, i), b(ins, i), c(ins, i)))


def _stores(jit, exprs: list, k: int, into: tuple):
    """Compute output k, then (recursively) the later ones and store them, then store k: every
    value is computed before the first store. Output k goes to ``outs[k]``, or through input
    ``into[k]`` when it is that input's buffer."""
    expr, j = exprs[0], into[k]
    target = jit(lambda ins, outs: ins[j]) if j >= 0 else jit(lambda ins, outs: outs[k])
    if len(exprs) == 1:
        def store(ins, outs, i):
            target(ins, outs)[i] = expr(ins, i)
        return jit(store)
    rest = _stores(jit, exprs[1:], k + 1, into)

    def store_more(ins, outs, i):
        value = expr(ins, i)
        rest(ins, outs, i)
        target(ins, outs)[i] = value
    return jit(store_more)
