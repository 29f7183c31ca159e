"""Markers kernels carry for the memory planner."""
from __future__ import annotations


def writes_out(run, alias_safe: bool = False):
    """``run(*inputs, out=None)`` fully overwrites ``out`` (an array, or a tuple for several
    outputs) without reading it first; with ``out=None`` it allocates. ``alias_safe``: ``out``
    may also be one of the inputs (a single ufunc call), so an update can run in place."""
    run.writes_out = True
    run.alias_safe = alias_safe
    return run


def view_of(index: int, run):
    """``run`` returns a view of input ``index`` (no bytes of its own)."""
    run.view_of = index
    return run
