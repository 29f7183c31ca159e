"""Kernels of ``scatter`` and ``gather`` (ir/ops/scatter.py), for numpy and cupy: the index
arrays of the dims other than ``dim`` are built once per node (the shapes are concrete), so a
run only checks and wraps the int64 index and does one fancy-indexed write or ``ufunc.at``.
"""
from __future__ import annotations

import numpy as np

from ...ir.errors import GraphcError


def _grids(xp, shape, axis):
    """Open index grids over ``shape`` (``np.ogrid``), with ``None`` at ``axis``."""
    grids = [xp.asarray(np.arange(s).reshape([-1 if d == k else 1 for d in range(len(shape))]))
             for k, s in enumerate(shape)]
    grids[axis] = None
    return grids


def _wrapped(xp, op, index, size):
    """ONNX's indices in ``[-size, size)``: negative ones count from the end; others refused."""
    if index.size:
        low, high = int(index.min()), int(index.max())
        if low < -size or high >= size:
            raise GraphcError(f"{op}: index {low if low < -size else high} is out of range for a dim of size {size}")
    return xp.where(index < 0, index + size, index)


def _at(xp, reduce):
    """``ufunc.at(target, where, values)`` for the reductions (cupyx's scatter_* on the GPU)."""
    if xp.__name__ == "numpy":
        return {"sum": np.add.at, "prod": np.multiply.at, "amax": np.maximum.at, "amin": np.minimum.at}[reduce]
    import cupyx

    if reduce == "prod":  # cupyx has no scatter_mul: the product is taken on the host
        def prod_at(target, where, values):
            host = xp.asnumpy(target)
            np.multiply.at(host, tuple(xp.asnumpy(w) for w in where), xp.asnumpy(values))
            target[...] = xp.asarray(host)
        return prod_at
    return {"sum": cupyx.scatter_add, "amax": cupyx.scatter_max, "amin": cupyx.scatter_min}[reduce]


def _scatter(xp, spec):
    x, index = spec.in_types[0], spec.in_types[1]
    axis = spec.attrs["dim"] % x.rank
    size, reduce = x.shape[axis], spec.attrs["reduce"]
    grids = _grids(xp, index.shape, axis)
    at = None if reduce == "none" else _at(xp, reduce)

    def run(data, idx, src):
        where = list(grids)
        where[axis] = _wrapped(xp, "scatter", idx, size)
        where = tuple(xp.broadcast_to(w, idx.shape) for w in where)
        out = data.copy()
        if at is None:
            out[where] = src
        else:
            at(out, where, src)
        return out
    return run


def _gather(xp, spec):
    x, index = spec.in_types
    axis = spec.attrs["dim"] % x.rank
    size = x.shape[axis]
    grids = _grids(xp, index.shape, axis)

    def run(data, idx):
        where = list(grids)
        where[axis] = _wrapped(xp, "gather", idx, size)
        return data[tuple(where)]
    return run


KERNELS = {"scatter": _scatter, "gather": _gather}
