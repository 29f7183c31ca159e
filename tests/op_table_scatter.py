"""The op table's entries for ``scatter`` and ``gather`` (ir/ops/scatter.py). References are
plain float64 loops over the index's positions written from the definitions, never graphc's
kernels; PyTorch's side is ``Tensor.scatter`` / ``scatter_reduce(include_self=True)`` /
``torch.gather``. Rows with ``reduce="none"`` use indices distinct along ``dim`` (which of two
writes wins is unspecified); the reductions take repeated ones. The inputs come from their own
generator, so these rows leave the other rows' inputs (and their recorded references) as they were.
"""
from __future__ import annotations

import itertools

import numpy as np

from op_table import F32, F64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(20261128)


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _index(shape, size, dim, distinct):
    """int64 indices of ``shape`` into a dim of ``size`` (distinct along ``dim`` if asked)."""
    if not distinct:
        return _RNG.integers(0, size, shape).astype(np.int64)
    moved = np.empty(np.moveaxis(np.empty(shape), dim, -1).shape, np.int64)
    for pos in itertools.product(*[range(s) for s in moved.shape[:-1]]):
        moved[pos] = _RNG.permutation(size)[:moved.shape[-1]]
    return np.moveaxis(moved, -1, dim)


def _positions(index, dim):
    for pos in itertools.product(*[range(s) for s in index.shape]):
        target = list(pos)
        target[dim] = int(index[pos])
        yield pos, tuple(target)


def scatter_ref(ins, attrs):
    x, index, src = ins[0].astype(F64), ins[1], ins[2].astype(F64)
    dim, reduce = attrs["dim"] % x.ndim, attrs.get("reduce", "none")
    out = x.copy()
    combine = {"none": lambda a, b: b, "sum": np.add, "prod": np.multiply, "amax": max, "amin": min}[reduce]
    for pos, target in _positions(index, dim):
        out[target] = combine(out[target], src[pos])
    return [out.astype(ins[0].dtype)]


def gather_ref(ins, attrs):
    x, index = ins[0].astype(F64), ins[1]
    dim = attrs["dim"] % x.ndim
    out = np.zeros(index.shape)
    for pos, target in _positions(index, dim):
        out[pos] = x[target]
    return [out.astype(ins[0].dtype)]


def _torch_scatter(ts, a):
    x, index, src = ts
    if a["reduce"] == "none":
        return x.scatter(a["dim"], index, src)
    return x.scatter_reduce(a["dim"], index, src, reduce=a["reduce"], include_self=True)


def scatter_table() -> list[OpInfo]:
    sc, ga = scatter_ref, gather_ref
    t = [OpInfo("scatter", torch=_torch_scatter, samples=[
        S([_randn(3, 5), _index((3, 4), 5, 1, True), _randn(3, 4)], sc, "dim1", {"dim": 1}),
        S([_randn(4, 3), _index((2, 3), 4, 0, True), _randn(2, 3)], sc, "dim0-smaller", {"dim": 0}),
        S([_randn(2, 3, 6), _index((2, 3, 6), 6, -1, True), _randn(2, 3, 6)], sc, "negative-dim-permutation",
          {"dim": -1}),
        S([_randn(2, 4, 5), _index((2, 4, 3), 4, 1, False), _randn(2, 4, 3)], sc, "sum-repeats",
          {"dim": 1, "reduce": "sum"}),
        S([_randn(3, 4), _index((3, 4), 4, 1, False), _randn(3, 4)], sc, "prod", {"dim": 1, "reduce": "prod"},
          grad=False),
        S([_randn(3, 4), _index((3, 4), 4, 1, False), _randn(3, 4)], sc, "amax", {"dim": 1, "reduce": "amax"},
          grad=False),
        S([_randn(3, 4), _index((3, 4), 4, 1, False), _randn(3, 4)], sc, "amin", {"dim": 1, "reduce": "amin"},
          grad=False),
        S([_randn(2, 5, dtype=F64), _index((2, 5), 5, 1, True), _randn(2, 5, dtype=F64)], sc, "f64", {"dim": 1}),
        S([fortran(_randn(3, 5)), _index((3, 2), 5, 1, True), fortran(_randn(3, 2))], sc, "noncontig", {"dim": 1}),
    ])]
    t.append(OpInfo("gather", torch=lambda ts, a: T().gather(ts[0], a["dim"], ts[1]), samples=[
        S([_randn(3, 5), _index((3, 4), 5, 1, False)], ga, "dim1-repeats", {"dim": 1}),
        S([_randn(4, 3), _index((2, 3), 4, 0, False)], ga, "dim0-smaller", {"dim": 0}),
        S([_randn(2, 3, 4), _index((2, 3, 4), 4, -1, True)], ga, "negative-dim", {"dim": -1}),
        S([_randn(2, 5, dtype=F64), _index((2, 3), 5, 1, False)], ga, "f64", {"dim": 1}),
        S([fortran(_randn(3, 5)), _index((3, 5), 5, 1, False)], ga, "noncontig", {"dim": 1}),
    ]))
    return t
