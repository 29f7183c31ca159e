"""DistributedSampler: each rank's share of a dataset's indices, as torch.utils.data has it."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError

NEEDS_GROUP = ("DistributedSampler needs num_replicas and rank, or an initialized process group "
               "(graphc.distributed.init_process_group('mpi'))")


def _process_group():
    """(world size, rank) of the initialized process group, else a GraphcError.

    Imported here, not at module level: graphc.data must import (and work with explicit
    num_replicas/rank) without the distributed package or MPI."""
    try:
        from .. import distributed as dist
    except ImportError as e:
        raise GraphcError(NEEDS_GROUP) from e
    is_initialized = getattr(dist, "is_initialized", None)
    if is_initialized is not None and not is_initialized():
        raise GraphcError(NEEDS_GROUP)
    try:
        return int(dist.get_world_size()), int(dist.get_rank())
    except (GraphcError, RuntimeError, AttributeError) as e:  # no group: report what to do instead
        raise GraphcError(NEEDS_GROUP) from e


class DistributedSampler:
    """The indices of ``dataset`` that this rank loads, one epoch at a time.

    Same semantics as ``torch.utils.data.DistributedSampler``: the (optionally shuffled)
    order of ``range(len(dataset))`` is padded by repeating its start until it divides
    evenly over ``num_replicas`` (``drop_last=False``), or cut to a multiple of it
    (``drop_last=True``); rank ``r`` takes every ``num_replicas``-th index from ``r``. Every
    rank gets the same number of samples, so all ranks run the same number of steps (unequal
    counts would leave some ranks waiting in a collective forever).

    The shuffle is ``np.random.default_rng(seed + epoch).permutation(len(dataset))``, the
    same on every rank for the same (seed, epoch), but a different order from torch's
    ``randperm`` with the same seed. Call ``set_epoch(epoch)`` before each epoch for a new
    order. ``num_replicas`` and ``rank`` default to ``graphc.distributed``'s world size and rank.

    >>> from graphc.data import DistributedSampler
    >>> data = list(range(10))
    >>> [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    >>> [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=False, drop_last=True)) for r in range(3)]
    [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    >>> s = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
    >>> len(s), sorted(set(s) | set(DistributedSampler(data, num_replicas=2, rank=1, seed=1)))
    (5, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    >>> first = list(s); s.set_epoch(1); list(s) != first
    True
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            world, own = _process_group()
            num_replicas = world if num_replicas is None else num_replicas
            rank = own if rank is None else rank
        _check(num_replicas, rank)
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, int(seed), drop_last, 0
        n = len(dataset)
        # drop_last: floor, so no rank needs a padded (repeated) sample; else ceil, padded
        self.num_samples = n // self.num_replicas if drop_last else -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch's shuffle (seed + epoch); call it with the same epoch on every rank."""
        self.epoch = int(epoch)

    def _global_order(self) -> np.ndarray:
        """The order of all ranks together, total_size long (padded or truncated)."""
        n = len(self.dataset)
        order = np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle else np.arange(n)
        if self.total_size <= n:
            return order[:self.total_size]
        # padding may exceed n (more replicas than samples): np.resize repeats the order cyclically
        return np.resize(order, self.total_size)

    def __iter__(self):
        return iter(self._global_order()[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (f"DistributedSampler(num_replicas={self.num_replicas}, rank={self.rank}, "
                f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last}, epoch={self.epoch})")


def _check(num_replicas, rank) -> None:
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, (int, np.integer)) or num_replicas < 1:
        raise GraphcError(f"DistributedSampler: num_replicas must be an integer >= 1, got {num_replicas!r}")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < num_replicas:
        raise GraphcError(f"DistributedSampler: invalid rank {rank!r}, rank should be in the interval "
                          f"[0, {num_replicas - 1}] (num_replicas={num_replicas})")
