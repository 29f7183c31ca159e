"""Pinning a symbolic dim that meets a static one where the two must agree (a contraction's
inner dims, broadcasting against a size other than 1): the plan can then hold only at the
example's size, so the dim is fixed there (``Tracer.fix_size``) and the trace starts again
with it fixed (graphc/tracing.py ``PinnedDims``) instead of failing on ``N`` against ``5``.

>>> import graphc as gc
>>> plan = gc.compile(lambda a, b: gc.mv(a, b), example_inputs=(gc.ones(3, 3), gc.ones(3)))
>>> plan(gc.ones(3, 3), gc.ones(3)).shape
(3,)
"""
from __future__ import annotations

from ..ir.types import is_static


def _pin(t, dim) -> None:
    if t._tracer is not None and not is_static(dim):
        t._tracer.fix_size(dim)


def pin_equal(a, dim_a, b, dim_b) -> None:
    """Dims that must be equal: pin whichever is symbolic when the other is static."""
    da, db = a.dims[dim_a], b.dims[dim_b]
    if is_static(da) != is_static(db) or (not is_static(da) and da != db):
        _pin(a, da)
        _pin(b, db)


def pin_broadcast(*tensors) -> None:
    """Operands that must broadcast: pin symbolic dims facing a different static size or symbol."""
    tensors = [t for t in tensors if hasattr(t, "dims")]
    rank = max((len(t.dims) for t in tensors), default=0)
    for i in range(1, rank + 1):
        faced = [(t, t.dims[-i]) for t in tensors if len(t.dims) >= i and t.dims[-i] != 1]
        if len({d for _, d in faced}) > 1:
            for t, d in faced:
                _pin(t, d)


def pin_dim(t, axis) -> None:
    """A dim used as a plain number (sliced with bounds): pin it when it is symbolic."""
    if t.ndim:
        _pin(t, t.dims[axis])
