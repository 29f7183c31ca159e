"""Index-based pooling kernels: max pooling's indices (``return_indices``), adaptive max pooling
(values, and indices in a second op), its backward (a scatter-add) and max unpooling (a scatter) with its
backward (a gather). An index is PyTorch's: the flat ``h * W + w`` within each (n, c) plane.

Windows are visited one kernel offset at a time (never pixel by pixel); a window's index moves
only on a strictly greater value (or a NaN), so it names the first maximum, as PyTorch's does.
"""
from __future__ import annotations

import numpy as np

from ...ir.errors import ShapeError
from .base import writes_out
from ._windows import window_views


def pool_geometry(a, in_hw, out_hw):
    """((top, bottom), (left, right)): the padding each side, the bottom/right grown where
    ceil_mode's last window reaches past the padded input (those cells are never real)."""
    pads = []
    for size, o, k, s, p, d in zip(in_hw, out_hw, a["kernel_size"], a["stride"], a["padding"],
                                   a.get("dilation", (1, 1))):
        reach = (o - 1) * s + d * (k - 1) + 1
        pads.append((p, max(p, reach - size - p)))
    return tuple(pads)


class AsymPadder:
    """Copies inputs into a persistent buffer padded ((top, bottom), (left, right)) whose border
    (``fill``) is written once."""

    def __init__(self, xp, shape, pads, dtype, fill=0.0):
        (self.top, bottom), (self.left, right) = pads
        n, c, self.h, self.w = shape
        self.buf = (xp.full((n, c, self.h + self.top + bottom, self.w + self.left + right), fill, dtype=dtype)
                    if self.top or bottom or self.left or right else None)

    def __call__(self, x):
        if self.buf is None:
            return x
        self.buf[:, :, self.top:self.top + self.h, self.left:self.left + self.w] = x
        return self.buf


def _bins(size: int, out: int):
    """PyTorch's adaptive bins [floor(i*size/out), ceil((i+1)*size/out)) as start and stop arrays."""
    i = np.arange(out)
    return (i * size) // out, -(-((i + 1) * size) // out)


def _max_pool2d_indices(xp, spec):
    a = spec.attrs
    shape, out_hw = spec.in_types[0].shape, spec.out_types[0].shape[2:]
    h, w = shape[2:]
    pads = pool_geometry(a, (h, w), out_hw)
    dtype = spec.in_types[0].dtype.numpy
    lowest = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min  # never strictly greater than the start
    pad = AsymPadder(xp, shape, pads, dtype, fill=lowest)
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = a["kernel_size"], a["stride"], a["dilation"], a["padding"]
    rows = np.arange(out_hw[0])[:, None] * sh - ph  # each window's first (maybe padded) cell
    cols = np.arange(out_hw[1])[None, :] * sw - pw
    base = rows * w + cols
    # PyTorch starts each window's index at its first real cell (a padded start steps by dilation)
    first_real = np.where(rows < 0, rows + (-rows + dh - 1) // dh * dh, rows) * w + \
        np.where(cols < 0, cols + (-cols + dw - 1) // dw * dw, cols)
    best = xp.empty(spec.out_types[0].shape, dtype=dtype)
    better = xp.empty(spec.out_types[0].shape, dtype=bool)
    offsets = [xp.asarray(base + i * dh * w + j * dw) for i in range(kh) for j in range(kw)]
    start = xp.asarray(first_real)

    def run(x, out=None):
        out = xp.empty(spec.out_types[0].shape, np.int64) if out is None else out
        best.fill(lowest)
        out[...] = start
        for v, index in zip(window_views(pad(x), (kh, kw), (sh, sw), (dh, dw), out_hw), offsets):
            xp.greater(v, best, out=better)
            xp.logical_or(better, xp.isnan(v), out=better)
            xp.copyto(best, v, where=better)
            xp.copyto(out, xp.broadcast_to(index, out.shape), where=better)
        return out
    return writes_out(run)


def _first_offset(xp, offset, hit, b):
    """``offset = b where hit``: visited from the last offset to the first, the first match stays."""
    step = offset - b
    step *= hit
    offset -= step


def _adaptive_max(xp, spec, want_indices: bool):
    """Separable, one kernel offset at a time (never a pixel): the max over each column bin of
    every row (one gather along W per offset into the largest bin), then over each row bin of
    those (one gather along H per offset). Short bins repeat their last cell, which changes
    neither the max nor the first maximum. Indices: per row the first column offset reaching its
    bin's max (offsets visited last to first), then the first row offset whose column max is the
    bin's max: the first maximum in row-major order, PyTorch's (a NaN bin's index is left at its
    first cell)."""
    n, c, h, w = spec.in_types[0].shape
    oh, ow = spec.attrs["output_size"]
    (r0, r1), (c0, c1) = _bins(h, oh), _bins(w, ow)
    rows = [xp.asarray(np.minimum(r0 + a, r1 - 1)) for a in range(int((r1 - r0).max()))]
    cols = [xp.asarray(np.minimum(c0 + b, c1 - 1)) for b in range(int((c1 - c0).max()))]
    dtype = spec.in_types[0].dtype.numpy
    col_best, best = xp.empty((n, c, h, ow), dtype), xp.empty((n, c, oh, ow), dtype)
    col_off, row_off = xp.empty((n, c, h, ow), np.int64), xp.empty((n, c, oh, ow), np.int64)
    hit, row_hit = xp.empty((n, c, h, ow), bool), xp.empty((n, c, oh, ow), bool)
    c0_x, r0_x = xp.asarray(c0), xp.asarray(r0[:, None])

    def run(x, out=None):
        xp.take(x, cols[0], axis=3, out=col_best)
        for q in cols[1:]:
            xp.maximum(col_best, xp.take(x, q, axis=3), out=col_best)
        xp.take(col_best, rows[0], axis=2, out=best)
        for r in rows[1:]:
            xp.maximum(best, xp.take(col_best, r, axis=2), out=best)
        got = best
        if want_indices:
            col_off.fill(0)
            for b in range(len(cols) - 1, -1, -1):
                xp.equal(x[:, :, :, cols[b]], col_best, out=hit)
                _first_offset(xp, col_off, hit, b)
            row_off.fill(0)
            for a in range(len(rows) - 1, -1, -1):
                xp.equal(col_best[:, :, rows[a]], best, out=row_hit)
                _first_offset(xp, row_off, row_hit, a)
            row = row_off + r0_x  # the winning row of each bin, then the winning column in that row
            got = row * w + xp.take_along_axis(col_off, row, axis=2) + c0_x
        if out is None:
            return got.copy() if got is best else got
        xp.copyto(out, got)
        return out
    return writes_out(run)


def _adaptive_max_pool2d(xp, spec):
    return _adaptive_max(xp, spec, False)


def _adaptive_max_pool2d_indices(xp, spec):
    return _adaptive_max(xp, spec, True)


def _plane_rows(xp, shape):
    """Row numbers (n * C + c) of each element of an (N, C, ...) array, as a column for indexing."""
    return xp.arange(shape[0] * shape[1]).reshape(-1, 1)


def _check_indices(xp, idx, size, op):
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
        raise ShapeError(f"{op}: an index is outside the output plane of {size} elements "
                         f"(found {int(idx.min())}..{int(idx.max())})")


def _adaptive_max_pool2d_grad(xp, spec):
    """Each g added at its index: bins overlap when the size does not divide, so a cell may get
    several shares (a bincount over flat indices)."""
    n, c, h, w = spec.out_types[0].shape
    dtype = spec.out_types[0].dtype.numpy
    plane = h * w
    rows = _plane_rows(xp, spec.in_types[0].shape) * plane

    def run(g, idx, out=None):
        flat = (idx.reshape(n * c, -1) + rows).ravel()
        total = xp.bincount(flat, weights=g.reshape(-1), minlength=n * c * plane)
        out = xp.empty((n, c, h, w), dtype) if out is None else out
        xp.copyto(out, total.reshape(n, c, h, w), casting="unsafe")
        return out
    return writes_out(run)


def _max_unpool2d(xp, spec):
    n, c, h, w = spec.out_types[0].shape
    rows = _plane_rows(xp, spec.in_types[0].shape)

    def run(x, idx, out=None):
        _check_indices(xp, idx, h * w, "max_unpool2d")
        out = xp.empty((n, c, h, w), spec.out_types[0].dtype.numpy) if out is None else out
        out.fill(0)
        out.reshape(n * c, h * w)[rows, idx.reshape(n * c, -1)] = x.reshape(n * c, -1)
        return out
    return writes_out(run)


def _max_unpool2d_grad(xp, spec):
    n, c = spec.in_types[0].shape[:2]
    plane = int(np.prod(spec.in_types[0].shape[2:]))
    rows = _plane_rows(xp, spec.in_types[0].shape)

    def run(g, idx, out=None):
        _check_indices(xp, idx, plane, "max_unpool2d_grad")
        got = g.reshape(n * c, plane)[rows, idx.reshape(n * c, -1)].reshape(idx.shape)
        if out is None:
            return got
        xp.copyto(out, got)
        return out
    return writes_out(run)


INDEX_KERNELS = {"max_pool2d_indices": _max_pool2d_indices, "adaptive_max_pool2d": _adaptive_max_pool2d,
                 "adaptive_max_pool2d_indices": _adaptive_max_pool2d_indices,
                 "adaptive_max_pool2d_grad": _adaptive_max_pool2d_grad, "max_unpool2d": _max_unpool2d,
                 "max_unpool2d_grad": _max_unpool2d_grad}
