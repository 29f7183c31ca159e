"""Fractional max pooling (``F.fractional_max_pool2d`` / ``fractional_max_pool3d``, Graham 2014):
max over ``kernel_size`` windows whose starts follow ATen's pseudo-random sequence
``int((i + u) * alpha) - int(u * alpha)`` (``alpha = (in - k) / (out - 1)``, the last start
``in - k``), one ``u`` per (sample, channel, dim) from ``_random_samples`` or drawn uniformly.
The starts are computed in the graph from the samples, so a plan draws fresh windows every
run; each tap is picked by one-hot matmuls (a gather), the maximum over the taps is ``amax``.
Indices (``return_indices``) are the flat input positions of the maxima (the first maximum in
the window's scan order, as ATen).
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..ops.surface import torchsymbol

_F_ONLY = {"method": False, "top": False}


def _sizes(x, n, kernel_size, output_size, output_ratio, what):
    kernel = (kernel_size,) * n if isinstance(kernel_size, int) else tuple(kernel_size)
    spatial = [int(d) for d in x.shape[2:]]
    if output_size is None:
        if output_ratio is None:
            raise GraphcError(f"{what} requires specifying either an output_size or an output_ratio")
        ratio = (output_ratio,) * n if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
        output_size = [int(s * r) for s, r in zip(spatial, ratio)]
    out = (output_size,) * n if isinstance(output_size, int) else tuple(int(s) for s in output_size)
    if len(kernel) != n or len(out) != n:
        raise ShapeError(f"{what}: kernel_size and output_size must have {n} entries, got {kernel_size!r}, "
                         f"{output_size!r}")
    for s, k, o in zip(spatial, kernel, out):
        if o + k - 1 >= s:  # ATen requires out + k - 1 < in
            raise ShapeError(f"{what}: pool size {k} too large relative to input size {s} for output size {o}")
    return kernel, out, spatial


def _starts(u, size_in, size_out, k):
    """(N, C, out) window starts from the samples ``u`` (N, C)."""
    from ..ops.creation import arange
    if size_out == 1:
        return (u * 0.0 + float(size_in - k)).unsqueeze(-1)
    alpha = (size_in - k) / (size_out - 1)
    i = arange(float(size_out - 1)).cast(u.dtype.name)
    seq = (((i + u.unsqueeze(-1)) * alpha).floor() - (u * alpha).floor().unsqueeze(-1))
    last = seq[..., :1] * 0.0 + float(size_in - k)
    return apply("concat", [seq, last], {"dim": seq.ndim - 1})


def _picker(starts, tap, size_in, dtype):
    """(N, C, out, in) one-hot rows: input position ``start + tap`` for each output position."""
    from ..ops.creation import arange
    positions = arange(float(size_in)).cast(dtype)
    return (positions == (starts + float(tap)).unsqueeze(-1)).cast(dtype)


def _fractional(input, n, kernel_size, output_size, output_ratio, return_indices, samples, what):
    from itertools import product

    from ..ops.creation import stack
    x = input if input.ndim == n + 2 else input.unsqueeze(0)
    if x.ndim != n + 2:
        raise ShapeError(f"{what}: expected a {n + 1}-D or {n + 2}-D input, got {tuple(input.shape)}")
    kernel, out, spatial = _sizes(x, n, kernel_size, output_size, output_ratio, what)
    if samples is None:
        from ..ops.creation import rand_like
        corner = x[(slice(None), slice(None)) + (0,) * n]  # (N, C), traced with the input's batch dim
        samples = stack([rand_like(corner).detach() for _ in range(n)], 2) \
            if n > 1 else rand_like(corner).unsqueeze(-1)
    samples = samples.cast(x.dtype.name)
    # ATen's sample order: (W, H) for 2-D, (T, H, W) for 3-D
    order = [1, 0] if n == 2 else list(range(n))
    starts = [_starts(samples[:, :, order[d]], spatial[d], out[d], kernel[d]) for d in range(n)]
    values, flats = [], []
    for taps in product(*[range(k) for k in kernel]):
        v = x
        for d, tap in enumerate(taps):  # gather dim 2 + d: (N, C, out_d, in_d) @ (N, C, in_d, the other dims)
            pick = _picker(starts[d], tap, spatial[d], x.dtype.name)
            v = apply("matmul", [pick, v.movedim(2 + d, 2).reshape(*v.shape[:2], spatial[d], -1)])
            rest = [out[e] if e < d else spatial[e] for e in range(n) if e != d]
            v = v.reshape(*v.shape[:3], *rest).movedim(2, 2 + d)
        values.append(v)
        if return_indices:
            flat = None
            for d, tap in enumerate(taps):
                stride = 1
                for e in range(d + 1, n):
                    stride *= spatial[e]
                term = (starts[d] + float(tap)) * float(stride)
                term = term.reshape(*term.shape, *([1] * (n - 1 - d))) if d < n - 1 else term
                for _ in range(d):
                    term = term.unsqueeze(2)
                flat = term if flat is None else flat + term
            flats.append(flat)
    stacked = stack(values, x.ndim)
    result = stacked.amax(x.ndim)
    if return_indices:
        best = stacked.argmax(x.ndim, keepdim=True)
        idx = stack([f * (result * 0.0 + 1.0) for f in flats], x.ndim)
        taps = apply("one_hot", [best.squeeze(-1)], {"num_classes": len(values), "dtype": x.dtype.name})
        indices = (idx * taps).sum(x.ndim).round().cast("int64")
        result = (result, indices)
    if input.ndim == n + 2:
        return result
    return tuple(r.squeeze(0) for r in result) if return_indices else result.squeeze(0)


@torchsymbol(**_F_ONLY)
def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (or ``output_ratio``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> x = gc.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=gc.tensor([[[0.5, 0.5]]])).numpy().tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _fractional(input, 2, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                       "fractional_max_pool2d")


@torchsymbol(**_F_ONLY)
def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W) to ``output_size`` (or ``output_ratio``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.fractional_max_pool3d(gc.ones(1, 2, 4, 4, 4), 2, output_ratio=0.5).shape
    (1, 2, 2, 2, 2)
    """
    return _fractional(input, 3, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                       "fractional_max_pool3d")
