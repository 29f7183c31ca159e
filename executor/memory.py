"""Memory planning: liveness over the instruction list and best-fit offsets in one arena.

Each planned buffer lives from the instruction that writes it to the last instruction that
reads it (or reads a view of it). Buffers whose lifetimes overlap get disjoint byte ranges;
the others may share. Placement is greedy by size with best fit (as TFLite's arena planner).
"""
from __future__ import annotations

from dataclasses import dataclass

from .budget import format_bytes as _size, value_bytes

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


def live_peak(buffers: list[Buffer]) -> int:
    """The most bytes live at once: the least any arena could need."""
    events = sorted({b.start for b in buffers})
    return max((sum(b.nbytes for b in buffers if b.start <= t <= b.end) for t in events), default=0)


class MemoryReport:
    """What a plan's memory planner decided for one batch size (``print`` it)."""

    def __init__(self, program, graph):
        self.batch = program.batch
        self.arena_bytes = program.arena_bytes
        self.unplanned_bytes = program.unplanned_bytes
        self.live_peak_bytes = live_peak(program.buffers)
        self.buffers = len(program.buffers)
        self.state_bytes = program.state_bytes
        self.saved = saved_activations(graph, program)

    def __str__(self) -> str:
        lines = [f"memory plan at batch {self.batch}:",
                 f"  arena            {_size(self.arena_bytes):>10} for {self.buffers} buffers "
                 f"({_size(self.unplanned_bytes)} without reuse, {_size(self.live_peak_bytes)} live at the peak)",
                 f"  state+constants  {_size(self.state_bytes):>10}"]
        if self.saved:
            total = sum(s[2] for s in self.saved)
            lines.append(f"  saved for backward: {len(self.saved)} activations, {_size(total)}")
            for name, type_, nbytes, where in sorted(self.saved, key=lambda s: -s[2]):
                lines.append(f"    %{name:<8} {type_:<22} {_size(nbytes):>10}  {where}")
        return "\n".join(lines)


def saved_activations(graph, program) -> list:
    """Forward values read by backward nodes: (name, type, bytes, where) at this batch size."""
    forward = {id(v): n for n, kind in zip(graph.nodes, program.kinds)
               if not n.meta.get("phase") and kind != "view" for v in n.outputs}  # views: their base is listed
    seen, out = set(), []
    for node in graph.nodes:
        if node.meta.get("phase") != "backward":
            continue
        for v in node.inputs:
            producer = forward.get(id(v))
            if producer is None or id(v) in seen:
                continue
            seen.add(id(v))
            t = program.types[program.slots[id(v)]]
            nbytes = value_bytes(t)
            out.append((v.name, str(t), nbytes, producer.location() or producer.op))
    return out
