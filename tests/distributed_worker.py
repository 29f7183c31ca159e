"""What each process of a ``mpiexec -n 2`` test runs: ``python distributed_worker.py SCENARIO OUT``.

Scenarios train a model data-parallel (each rank takes its half of every global batch) and
rank 0 writes the final state to ``OUT`` (.npz); tests/test_distributed.py compares it with one
process training on the whole batches. Bad-use scenarios print the GraphcError they get.
"""
from __future__ import annotations

import datetime
import sys

import numpy as np

import graphc as gc
import graphc.distributed as dist
from graphc import nn, optim
from graphc.data import DataLoader, DistributedSampler, TensorDataset

STEPS, GLOBAL_BATCH = 5, 32


def mlp():
    gc.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))


def cnn(sync: bool):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 3))
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def data(kind: str):
    """STEPS global batches: the same on every rank (each takes its share by rank)."""
    rng = np.random.default_rng(42)
    shape = (10,) if kind == "mlp" else (1, 8, 8)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, *shape)).astype(np.float32)
    ys = rng.integers(0, 3, (STEPS, GLOBAL_BATCH))
    return xs, ys


def setup(kind: str, sync: bool = False):
    """(model, optimizer) as the test's single-process reference builds them."""
    model = mlp() if kind == "mlp" else cnn(sync)
    opt = (optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if kind == "mlp"
           else optim.Adam(model.parameters(), lr=1e-2))
    return model, opt


def loader(kind: str, ranks: int, rank: int) -> DataLoader:
    """This rank's batches, as a PyTorch job reads them: a DistributedSampler over the samples of
    all global batches, in order, and a DataLoader of ``GLOBAL_BATCH // ranks`` per step. The
    sampler strides over the ranks, so the ranks' batches of step i are together global batch i."""
    xs, ys = data(kind)
    dataset = TensorDataset(xs.reshape(STEPS * GLOBAL_BATCH, *xs.shape[2:]), ys.reshape(-1))
    sampler = DistributedSampler(dataset, num_replicas=ranks, rank=rank, shuffle=False)
    return DataLoader(dataset, batch_size=GLOBAL_BATCH // ranks, sampler=sampler)


def train(kind: str, sync: bool, ranks: int, rank: int, mode: str = "module") -> dict:
    """Train STEPS steps on this rank's shares; returns the model's final state and the plan.
    ``mode``: "module" compiles (model, loss, optimizer), "step" a traced train_step, "eager"
    runs the train_step eagerly (no plan). Every mode is fed the loader's gc.Tensor batches."""
    model, opt = setup(kind, sync)
    net = nn.parallel.DistributedDataParallel(model) if ranks > 1 else model
    batches = loader(kind, ranks, rank)
    example = next(iter(batches))
    if mode in ("step", "eager"):
        loss_fn = nn.CrossEntropyLoss()

        def train_step(x, y):
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            return loss

        step = gc.compile(train_step, example) if mode == "step" else train_step
    else:
        step = gc.compile(net, example, nn.CrossEntropyLoss(), opt)
    for x, y in batches:
        step(x, y)
    return {k: np.array(v) for k, v in model.state_dict().items()}, (step if mode != "eager" else None)


def main(scenario: str, out: str) -> None:
    if scenario == "no_init":
        try:
            nn.parallel.DistributedDataParallel(mlp())
        except gc.GraphcError as e:
            print(f"refused: {e}")
        return
    dist.init_process_group("mpi")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    if scenario == "fail":
        if rank == 1:
            raise RuntimeError("rank 1 fails on purpose")
        dist.barrier()  # rank 0 waits here for a rank that never comes: the job must still end
        return
    if scenario == "save_rank1":  # only rank 1 saves: an error after the group's timeout, not a hang
        dist.destroy_process_group()
        dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=2))
        model, opt = setup("mlp")
        xs, ys = data("mlp")
        step = gc.compile(nn.parallel.DistributedDataParallel(model), (xs[0, :16], ys[0, :16]),
                          nn.CrossEntropyLoss(), opt)
        if rank == 1:
            try:
                step.save(out)
            except gc.GraphcError as e:
                print(f"rank 1 refused: {e}")
        return
    if scenario == "world_size":
        dist.destroy_process_group()
        try:
            dist.init_process_group("mpi", world_size=3)
        except gc.GraphcError as e:
            print(f"rank {rank} refused: {e}")
        return
    if scenario == "mismatch":
        try:
            nn.parallel.DistributedDataParallel(nn.Linear(4, 4 + rank))
        except gc.GraphcError as e:
            print(f"rank {rank} refused: {e}")
        return
    kind, _, variant = scenario.partition("_")  # mlp, mlp_step, mlp_eager, cnn_sync, cnn_local
    mode = variant if variant in ("step", "eager") else "module"
    state, step = train(kind, variant == "sync", ranks, rank, mode)
    if step is not None:
        step.save(out.replace(".npz", ".graphc"))  # every rank calls save; rank 0 writes
    if variant == "local":  # without SyncBatchNorm each rank keeps its own statistics
        for name in ("1.running_mean", "1.running_var", "0.weight"):
            every = np.zeros((ranks, *state[name].shape), np.float32)
            every[rank] = state[name]
            dist.all_reduce(every)
            state[name + ".per_rank"] = every
    if rank == 0:
        np.savez(out, **state)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
