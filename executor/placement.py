"""Offsets in one arena for the memory planner's buffers, in time bounded by the plan's size.

Two placements, both keeping buffers that are live together apart:

- **best fit by size** (as TFLite's arena planner): the largest buffers first, each in the
  smallest gap left by the already-placed buffers it is live with, else above them. It needs
  every pair of buffers whose live ranges overlap, found by one sweep over time, so its cost is
  O(n log n + pairs). On real models its arena is at (or within a few percent of) the live peak.
- **a sweep in time** (an allocator replayed offline): buffers in the order they are written,
  each in the smallest free block (blocks coalesce when freed), else on top. O(n log n) for
  any plan, its arena 0-28% larger than best fit's on real models.

A plan whose live ranges overlap in more than ``EXACT_PAIR_LIMIT`` pairs (tens of thousands of
values live at once: a hostile file, or a training graph of ~10k values and more) gets the
sweep, so that planning answers within seconds for every plan the loader accepts.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, insort

ALIGN = 64  # bytes: cache-line aligned buffers
EXACT_PAIR_LIMIT = 2_000_000  # overlapping live-range pairs best fit may visit: ~2 s here


def aligned(nbytes: int) -> int:
    return max(ALIGN, -(-nbytes // ALIGN) * ALIGN)


def assign_offsets(buffers: list) -> int:
    """Give every buffer (a ``memory.Buffer``) an offset; return the arena size in bytes.

    >>> from graphc.executor.memory import Buffer
    >>> bufs = [Buffer(0, 64, 0, 1), Buffer(1, 64, 1, 2), Buffer(2, 64, 2, 3)]
    >>> assign_offsets(bufs), [b.offset for b in bufs]
    (128, [0, 64, 0])
    """
    if overlapping_pairs(buffers) <= EXACT_PAIR_LIMIT:
        return best_fit_by_size(buffers)
    return sweep_in_time(buffers)


def overlapping_pairs(buffers: list) -> int:
    """How many pairs of buffers are live at a common instruction, counted in O(n log n): each
    buffer pairs with those written no later that are still live when it is written."""
    starts = sorted(b.start for b in buffers)
    ends = sorted(b.end for b in buffers)
    return sum(j - bisect_left(ends, start) for j, start in enumerate(starts))


def best_fit_by_size(buffers: list) -> int:
    """Largest first, each in the smallest gap among the placed buffers it is live with."""
    order = sorted(buffers, key=lambda b: (-b.nbytes, b.start, b.key))
    sizes = [aligned(b.nbytes) for b in order]
    offsets = [0] * len(order)
    total = 0
    for rank, neighbours in enumerate(_placed_before(order)):
        size = sizes[rank]
        busy = sorted((offsets[q], offsets[q] + sizes[q]) for q in neighbours)
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        offsets[rank] = best if best is not None else cursor
        order[rank].offset = offsets[rank]
        total = max(total, offsets[rank] + size)
    return total


def _placed_before(order: list) -> list:
    """For each buffer (by rank in ``order``), the ranks of the buffers placed before it that are
    live with it: one sweep over the write times with the set of buffers still live."""
    earlier: list[list[int]] = [[] for _ in order]
    live: set[int] = set()
    ending: list = []  # heap of (last read, rank) of the live buffers
    for rank in sorted(range(len(order)), key=lambda r: order[r].start):
        start = order[rank].start
        while ending and ending[0][0] < start:
            live.discard(heapq.heappop(ending)[1])
        for other in live:  # all live now, so all overlap this buffer
            if other < rank:
                earlier[rank].append(other)
            else:
                earlier[other].append(rank)
        live.add(rank)
        heapq.heappush(ending, (order[rank].end, rank))
    return earlier


def sweep_in_time(buffers: list) -> int:
    """In write order (larger first at one instruction), each buffer takes the smallest free block
    that holds it (the lowest such on ties), else goes on top; blocks coalesce when freed."""
    free = _FreeBlocks()
    ending: list = []  # heap of (last read, offset, size) of the live buffers
    total = 0
    for b in sorted(buffers, key=lambda b: (b.start, -b.nbytes, b.key)):
        while ending and ending[0][0] < b.start:
            _, offset, size = heapq.heappop(ending)
            free.release(offset, size)
        size = aligned(b.nbytes)
        b.offset = free.take(size)
        total = max(total, free.top)
        heapq.heappush(ending, (b.end, b.offset, size))
    return total


class _FreeBlocks:
    """The free blocks below the arena's top, indexed by offset (to coalesce neighbours) and by
    (size, offset) (for best fit); both are sorted lists searched by bisection."""

    def __init__(self):
        self.top = 0
        self.offsets: list[int] = []
        self.by_size: list[tuple[int, int]] = []
        self.size_at: dict[int, int] = {}

    def take(self, size: int) -> int:
        i = bisect_left(self.by_size, (size, -1))
        if i == len(self.by_size):
            offset, self.top = self.top, self.top + size
            return offset
        block, offset = self.by_size[i]
        self._remove(offset)
        if block > size:
            self._add(offset + size, block - size)
        return offset

    def release(self, offset: int, size: int) -> None:
        i = bisect_left(self.offsets, offset)
        if i > 0 and self.offsets[i - 1] + self.size_at[self.offsets[i - 1]] == offset:
            before = self.offsets[i - 1]
            offset, size = before, size + self.size_at[before]
            self._remove(before)
        after = offset + size
        if after in self.size_at:
            size += self.size_at[after]
            self._remove(after)
        if offset + size == self.top:
            self.top = offset  # the arena's top comes down instead of keeping a free block there
        else:
            self._add(offset, size)

    def _add(self, offset: int, size: int) -> None:
        insort(self.offsets, offset)
        insort(self.by_size, (size, offset))
        self.size_at[offset] = size

    def _remove(self, offset: int) -> None:
        size = self.size_at.pop(offset)
        del self.offsets[bisect_left(self.offsets, offset)]
        del self.by_size[bisect_left(self.by_size, (size, offset))]
