"""DistributedSampler (torch.utils.data semantics) and DataLoader(sampler=...).

PyTorch parity is for ``shuffle=False`` only: graphc shuffles with numpy's generator, so the
shuffled orders differ by design (same padding, striding and per-(seed, epoch) determinism)."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from graphc.data import DataLoader, DistributedSampler, TensorDataset
from graphc.ir.errors import GraphcError

try:
    import torch
except ImportError:  # parity replays tests/data/torch_test_sampler.npz
    torch = None

# (dataset length, num_replicas): even, uneven, fewer samples than replicas, empty
SIZES = [(10, 2), (10, 3), (7, 4), (3, 5), (1, 1), (0, 3), (17, 17)]


def ranks(n, world, **kw):
    """One sampler per rank of a ``world``-sized group over ``range(n)``."""
    return [DistributedSampler(range(n), num_replicas=world, rank=r, **kw) for r in range(world)]


@pytest.mark.parametrize("n,world", SIZES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_ranks_partition_padded_epoch(n, world, shuffle):
    samplers = ranks(n, world, shuffle=shuffle, seed=3)
    per_rank = [list(s) for s in samplers]
    want = -(-n // world)
    assert all(len(s) == want and len(idx) == want for s, idx in zip(samplers, per_rank))
    everything = [i for idx in per_rank for i in idx]
    assert set(everything) == set(range(n))  # the union covers the dataset
    assert all(isinstance(i, int) for i in everything)
    # interleave back into the global order: its first n are a permutation, then padding repeats the start
    order = [per_rank[k % world][k // world] for k in range(want * world)]
    assert sorted(order[:n]) == list(range(n))
    padding = [order[k % n] for k in range(len(order) - n)] if n else []
    assert order[n:] == padding


@pytest.mark.parametrize("n,world", SIZES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_drop_last_truncates_to_equal_shares(n, world, shuffle):
    per_rank = [list(s) for s in ranks(n, world, shuffle=shuffle, drop_last=True)]
    assert all(len(idx) == n // world for idx in per_rank)
    everything = [i for idx in per_rank for i in idx]
    assert len(set(everything)) == len(everything) == n // world * world  # nothing repeated
    if not shuffle:
        assert sorted(everything) == list(range(n // world * world))


def test_shuffle_is_deterministic_per_seed_and_epoch():
    a, b = DistributedSampler(range(50), num_replicas=2, rank=0, seed=7), \
        DistributedSampler(range(50), num_replicas=2, rank=0, seed=7)
    assert list(a) == list(b) == list(a)  # re-iterating the same epoch repeats it
    a.set_epoch(4), b.set_epoch(4)
    assert list(a) == list(b)
    assert list(a) != list(DistributedSampler(range(50), num_replicas=2, rank=0, seed=8))
    # seed + epoch is what seeds the order, as in torch
    c = DistributedSampler(range(50), num_replicas=2, rank=0, seed=11)
    assert list(a) == list(c)


def test_set_epoch_changes_the_order_not_the_share():
    s = DistributedSampler(range(40), num_replicas=1, rank=0, seed=0)
    orders = []
    for epoch in range(3):
        s.set_epoch(epoch)
        orders.append(list(s))
    assert orders[0] != orders[1] != orders[2]
    assert all(sorted(o) == list(range(40)) for o in orders)
    assert list(DistributedSampler(range(40), num_replicas=1, rank=0, shuffle=False)) == list(range(40))


@pytest.mark.parametrize("epoch", [0, 5])
def test_all_ranks_share_one_global_order(epoch):
    s0, s1 = ranks(11, 2, seed=2)
    for s in (s0, s1):
        s.set_epoch(epoch)
    a, b = list(s0), list(s1)
    order = np.random.default_rng(2 + epoch).permutation(11).tolist()
    padded = order + order[:1]
    assert a == padded[0::2] and b == padded[1::2]
    assert sorted(set(a) | set(b)) == list(range(11))


@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_matches_pytorch(drop_last, torch_ref):
    def torch_shares():
        out = {}
        for n, world in SIZES:
            for r in range(world):
                s = torch.utils.data.DistributedSampler(range(n), num_replicas=world, rank=r,
                                                        shuffle=False, drop_last=drop_last)
                out[f"{n}_{world}_{r}"] = np.array(list(s) + [-1], np.int64)  # -1: no empty arrays
                out[f"{n}_{world}_{r}_len"] = np.array(len(s), np.int64)
        return out

    want = torch_ref({"sizes": SIZES, "drop_last": drop_last}, torch_shares)
    for n, world in SIZES:
        for r, s in enumerate(ranks(n, world, shuffle=False, drop_last=drop_last)):
            assert list(s) == want[f"{n}_{world}_{r}"].tolist()[:-1], (n, world, r)
            assert len(s) == int(want[f"{n}_{world}_{r}_len"]), (n, world, r)


def test_dataloader_batches_in_sampler_order():
    ds = TensorDataset(np.arange(10) * 10, np.arange(10))
    sampler = DistributedSampler(ds, num_replicas=2, rank=0, seed=1)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    assert loader.sampler is sampler and len(loader) == 3
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert [len(b[0]) for b in batches] == [2, 2, 1]
        got = np.concatenate([b[1] for b in batches]).tolist()
        assert got == list(sampler)
        np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), np.array(got) * 10)
    assert len(DataLoader(ds, batch_size=2, sampler=sampler, drop_last=True)) == 2
    assert [len(b[0]) for b in DataLoader(ds, batch_size=2, sampler=sampler, drop_last=True)] == [2, 2]


def test_dataloader_takes_any_sized_iterable_and_generic_datasets():
    class Squares:  # not a TensorDataset: the per-item path
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return np.array([i * i]), np.array(i)

    loader = DataLoader(Squares(), batch_size=2, sampler=[5, 0, 3])
    assert len(loader) == 2
    batches = list(loader)
    assert [b[1].tolist() for b in batches] == [[5, 0], [3]]
    assert batches[0][0].tolist() == [[25], [0]]
    assert list(DataLoader(Squares(), sampler=[])) == [] and len(DataLoader(Squares(), sampler=[])) == 0


def test_dataloader_reads_the_sampler_once_per_epoch():
    class Counting(list):
        iterations = 0

        def __iter__(self):
            Counting.iterations += 1
            return super().__iter__()

    loader = DataLoader(TensorDataset(np.arange(8)), batch_size=1, sampler=Counting([7, 6, 5, 4]))
    assert [int(b[0][0]) for b in loader] == [7, 6, 5, 4] and Counting.iterations == 1


def test_shuffle_with_sampler_is_refused():
    ds = TensorDataset(np.arange(4))
    with pytest.raises(GraphcError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, shuffle=True, sampler=DistributedSampler(ds, num_replicas=1, rank=0))


@pytest.mark.parametrize("world,rank", [(2, 2), (2, -1), (1, 5), (3, 1.0), (2, True)])
def test_bad_rank_is_refused(world, rank):
    with pytest.raises(GraphcError, match=r"invalid rank .*interval \[0, "):
        DistributedSampler(range(4), num_replicas=world, rank=rank)


@pytest.mark.parametrize("world", [0, -2, 2.0])
def test_bad_num_replicas_is_refused(world):
    with pytest.raises(GraphcError, match="num_replicas must be an integer >= 1"):
        DistributedSampler(range(4), num_replicas=world, rank=0)


def fake_distributed(monkeypatch, **attrs):
    """Put a stand-in graphc.distributed in place (the real one may be absent or need MPI)."""
    import graphc

    module = types.ModuleType("graphc.distributed")
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, "graphc.distributed", module)
    monkeypatch.setattr(graphc, "distributed", module, raising=False)
    return module


NEEDS = r"needs num_replicas and rank, or an initialized process group \(graphc.distributed.init_process_group"


def test_missing_distributed_package_says_what_to_pass(monkeypatch):
    import graphc

    monkeypatch.setitem(sys.modules, "graphc.distributed", None)  # import fails, as without the package
    monkeypatch.delattr(graphc, "distributed", raising=False)
    with pytest.raises(GraphcError, match=NEEDS):
        DistributedSampler(range(4))
    with pytest.raises(GraphcError, match=NEEDS):
        DistributedSampler(range(4), num_replicas=2)  # rank still missing


def test_uninitialized_process_group_says_what_to_pass(monkeypatch):
    def not_initialized():
        raise GraphcError("default process group has not been initialized")

    fake_distributed(monkeypatch, is_initialized=lambda: False, get_world_size=not_initialized,
                     get_rank=not_initialized)
    with pytest.raises(GraphcError, match=NEEDS):
        DistributedSampler(range(4), rank=0)
    fake_distributed(monkeypatch, get_world_size=not_initialized, get_rank=not_initialized)  # no is_initialized
    with pytest.raises(GraphcError, match=NEEDS):
        DistributedSampler(range(4))


def test_world_size_and_rank_come_from_the_process_group(monkeypatch):
    fake_distributed(monkeypatch, is_initialized=lambda: True, get_world_size=lambda: 3, get_rank=lambda: 2)
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (3, 2, [2, 5, 8, 1])
    s = DistributedSampler(range(10), rank=0, shuffle=False)  # an explicit argument wins
    assert (s.num_replicas, s.rank) == (3, 0)
    with pytest.raises(GraphcError, match="invalid rank"):
        DistributedSampler(range(10), num_replicas=2)  # the group's rank 2 does not fit 2 replicas


def test_real_distributed_package_without_init_process_group():
    import graphc.distributed as dist

    assert not dist.is_initialized()  # the test process never opens a group (mpiexec runs are subprocesses)
    with pytest.raises(GraphcError, match=NEEDS):
        DistributedSampler(range(4))
