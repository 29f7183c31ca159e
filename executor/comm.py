"""The process group the ``allreduce`` kernel talks through.

``graphc.distributed.init_process_group`` opens it (MPI's COMM_WORLD through mpi4py, imported
there and only there); kernels and ``Plan.save`` read it with :func:`group`. It is the one
piece of process-wide state besides the RNG seed, as in PyTorch (``torch.distributed`` keeps a
default group) and in MPI itself (COMM_WORLD belongs to the process). Without a group every
collective is the identity, so a plan trained data-parallel loads and runs anywhere.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ..ir.errors import GraphcError


@dataclass(frozen=True)
class ProcessGroup:
    """An MPI communicator (``mpi4py.MPI.Comm``) and the mpi4py module it came from."""

    comm: object
    mpi: object
    timeout_s: float

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def size(self) -> int:
        return self.comm.Get_size()


_state = {"group": None}  # set by graphc.distributed.init_process_group, cleared by destroy_process_group


def group() -> ProcessGroup | None:
    """The open process group, or None in a single process."""
    return _state["group"]


def set_group(value: ProcessGroup | None) -> None:
    _state["group"] = value


def agree(pg: ProcessGroup, text: str, what: str) -> None:
    """Raise in every process when ``text`` differs between processes, naming the ranks that
    differ. It compares hashes (no pickling), and waits at most the group's timeout for the
    others, so a call made by one process alone is an error rather than a hang."""
    digest = np.frombuffer(hashlib.sha256(text.encode()).digest()[:8], np.int64).copy()
    every = np.empty(pg.size, np.int64)
    request = pg.comm.Iallgather(digest, every)
    deadline = time.monotonic() + pg.timeout_s
    while not request.Test():
        if time.monotonic() > deadline:
            raise GraphcError(f"{what}: rank {pg.rank} waited {pg.timeout_s:g} s for the other processes, which did "
                              "not make the same call; every process of the job must make it")
        time.sleep(0.0005)
    differ = [r for r in range(pg.size) if every[r] != every[0]]
    if differ:
        raise GraphcError(f"{what} differs between processes: rank(s) {differ} do not match rank 0")
