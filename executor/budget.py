"""The memory budget: every buffer's bytes computed with Python integers from static shapes
(bound batch), checked before anything is allocated.

numpy's ``prod(..., int64)`` wraps at 2**63 (a 2**64-element value becomes 0 bytes) and an
allocation of terabytes fails with a raw MemoryError halfway through building a program; the
planner instead refuses such a plan up front with a ``GraphcError`` naming the node.
"""
from __future__ import annotations

import math
import os

from ..ir.errors import GraphcError
from .memory_limits import process_memory_limit

DEFAULT_FRACTION = 0.5  # of physical memory: room for the model's state, the inputs and the OS
FALLBACK_BYTES = 8 << 30  # where the platform does not say how much memory it has


def value_bytes(tensor_type) -> int:
    """Exact bytes of a bound (static) type, as a Python int: never wraps."""
    return math.prod(int(d) for d in tensor_type.shape) * tensor_type.dtype.numpy.itemsize


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX, or the value is unknown
        return FALLBACK_BYTES


def host_memory(root: str = "/") -> int:
    """What this process may use on the host: the least of physical RAM, its cgroup's memory
    limit and the room left under its RLIMIT_AS and RLIMIT_DATA (see ``memory_limits``).

    >>> 0 < host_memory() <= physical_memory()
    True
    """
    limit = process_memory_limit(root)
    return physical_memory() if limit is None else min(physical_memory(), limit)


def default_budget(backend) -> int:
    """Half the device's memory: what the process may use of the host's for numpy (taken when
    the plan is made), the GPU's memory for cupy."""
    total = backend.total_memory() if hasattr(backend, "total_memory") else host_memory()
    return int(total * DEFAULT_FRACTION)


def check_budget(budget) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise GraphcError(f"memory_budget must be a positive number of bytes, got {budget!r}")
    return budget


def format_bytes(n: int, digits: int = 2) -> str:
    """``1.50 GiB``: the unit that keeps the number short (binary units, as memory is sized).
    The one byte formatter of graphc (memory reports, errors, ``graphc inspect``).

    >>> format_bytes(512), format_bytes(3 << 20), format_bytes(2 ** 70), format_bytes(1536, digits=1)
    ('512 B', '3.00 MiB', '1048576.00 PiB', '1.5 KiB')
    """
    for unit, shift in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.{digits}f} {unit}"
    return f"{n} B"


def out_of_memory(what: str, nbytes: int, batch: int, where=None):
    """The allocation failed although the plan was within its budget (a budget given larger than
    the process may use, or memory taken since): the same error, not numpy's bare MemoryError."""
    raise GraphcError(f"{what} needs {format_bytes(nbytes)} ({nbytes:,} bytes) at batch size {batch}, more than "
                      "this process could allocate (its memory limits or the machine's); pass a smaller "
                      "memory_budget= to gc.compile or gc.load to be refused before allocating", where)


def refuse(what: str, nbytes: int, budget: int, batch: int, where=None):
    raise GraphcError(f"{what} needs {format_bytes(nbytes)} ({nbytes:,} bytes) at batch size {batch}, over the "
                      f"plan's memory budget of {format_bytes(budget)}; pass memory_budget= to gc.compile or "
                      "gc.load to allow more", where)
