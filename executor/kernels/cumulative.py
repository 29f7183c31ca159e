"""Kernels of ir/ops/cumulative.py: numpy's (and cupy's) cumsum and ufunc accumulate along one
axis; a reversed scan is the forward scan of the flipped array, flipped back."""
from __future__ import annotations


def _axis(spec):
    rank = spec.in_types[0].rank
    return spec.attrs["dim"] % rank if rank else None


def _scan(xp, spec, forward):
    """``forward(x, axis)`` on the input (flipped when reversed); 0-d inputs pass through it as 1-d."""
    axis = _axis(spec)
    reverse = spec.attrs.get("reverse", False)

    def run(x):
        if axis is None:
            return tuple(r.reshape(()) for r in _as_tuple(forward(x.reshape(1), 0)))
        if reverse:
            return tuple(xp.flip(r, axis).copy() for r in _as_tuple(forward(xp.flip(x, axis), axis)))
        return _as_tuple(forward(x, axis))
    return run


def _accumulate(xp, ufunc, x, axis, dtype=None):
    """``ufunc.accumulate`` along axis; a loop over the axis where the array module has no
    accumulate for this ufunc (cupy implements it for some ufuncs only)."""
    try:
        return ufunc.accumulate(x, axis=axis, dtype=dtype)
    except (NotImplementedError, TypeError, AttributeError):
        out = xp.moveaxis(x.astype(dtype or x.dtype), axis, 0).copy()
        for i in range(1, out.shape[0]):
            out[i] = ufunc(out[i - 1], out[i])
        return xp.ascontiguousarray(xp.moveaxis(out, 0, axis))


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _cumulative(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    if spec.attrs["kind"] == "sum":
        run = _scan(xp, spec, lambda x, axis: xp.cumsum(x, axis=axis, dtype=dtype))
    else:
        run = _scan(xp, spec, lambda x, axis: _accumulate(xp, xp.logaddexp, x, axis, dtype))
    return lambda x: run(x)[0]


def _cummax(want_indices):
    def make(xp, spec):
        ufunc = xp.maximum if spec.attrs["largest"] else xp.minimum

        def forward(x, axis):
            values = _accumulate(xp, ufunc, x, axis)
            if not want_indices:
                return values
            # the index of the latest update: where x is the running extreme (ties: later wins) or NaN
            hit = values == x
            if x.dtype.kind == "f":
                hit |= xp.isnan(x)
            shape = [1] * x.ndim
            shape[axis] = x.shape[axis]
            positions = xp.arange(x.shape[axis], dtype=xp.int64).reshape(shape)
            return _accumulate(xp, xp.maximum, xp.where(hit, positions, 0), axis)
        run = _scan(xp, spec, forward)
        return lambda x: run(x)[0]
    return make


KERNELS = {"cumulative": _cumulative, "cummax": _cummax(False), "cummax_indices": _cummax(True)}
