"""Markers kernels carry for the memory planner."""
from __future__ import annotations


def writes_out(run):
    """``run(*inputs, out=None)`` fully overwrites ``out`` (an array, or a tuple for several
    outputs) without reading it first; with ``out=None`` it allocates."""
    run.writes_out = True
    return run


def view_of(index: int, run):
    """``run`` returns a view of input ``index`` (no bytes of its own)."""
    run.view_of = index
    return run
