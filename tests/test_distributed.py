"""Data-parallel training over MPI, run as a user runs it: ``mpiexec -n 2 python
distributed_worker.py SCENARIO OUT`` in a subprocess (the mpich wheel's mpiexec, which CI
installs with the ``mpi`` extra), compared with one process training on the whole batches.

Tolerance: 1e-5 relative after 5 steps. Averaging two half-batch gradients adds the same
terms as one whole-batch gradient in another order (float32 rounding, about 1e-7 per step);
SyncBatchNorm's one-pass variance adds about as much again.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
import distributed_worker as worker

MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None and MPIEXEC.exists()
pytestmark = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and the mpich wheel's mpiexec: "
                                                     "pip install 'graphc[mpi]' (CI installs them)")
WORKER = Path(__file__).with_name("distributed_worker.py")
RTOL = 1e-5  # module docstring


def mpiexec(scenario: str, out: Path, processes: int = 2):
    env = {**os.environ, "MPIEXEC_TIMEOUT": "120"}  # mpiexec's own limit on a stuck job
    done = subprocess.run([str(MPIEXEC), "-n", str(processes), sys.executable, str(WORKER), scenario, str(out)],
                          capture_output=True, text=True, timeout=180, env=env)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("scenario", ["mlp", "mlp_step", "mlp_eager", "cnn_sync"])
def test_two_processes_on_half_batches_match_one_on_whole_batches(scenario, tmp_path):
    code, text = mpiexec(scenario, tmp_path / "state.npz")
    assert code == 0, text[-3000:]
    got = dict(np.load(tmp_path / "state.npz"))
    kind = scenario.split("_")[0]
    want, _ = worker.train(kind, sync=False, ranks=1, rank=0)  # plain BatchNorm in one process
    assert set(got) == set(want)
    for name, value in want.items():
        scale = max(1.0, float(np.abs(value).max()))
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=RTOL * scale, err_msg=name)
    if scenario.endswith("eager"):  # loss.backward() averaged eagerly: no plan
        return
    # rank 0 wrote the plan; it loads and runs in a process with no MPI, holding the same weights
    plan = gc.load(tmp_path / "state.graphc")
    assert sum(n.op == "allreduce" for n in plan.graph.nodes) >= 1
    xs, ys = worker.data(kind)
    plan(xs[0, :16], ys[0, :16])  # a single process: allreduce is the identity


def test_without_syncbatchnorm_each_process_keeps_its_own_statistics(tmp_path):
    code, text = mpiexec("cnn_local", tmp_path / "state.npz")
    assert code == 0, text[-3000:]
    got = np.load(tmp_path / "state.npz")
    mean = got["1.running_mean.per_rank"]
    assert not np.allclose(mean[0], mean[1])  # each rank's own half-batches, as in PyTorch DDP
    weights = got["0.weight.per_rank"]
    np.testing.assert_array_equal(weights[0], weights[1])  # the averaged update is the same everywhere


def test_a_failing_process_ends_the_whole_job(tmp_path):
    code, text = mpiexec("fail", tmp_path / "x.npz")  # rank 0 waits in a barrier for rank 1
    assert code != 0 and "rank 1 fails on purpose" in text


@pytest.mark.parametrize("scenario, expected", [
    ("mismatch", "the wrapped model (the names, shapes and dtypes of its parameters and buffers) differs between "
                 "processes: rank(s) [1] do not match rank 0"),
    ("world_size", "init_process_group(world_size=3) but mpiexec launched this process as world_size 2"),
    ("save_rank1", "rank 1 waited 2 s for the other processes, which did not make the same call"),
])
def test_bad_use_is_a_clear_error(scenario, expected, tmp_path):
    code, text = mpiexec(scenario, tmp_path / "x.npz")
    assert code == 0 and expected in text, text[-3000:]
    assert not (tmp_path / "x.npz").exists()


def test_ddp_without_a_process_group_and_init_without_mpiexec_are_refused():
    done = subprocess.run([sys.executable, str(WORKER), "no_init", "unused"], capture_output=True, text=True)
    assert "refused: DistributedDataParallel: the default process group is not initialized" in done.stdout
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE")}
    done = subprocess.run([sys.executable, "-c", "import graphc.distributed as d; d.init_process_group('mpi')"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "was not launched by mpiexec" in done.stderr


def demo(*args, launcher=()):
    env = {**os.environ, "MPIEXEC_TIMEOUT": "300"}
    done = subprocess.run([*launcher, sys.executable, "-m", "graphc", "demo", *args], capture_output=True, text=True,
                          timeout=400, env=env)
    return done.returncode, done.stdout + done.stderr


def test_the_demo_trains_data_parallel_to_the_accuracy_of_one_process(tmp_path):
    """``graphc demo --processes 2`` launches itself under mpiexec. Its accuracy is not bit-equal
    to one process's: the shuffles differ (DistributedSampler's order vs the DataLoader's) and
    each process draws its own dropout masks, so the two runs see the data in another order.
    Within 0.02 (7 of the 359 test images) of each other and both above 0.95 is the claim."""
    code, two = demo("--processes", "2", "--epochs", "3", "--out", str(tmp_path / "two"))
    assert code == 0, two[-3000:]
    assert "processes:        2 (each 32 of every 64 images)" in two
    code, one = demo("--epochs", "3", "--out", str(tmp_path / "one"))
    assert code == 0, one[-3000:]
    accuracy = [float(text.split("test accuracy:")[1].split()[0]) for text in (one, two)]
    assert min(accuracy) > 0.95 and abs(accuracy[0] - accuracy[1]) <= 0.02, accuracy
    assert two.count("epoch  1:") == 1  # only rank 0 reports
    plan = gc.load(tmp_path / "two" / "train.graphc")  # rank 0's file, loaded with no MPI
    assert sum(n.op == "allreduce" for n in plan.graph.nodes) == 1 + 3 + 3  # gradients, 3 SyncBNs, their vjps
    assert (tmp_path / "two" / "model.graphc").exists()


def test_a_demo_process_that_fails_ends_the_job_under_mpiexec(tmp_path):
    # launched by mpiexec, each process joins the job; a bad global batch fails in every process
    code, text = demo("--batch-size", "63", "--epochs", "1", "--out", str(tmp_path), launcher=(str(MPIEXEC), "-n", "2"))
    assert code != 0
    assert "--batch-size 63 does not split evenly over 2 processes" in text
    assert "Traceback" not in text
