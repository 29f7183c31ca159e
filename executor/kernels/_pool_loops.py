"""Max pooling and its gradient as numba loops over each image's channel planes (the ``fast``
extra), used by pool.py on the CPU when numba is installed.

numpy's form makes one pass over the whole batch per kernel offset: the gradient compares,
masks, multiplies and adds for each of the window's cells (a 64x32x28x28 2x2 gradient took
6.5 ms in W2's profile, 11% of its step). A loop visits each window once. Both give the same
bits: the forward keeps numpy's maximum (the first NaN wins, of two equal values the later
one), the gradient sends each window's cotangent to its first maximum and multiplies every
other cell's share by zero (so a negative cotangent leaves -0.0 where windows tile the input,
as ``g * hit`` does), and overlapping windows add their shares in the same order.
"""
from __future__ import annotations

import functools

from ._loops import JIT, split


@functools.lru_cache(maxsize=None)
def max_pool_loop(kh: int, kw: int, sh: int, sw: int, dh: int, dw: int):
    """``run(padded, out)``: out[n, c, i, j] = max of the window. The window's geometry is part
    of the compiled loop (constants: the offset loops unroll)."""
    import numba

    @numba.njit(**JIT)
    def part(x, out, lo, hi):
        n, c, oh, ow = out.shape
        for nc in range(int(lo), int(hi)):  # signed: nc // c must stay an integer
            xa, oa = x[nc // c, nc % c], out[nc // c, nc % c]
            for i in range(oh):
                for j in range(ow):
                    best = xa[i * sh, j * sw]
                    for p in range(kh):
                        for q in range(kw):
                            v = xa[i * sh + p * dh, j * sw + q * dw]
                            best = best if (best > v or best != best) else v
                    oa[i, j] = best

    def run(x, out):
        split(part, out.shape[0] * out.shape[1], x, out, grain=1)
    return run


@functools.lru_cache(maxsize=None)
def max_pool_grad_loop(kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, tiles: bool):
    """``run(g, padded, y, gx, first)`` into a zeroed ``gx`` (padded shape): each window's
    cotangent to its first cell equal to the window's maximum ``y`` (a NaN window has none).
    ``first`` (int32, g's shape) is scratch for overlapping windows: the offset of each
    window's first maximum, so that the shares are added offset by offset afterwards."""
    import numba

    @numba.njit(**JIT)
    def part(g, x, y, gx, first, lo, hi):
        n, c, oh, ow = g.shape
        zero, one = g.dtype.type(0), g.dtype.type(1)
        for nc in range(int(lo), int(hi)):  # signed: nc // c must stay an integer
            a, b = nc // c, nc % c
            xa, ya, ga, gxa, fa = x[a, b], y[a, b], g[a, b], gx[a, b], first[a, b]
            for i in range(oh):
                for j in range(ow):
                    target = ya[i, j]
                    share = ga[i, j]
                    found = False
                    offset = -1
                    for p in range(kh):
                        for q in range(kw):
                            h = i * sh + p * dh
                            w = j * sw + q * dw
                            # branch-free (&, |, selects): where the maximum sits is random
                            hit = (xa[h, w] == target) & (not found)
                            if tiles:  # each cell in one window: its share written at once
                                gxa[h, w] = share * (one if hit else zero)
                            offset = p * kw + q if hit else offset
                            found = found | hit
                    fa[i, j] = offset
            if not tiles:  # offsets outermost, as numpy's form adds them: the same sums in its order
                for p in range(kh):
                    for q in range(kw):
                        for i in range(oh):
                            for j in range(ow):
                                gxa[i * sh + p * dh, j * sw + q * dw] += ga[i, j] * (
                                    one if fa[i, j] == p * kw + q else zero)

    def run(g, x, y, gx, first):
        split(part, g.shape[0] * g.shape[1], g, x, y, gx, first, grain=1)
    return run
