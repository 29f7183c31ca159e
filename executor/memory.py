"""Memory planning: liveness over the instruction list and best-fit offsets in one arena.

Each planned buffer lives from the instruction that writes it to the last instruction that
reads it (or reads a view of it). Buffers whose lifetimes overlap get disjoint byte ranges;
the others may share. Placement (``placement.py``) is greedy by size with best fit (as
TFLite's arena planner), in time bounded by the plan's size.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left
from dataclasses import dataclass

from .budget import format_bytes as _size, value_bytes
from .placement import ALIGN, aligned, assign_offsets  # noqa: F401 (the planner's API, kept here)


@dataclass
class Buffer:
    key: int  # the slot of the value that owns the bytes
    nbytes: int
    start: int  # instruction index that writes it
    end: int  # last instruction index that reads it (inclusive)
    offset: int = -1

    def overlaps(self, other: "Buffer") -> bool:
        return self.start <= other.end and other.start <= self.end


def check_no_overlap(buffers: list[Buffer]) -> None:
    """Raise AssertionError if two buffers that are live together share bytes (a test hook).

    One sweep over time keeps the live buffers' byte ranges sorted by offset; they never
    overlap one another, so a new buffer need only be compared with its two neighbours there.

    >>> check_no_overlap([Buffer(0, 64, 0, 1), Buffer(1, 64, 1, 2, offset=64), Buffer(2, 64, 2, 3, offset=0)])
    """
    live: list[tuple[int, int, int]] = []  # (offset, end offset, key), sorted
    ending: list = []  # heap of (last read, offset, end offset, key)
    for b in sorted((b for b in buffers if b.nbytes > 0), key=lambda b: b.start):
        while ending and ending[0][0] < b.start:
            _, *entry = heapq.heappop(ending)
            del live[bisect_left(live, tuple(entry))]
        entry = (b.offset, b.offset + b.nbytes, b.key)
        i = bisect_left(live, entry)
        for other in live[max(0, i - 1):i + 1]:
            if other[0] < entry[1] and entry[0] < other[1]:
                raise AssertionError(f"buffers {other[2]} and {b.key} are live together and overlap in the arena")
        live.insert(i, entry)
        heapq.heappush(ending, (b.end, *entry))


def live_peak(buffers: list[Buffer]) -> int:
    """The most bytes live at once: the least any arena could need (one sweep over time).

    >>> live_peak([Buffer(0, 100, 0, 1), Buffer(1, 50, 1, 2), Buffer(2, 70, 2, 3)])
    150
    """
    changes = sorted([(b.start, b.nbytes) for b in buffers] + [(b.end + 1, -b.nbytes) for b in buffers])
    peak = live = 0
    for i, (time, change) in enumerate(changes):
        live += change
        if i + 1 == len(changes) or changes[i + 1][0] != time:  # all of this instruction's changes applied
            peak = max(peak, live)
    return peak


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
