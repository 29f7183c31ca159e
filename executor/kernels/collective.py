"""Kernel of ``allreduce``: pack the bucket into one flat buffer, reduce it in place across the
processes with one MPI message, unpack into the outputs. On cupy the buffer goes through host
memory (the mpich wheel cannot read GPU memory; NCCL through cupy is the GPU-native path, see
docs/distributed.md)."""
from __future__ import annotations

import math

import numpy as np

from ..comm import group
from .base import writes_out


def _allreduce(xp, spec):
    sizes = [math.prod(t.shape) for t in spec.in_types]
    offsets = np.cumsum([0, *sizes]).tolist()
    dtype = spec.out_types[0].dtype.numpy
    if any(t.dtype.numpy != dtype for t in spec.in_types):
        raise ValueError("allreduce: a bucket holds one dtype")  # the bucketing pass groups by dtype
    mean = spec.attrs["op"] == "mean"
    flat = xp.empty(offsets[-1], dtype)  # this program's message buffer, reused every step
    host = np.empty(offsets[-1], dtype) if xp is not np else flat

    def run(*arrays, out=None):
        if out is None:
            out = tuple(xp.empty_like(a) for a in arrays)
        outs = out if isinstance(out, tuple) else (out,)  # one output comes as a bare array
        pg = group()
        if pg is None or pg.size == 1:
            for a, o in zip(arrays, outs):
                o[...] = a
            return out if len(outs) > 1 else outs[0]
        for a, start, stop in zip(arrays, offsets, offsets[1:]):
            flat[start:stop] = a.reshape(-1)
        if host is not flat:
            flat.get(out=host)
        pg.comm.Allreduce(pg.mpi.IN_PLACE, host, op=pg.mpi.SUM)
        if host is not flat:
            flat.set(host)
        if mean:
            xp.multiply(flat, np.dtype(dtype).type(1.0 / pg.size), out=flat)
        for o, start, stop in zip(outs, offsets, offsets[1:]):
            o[...] = flat[start:stop].reshape(o.shape)
        return out if len(outs) > 1 else outs[0]
    return writes_out(run)


KERNELS = {"allreduce": _allreduce}
