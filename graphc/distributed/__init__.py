"""Data-parallel training across processes over MPI, with PyTorch's ``torch.distributed`` names.

Launch N copies of a script with ``mpiexec -n N python train.py``; each calls
:func:`init_process_group`, wraps its model in ``nn.parallel.DistributedDataParallel`` and
reads its share of every batch (``graphc.data.DistributedSampler``). The compiled plan averages
the gradients inside the graph (one ``allreduce`` node per bucket), so every process applies
the same update. Needs the ``mpi`` extra: ``pip install 'graphc[mpi]'`` (mpi4py and the mpich
wheel, which brings ``mpiexec``). See docs/distributed.md.

>>> import graphc.distributed as dist
>>> dist.is_initialized()
False
"""
from __future__ import annotations

import datetime
import os
import sys

import numpy as np

from ..executor.comm import ProcessGroup, agree, group, set_group
from ..ir.errors import GraphcError

# Set by mpiexec (MPICH's hydra and gforker: PMI_*; Open MPI: OMPI_*; PMIx launchers, Slurm).
LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_PROCID")
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # PyTorch's default for collectives
NOT_INITIALIZED = ("the default process group is not initialized: call graphc.distributed.init_process_group('mpi') "
                   "first, in every process of a job launched with `mpiexec -n N python script.py`")


class ReduceOp:
    """The reductions of :func:`all_reduce` (PyTorch's ``dist.ReduceOp`` names)."""

    SUM, AVG, MAX, MIN = "sum", "mean", "max", "min"


def is_available() -> bool:
    """Whether mpi4py (the ``mpi`` extra) can be imported."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:
        raise GraphcError("graphc.distributed needs mpi4py and an MPI library: pip install 'graphc[mpi]' "
                          "(mpi4py and the mpich wheel, which brings mpiexec)") from None
    return MPI


def launched_by_mpiexec() -> bool:
    """Whether ``mpiexec`` (or a cluster's launcher) started this process, so that
    :func:`init_process_group` has a job to join."""
    return any(name in os.environ for name in LAUNCHER_VARIABLES)


def abort_job(code: int = 1) -> None:
    """End every process of the job now (``MPI_Abort``): how a process that failed outside a
    collective keeps the others from waiting for it forever."""
    sys.stderr.flush()
    _group().comm.Abort(code)


def init_process_group(backend: str = "mpi", init_method=None, timeout=None, world_size: int = -1, rank: int = -1):
    """Join the job this process was launched into by ``mpiexec``: rank and world size come from
    MPI. ``world_size`` and ``rank``, when given, must agree with MPI's. An uncaught exception in
    any process then aborts the whole job (instead of leaving the others waiting forever in a
    collective)."""
    if backend != "mpi":
        raise GraphcError(f"backend {backend!r} is not available: graphc's data-parallel engine is MPI "
                          "(backend='mpi'); on GPUs the buffers go through host memory (docs/distributed.md)")
    if group() is not None:
        raise GraphcError("init_process_group was called twice; the default process group is already initialized")
    if not launched_by_mpiexec():
        raise GraphcError("init_process_group: this process was not launched by mpiexec, so there is no job to join; "
                          "run `mpiexec -n 2 python script.py` (mpiexec comes with pip install 'graphc[mpi]')")
    mpi = _mpi()
    comm = mpi.COMM_WORLD
    for what, given, actual in (("world_size", world_size, comm.Get_size()), ("rank", rank, comm.Get_rank())):
        if given not in (-1, None) and given != actual:
            raise GraphcError(f"init_process_group({what}={given}) but mpiexec launched this process as "
                              f"{what} {actual}; drop the argument or launch with `mpiexec -n {given}`")
    seconds = (timeout or DEFAULT_TIMEOUT).total_seconds()
    set_group(ProcessGroup(comm, mpi, seconds))
    if comm.Get_size() > 1:
        sys.excepthook = _abort_job_on_uncaught(sys.excepthook, comm)


def _abort_job_on_uncaught(previous, comm):
    """Print the traceback as usual, then abort every process: MPI has no other way to wake the
    processes already waiting for this one in a collective."""
    def hook(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stderr.flush()
        comm.Abort(1)  # the group may be destroyed by now; the communicator is still there
    return hook


def destroy_process_group() -> None:
    """Leave the group: collectives become the identity again (MPI itself ends at exit)."""
    set_group(None)


def is_initialized() -> bool:
    return group() is not None


def _group():
    pg = group()
    if pg is None:
        raise GraphcError(NOT_INITIALIZED)
    return pg


def get_rank() -> int:
    """This process's rank, 0 to world size - 1."""
    return _group().rank


def get_world_size() -> int:
    return _group().size


def barrier() -> None:
    """Wait until every process has reached this call."""
    _group().comm.Barrier()


def _host(tensor):
    """The numpy array behind ``tensor`` (a numpy array or a graphc Tensor), and how to put a
    result back where it lives (a cupy array is copied through host memory)."""
    array = tensor if isinstance(tensor, np.ndarray) else getattr(tensor, "array", tensor)  # a Tensor's storage
    if isinstance(array, np.ndarray):
        if not array.flags.c_contiguous:
            raise GraphcError("collectives need a contiguous array (np.ascontiguousarray)")
        return array, lambda: None
    host = array.get()
    return host, lambda: array.set(host)


def all_reduce(tensor, op: str = ReduceOp.SUM) -> None:
    """Reduce ``tensor`` (a numpy array or an eager graphc Tensor) in place over all processes.

    In a compiled plan, gradients are reduced by the ``allreduce`` op instead; this is for
    values the program computes eagerly (metrics, counts)."""
    pg = _group()
    ops = {ReduceOp.SUM: pg.mpi.SUM, ReduceOp.AVG: pg.mpi.SUM, ReduceOp.MAX: pg.mpi.MAX, ReduceOp.MIN: pg.mpi.MIN}
    if op not in ops:
        raise GraphcError(f"all_reduce: op must be one of {sorted(ops)}, got {op!r}")
    host, put_back = _host(tensor)
    pg.comm.Allreduce(pg.mpi.IN_PLACE, host, op=ops[op])
    if op == ReduceOp.AVG:
        host /= pg.size
    put_back()


def broadcast(tensor, src: int = 0) -> None:
    """Overwrite ``tensor`` in every process with process ``src``'s values."""
    pg = _group()
    if not 0 <= src < pg.size:
        raise GraphcError(f"broadcast: src {src} is not a rank of this {pg.size}-process job")
    host, put_back = _host(tensor)
    pg.comm.Bcast(host, root=src)
    put_back()


def check_same_everywhere(text: str, what: str) -> None:
    """Raise in every process when ``text`` (a description of the model) differs between them."""
    agree(_group(), text, what)


__all__ = ["ReduceOp", "abort_job", "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_rank",
           "get_world_size", "init_process_group", "is_available", "is_initialized", "launched_by_mpiexec"]
