"""Per-channel arithmetic on (N, C, *spatial) arrays, shared by the norm, conv and fused kernels."""
from __future__ import annotations

import math


class ChannelPlanes:
    """Per-channel work on x (N, C, *spatial) seen as (N, C, L): sums over N and L as einsum
    reductions, per-channel constants broadcast from contiguous (C, L) planes. numpy's inner
    loops vectorize a contiguous operand but not a stride-0 broadcast: a per-channel multiply
    over a 64x32x28x28 batch took 0.39 ms from a (1, C, 1, 1) vector, 0.24 ms from a plane."""

    def __init__(self, xp, shape, dtype, count: int):
        self.xp, self.n, self.c = xp, shape[0], shape[1]
        self.l = math.prod(shape[2:])
        self.planes = [xp.empty((self.c, self.l), dtype=dtype) for _ in range(count)]

    def rows(self, x):
        return x.reshape(self.n, self.c, self.l)

    def plane(self, index: int, per_channel):
        plane = self.planes[index]
        self.xp.copyto(plane, per_channel.reshape(self.c, 1))
        return plane

    def sum(self, x3, out):
        out[...] = self.xp.einsum("ncl->c", x3)
        return out

    def dot(self, a3, b3):
        return self.xp.einsum("ncl,ncl->c", a3, b3)
