"""``graphc demo --processes N``: the demo trained data-parallel over MPI (graphc.distributed).

Run alone, the command launches itself under ``mpiexec -n N`` (the one the ``mpi`` extra
installs next to Python, or the first on PATH); started by ``mpiexec`` (``mpiexec -n 2 graphc
demo`` on a cluster), each process joins the job. Every process reads its 1/N of each global
batch of ``--batch-size`` images, batch norm uses the global batch's statistics
(SyncBatchNorm) and the plan averages the gradients, so the job trains the model one process
would; rank 0 evaluates, saves and exports.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..ir.errors import GraphcError

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec() -> str:
    """The venv's mpiexec (the mpich wheel's) before any other on PATH, so that it matches mpi4py."""
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if found is None:
        raise GraphcError("graphc demo --processes needs mpiexec and mpi4py: pip install 'graphc[mpi]' "
                          "(mpi4py and the mpich wheel, which brings mpiexec)")
    return found


def launch(processes: int, argv: list) -> int:
    """Run ``graphc demo`` (with the same options) in ``processes`` processes under mpiexec.

    Each process gets an equal share of the cores for its BLAS threads unless the caller chose
    a count: N processes each starting one thread per core would fight over the cores (on this
    2-core machine that made W2's step 2-5x slower, docs/distributed.md)."""
    from .. import distributed as dist

    if not dist.is_available():
        raise GraphcError("graphc demo --processes needs mpi4py: pip install 'graphc[mpi]'")
    threads = str(max(1, (os.cpu_count() or 1) // processes))
    env = {**{name: threads for name in BLAS_THREADS}, **os.environ}
    command = [find_mpiexec(), "-n", str(processes), sys.executable, "-m", "graphc", "demo", *argv]
    return subprocess.run(command, env=env).returncode


def run_process(args, train, finish) -> int:
    """One process of the job: join it, train, let rank 0 ``finish`` (save, check, report).

    A failure in any process ends the job (``MPI_Abort``) after printing it, instead of leaving
    the other processes waiting for it in a collective."""
    from .. import distributed as dist

    dist.init_process_group("mpi", world_size=args.processes or -1)
    args.processes = dist.get_world_size()
    rank = dist.get_rank()
    if args.batch_size % args.processes:  # every process finds it: each ends normally, no abort needed
        # (MPI_Abort can end the job before mpiexec has forwarded the message it printed)
        raise GraphcError(f"--batch-size {args.batch_size} does not split evenly over {args.processes} "
                          "processes; it is the global batch, each process taking an equal share")
    try:
        result = train(args, log=print if rank == 0 else _silent, rank=rank)
        return finish(args, result, rank)
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - printed in one line, then the job ends
        print(f"graphc: error in process {rank} of {args.processes}: {e}", file=sys.stderr)
        dist.abort_job(2)
        raise  # not reached: MPI_Abort ends this process too


def _silent(*_args, **_kwargs) -> None:
    """The log of processes other than rank 0: they train silently."""
