"""The kernel value: a run function plus the facts the memory planner needs about it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Kernel:
    """``run(*inputs)`` specialised to one node's shapes.

    ``writes_out``: ``run(*inputs, out=...)`` fully overwrites ``out`` (an array, or a tuple
    for several outputs) without reading it first; with ``out=None`` it allocates.
    ``alias_safe``: ``out`` may also be one of the inputs (a single ufunc call), so a state
    update can run in place. ``view_of``: ``run`` returns a view of that input (no bytes of
    its own).
    """

    run: Callable
    writes_out: bool = False
    alias_safe: bool = False
    view_of: int | None = None

    def __call__(self, *arrays, **kwargs):
        return self.run(*arrays, **kwargs)


def allocating_step(run: Callable, ins: tuple, outs: tuple) -> Callable:
    """``step(env)``: run a kernel that allocates its results and put them in their slots (the
    one-input case without the argument list: one call per node and step matters)."""
    if len(outs) == 1:
        o = outs[0]
        if len(ins) == 1:
            a, = ins

            def step(env):
                env[o] = run(env[a])
            return step

        def step(env):
            env[o] = run(*[env[i] for i in ins])
        return step

    def step(env):
        for s, result in zip(outs, run(*[env[i] for i in ins])):
            env[s] = result
    return step


def writes_out(run: Callable, alias_safe: bool = False) -> Kernel:
    return Kernel(run, writes_out=True, alias_safe=alias_safe)


def view_of(index: int, run: Callable) -> Kernel:
    return Kernel(run, view_of=index)


def as_kernel(made) -> Kernel:
    """A factory's result as a Kernel (plain functions allocate their outputs)."""
    return made if isinstance(made, Kernel) else Kernel(made)


def keeps_declared_dtypes(kernel: Kernel, spec) -> Kernel:
    """numpy computes some ops on ml_dtypes' arrays in float32 (``bfloat16 @ bfloat16`` is
    float32): a kernel with a low-precision output gives it in its declared dtype, rounded
    once (as PyTorch's bfloat16 matmul accumulates in float32). Other kernels are unchanged."""
    wanted = [t.dtype.numpy for t in spec.out_types]
    if not any(t.dtype.is_low_precision for t in spec.out_types) or kernel.view_of is not None:
        return kernel
    run, single = kernel.run, len(wanted) == 1

    def cast(result):
        if single:
            return result if result.dtype == wanted[0] else result.astype(wanted[0])
        return tuple(r if r.dtype == w else r.astype(w) for r, w in zip(result, wanted))

    return Kernel(lambda *arrays, **kwargs: cast(run(*arrays, **kwargs)), kernel.writes_out, kernel.alias_safe)
