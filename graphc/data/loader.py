"""Datasets and a DataLoader with PyTorch's options, yielding ``gc.Tensor`` batches (compiled
plans take Tensors as they take numpy arrays)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..random import Generator, numpy_generator
from ..core.tensor import Tensor
from .collate import default_collate, default_convert
from .samplers import BatchSampler, RandomSampler, SequentialSampler


class Dataset:
    """Anything with ``__len__`` and ``__getitem__`` returning a sample (a tuple, dict, array...)."""

    def __len__(self) -> int:
        raise GraphcError(f"{type(self).__name__} does not define __len__")

    def __getitem__(self, index):
        raise GraphcError(f"{type(self).__name__} does not define __getitem__")


class TensorDataset(Dataset):
    """Arrays (or Tensors) sharing their first dim; item ``i`` is ``(a[i], b[i], ...)`` as Tensors.

    The arrays are kept on the host as numpy (``.arrays``; ``.tensors`` wraps them without a
    copy), so a DataLoader batches them with one fancy index per array.

    >>> import numpy as np
    >>> from graphc.data import TensorDataset
    >>> ds = TensorDataset(np.zeros((4, 2)), np.arange(4))
    >>> len(ds), int(ds[1][1]), ds[1][0].shape
    (4, 1, (2,))
    """

    def __init__(self, *arrays):
        if not arrays:
            raise GraphcError("TensorDataset needs at least one array")
        self.arrays = [np.asarray(a.numpy() if isinstance(a, Tensor) else a) for a in arrays]
        if any(a.ndim == 0 for a in self.arrays):
            raise GraphcError("TensorDataset: every array needs a first (sample) dim; got a 0-d one")
        n = len(self.arrays[0])
        if any(len(a) != n for a in self.arrays):
            raise GraphcError(f"Size mismatch between tensors: TensorDataset arrays differ in length "
                              f"{[len(a) for a in self.arrays]}")

    @property
    def tensors(self) -> tuple:
        """The data as Tensors sharing the arrays' memory (``torch``'s ``TensorDataset.tensors``)."""
        return tuple(Tensor(a) for a in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(Tensor(np.asarray(a[index])) for a in self.arrays)

    def batch(self, indices) -> list:
        """The samples at ``indices`` already collated: one fancy index per array, the batch
        ``default_collate`` makes of ``[self[i] for i in indices]`` (a list of Tensors)."""
        index = np.asarray(indices, dtype=np.int64)
        return [Tensor(a[index]) for a in self.arrays]


class DataLoader:
    """Batches of ``gc.Tensor``s, with ``torch.utils.data.DataLoader``'s options and semantics.

    ``batch_size`` samples at a time (``None``: samples one by one through ``default_convert``),
    in order or shuffled (``shuffle=True``: a new order each epoch, drawn from ``generator``, a
    ``gc.Generator``, or ``seed=n``, its shorthand, else from graphc's global generator, so
    ``gc.manual_seed`` fixes the orders of a run). ``sampler`` (any iterable of indices, e.g. a
    ``DistributedSampler``, read once per epoch) excludes ``shuffle``; ``batch_sampler`` (lists
    of indices) excludes ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``. Samples are
    batched by ``collate_fn``, ``default_collate`` by default (dicts give dicts of batches...).
    Loading runs in this process: ``num_workers`` must be 0; ``worker_init_fn`` and ``timeout``
    are accepted and unused, as PyTorch's are with no workers; ``pin_memory=True`` is refused.

    >>> import numpy as np
    >>> from graphc.data import DataLoader, TensorDataset
    >>> batches = list(DataLoader(TensorDataset(np.arange(10)), batch_size=4))
    >>> [b[0].tolist() for b in batches]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    >>> x, y = next(iter(DataLoader(TensorDataset(np.ones((6, 3), np.float32), np.arange(6)), batch_size=4)))
    >>> type(x).__name__, x.size(0), y.dtype.name
    ('Tensor', 4, 'int64')

    >>> from graphc.data import DistributedSampler
    >>> ds = TensorDataset(np.arange(10))
    >>> loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False))
    >>> len(loader), [b[0].tolist() for b in loader]
    (3, [[1, 3], [5, 7], [9]])
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False, seed: int | None = None):
        _check_in_process(num_workers, pin_memory, timeout, prefetch_factor, persistent_workers)
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, 0, False, timeout
        self.worker_init_fn, self.prefetch_factor, self.persistent_workers = worker_init_fn, None, False
        self.generator = _generator(generator, seed)
        self.sampler, self.batch_sampler = _samplers(dataset, batch_size, bool(shuffle), sampler, batch_sampler,
                                                     drop_last, self.generator)
        self.batch_size = batch_size if batch_sampler is None else None  # as PyTorch: None with a batch_sampler
        self.drop_last = drop_last
        if collate_fn is not None and not callable(collate_fn):
            raise GraphcError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        self.collate_fn = collate_fn or (default_collate if self.batch_sampler is not None else default_convert)

    def __len__(self) -> int:
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self):
        if self.batch_sampler is None:  # batch_size=None: one converted sample at a time
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        # one fancy index per array, unless a subclass reads its samples its own way (augmentation)
        fast = (isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate
                and type(self.dataset).__getitem__ is TensorDataset.__getitem__)
        for indices in self.batch_sampler:
            if fast:
                yield self.dataset.batch(indices)
            else:
                yield self.collate_fn([self.dataset[index] for index in indices])


def _generator(generator, seed) -> Generator | None:
    """The loader's own stream: ``generator``, or a Generator seeded with ``seed``, or None
    (the global one, read at each epoch)."""
    if seed is not None:
        if generator is not None:
            raise GraphcError("DataLoader: pass generator= or seed= (its shorthand), not both")
        return Generator().manual_seed(seed)
    numpy_generator(generator)  # a wrong type is refused here, not at the first epoch
    return generator


def _samplers(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last, generator):
    """(sampler, batch_sampler) as PyTorch's DataLoader chooses them."""
    if sampler is not None and shuffle:
        raise GraphcError("DataLoader: sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise GraphcError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                              "sampler, and drop_last")
        return sampler, batch_sampler
    if batch_size is None and drop_last:
        raise GraphcError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                          "with drop_last")
    if sampler is None:
        sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return sampler, None if batch_size is None else BatchSampler(sampler, batch_size, drop_last)


def _check_in_process(num_workers, pin_memory, timeout, prefetch_factor, persistent_workers) -> None:
    """Refuse the options that need worker processes or pinned memory, which graphc's loader
    does not have (batches are read in this process), instead of ignoring them."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise GraphcError(f"DataLoader: num_workers must be an integer >= 0, got {num_workers!r}")
    if num_workers > 0:
        raise GraphcError(f"DataLoader: num_workers={num_workers}: graphc's DataLoader reads batches in this "
                          "process (no worker processes yet); use num_workers=0")
    if pin_memory:
        raise GraphcError("DataLoader: pin_memory=True is not supported: batches are ordinary host arrays "
                          "(x.to('cuda') or the plan copies them to the GPU); leave pin_memory=False")
    if not isinstance(timeout, (int, float)) or timeout < 0:
        raise GraphcError(f"DataLoader: timeout option should be non-negative, got {timeout!r}")
    if prefetch_factor is not None or persistent_workers:
        raise GraphcError("DataLoader: prefetch_factor and persistent_workers need worker processes "
                          "(num_workers > 0), which graphc's DataLoader does not have")
