"""Memory planning: liveness over the instruction list and best-fit offsets in one arena.

Each planned buffer lives from the instruction that writes it to the last instruction that
reads it (or reads a view of it). Buffers whose lifetimes overlap get disjoint byte ranges;
the others may share. Placement is greedy by size with best fit (as TFLite's arena planner).
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64  # bytes: cache-line aligned buffers


@dataclass
class Buffer:
    key: int  # the slot of the value that owns the bytes
    nbytes: int
    start: int  # instruction index that writes it
    end: int  # last instruction index that reads it (inclusive)
    offset: int = -1

    def overlaps(self, other: "Buffer") -> bool:
        return self.start <= other.end and other.start <= self.end


def aligned(nbytes: int) -> int:
    return max(ALIGN, -(-nbytes // ALIGN) * ALIGN)


def assign_offsets(buffers: list[Buffer]) -> int:
    """Give every buffer an offset; return the arena size in bytes.

    >>> bufs = [Buffer(0, 64, 0, 1), Buffer(1, 64, 1, 2), Buffer(2, 64, 2, 3)]
    >>> assign_offsets(bufs), [b.offset for b in bufs]
    (128, [0, 64, 0])
    """
    placed: list[Buffer] = []
    total = 0
    for buf in sorted(buffers, key=lambda b: (-b.nbytes, b.start, b.key)):
        size = aligned(buf.nbytes)
        busy = sorted((b.offset, b.offset + aligned(b.nbytes)) for b in placed if b.overlaps(buf))
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        buf.offset = best if best is not None else cursor
        total = max(total, buf.offset + size)
        placed.append(buf)
    return total


def check_no_overlap(buffers: list[Buffer]) -> None:
    """Raise AssertionError if two buffers that are live together share bytes (a test hook)."""
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.overlaps(b) and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                raise AssertionError(f"buffers {a.key} and {b.key} are live together and overlap in the arena")
