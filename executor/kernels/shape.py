"""Shape kernels: reshape, flatten, permute, broadcast_to (views where numpy allows),
concat, slice, full."""
from __future__ import annotations

from .base import view_of, writes_out


def _reshape(xp, spec):
    shape = spec.out_types[0].shape
    return view_of(0, lambda x: x.reshape(shape))


def _permute(xp, spec):
    perm = tuple(p % spec.in_types[0].rank for p in spec.attrs["perm"])
    return view_of(0, lambda x: x.transpose(perm))


def _broadcast_to(xp, spec):
    shape = spec.out_types[0].shape
    return view_of(0, lambda x: xp.broadcast_to(x, shape))


def _concat(xp, spec):
    axis = spec.attrs["dim"] % spec.in_types[0].rank
    dtype = spec.out_types[0].dtype.numpy
    return writes_out(lambda *xs, out=None: xp.concatenate([x.astype(dtype, copy=False) for x in xs], axis=axis,
                                                            out=out))


def _slice(xp, spec):
    index = _index_of(spec)
    return view_of(0, lambda x: x[index])


def _slice_grad(xp, spec):
    index = _index_of(spec)
    t = spec.out_types[0]

    def run(g, out=None):
        if out is None:
            out = xp.zeros(t.shape, dtype=t.dtype.numpy)
        else:
            out.fill(0)
        out[index] = g
        return out
    return writes_out(run)


def _index_of(spec):
    drop = set(spec.attrs["drop"])
    return tuple(start if axis in drop else slice(start, stop, step)
                 for axis, (start, stop, step) in enumerate(spec.attrs["slices"]))


def _full(xp, spec):
    t = spec.out_types[0]
    value = spec.attrs["value"]
    return lambda: xp.full(t.shape, value, dtype=t.dtype.numpy)


KERNELS = {"reshape": _reshape, "flatten": _reshape, "permute": _permute, "broadcast_to": _broadcast_to,
           "concat": _concat, "slice": _slice, "slice_grad": _slice_grad, "full": _full}
