"""Shape kernels: reshape, flatten, permute, broadcast_to (views where numpy allows),
concat, slice, full; embedding (a gather) and its scatter-add backward."""
from __future__ import annotations

from ...ir.errors import GraphcError
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


def _random(xp, spec):
    t, rng = spec.out_types[0], spec.rng
    dtype = t.dtype.numpy
    draw = rng.standard_normal if spec.attrs["distribution"] == "normal" else rng.random
    if xp.__name__ == "numpy":
        return lambda: draw(t.shape, dtype=dtype)
    # the plan's one generator drives GPU plans too: the same draws on every device
    return lambda: xp.asarray(draw(t.shape, dtype=dtype))


def _check_indices(indices, rows: int) -> None:
    """numpy would wrap negative indices around; PyTorch refuses them, and so does graphc."""
    if not indices.size:
        return
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= rows:
        raise GraphcError(f"embedding: index {low if low < 0 else high} is out of range for {rows} embeddings")


def _embedding(xp, spec):
    rows = spec.in_types[1].shape[0]

    def run(indices, weight, out=None):
        _check_indices(indices, rows)
        return xp.take(weight, indices, axis=0, out=out)
    return writes_out(run)


def _scatter_add(xp):
    """``target[rows] += values`` with repeated rows summed: numpy's ``add.at``; cupyx's
    ``scatter_add`` on the GPU."""
    if xp.__name__ == "numpy":
        return xp.add.at
    import cupyx

    return cupyx.scatter_add


def _embedding_grad(xp, spec):
    t, pad = spec.out_types[0], spec.attrs["padding_idx"]
    scatter_add = _scatter_add(xp)

    def run(g, indices, out=None):
        _check_indices(indices, t.shape[0])
        if out is None:
            out = xp.zeros(t.shape, t.dtype.numpy)
        else:
            out.fill(0)
        scatter_add(out, indices.reshape(-1), g.reshape(-1, t.shape[1]))
        if pad is not None:
            out[pad] = 0  # the padding row gets no gradient (PyTorch's padding_idx)
        return out
    return writes_out(run)


def _stop_gradient(xp, spec):
    return view_of(0, lambda x: x[...])  # a view: detaching copies nothing


KERNELS = {"reshape": _reshape, "stop_gradient": _stop_gradient, "flatten": _reshape, "permute": _permute,
           "broadcast_to": _broadcast_to, "concat": _concat, "slice": _slice, "slice_grad": _slice_grad,
           "full": _full, "random": _random, "embedding": _embedding, "embedding_grad": _embedding_grad}
