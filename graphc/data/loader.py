"""Datasets and a DataLoader that yields numpy arrays (what compiled plans take)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError


class Dataset:
    """Anything with ``__len__`` and ``__getitem__`` returning a tuple of arrays."""

    def __len__(self) -> int:
        raise GraphcError(f"{type(self).__name__} does not define __len__")

    def __getitem__(self, index):
        raise GraphcError(f"{type(self).__name__} does not define __getitem__")


class TensorDataset(Dataset):
    """Arrays sharing their first dim; item ``i`` is ``(a[i], b[i], ...)``.

    >>> import numpy as np
    >>> from graphc.data import TensorDataset
    >>> ds = TensorDataset(np.zeros((4, 2)), np.arange(4))
    >>> len(ds), int(ds[1][1])
    (4, 1)
    """

    def __init__(self, *arrays):
        if not arrays:
            raise GraphcError("TensorDataset needs at least one array")
        self.arrays = [np.asarray(a.numpy() if hasattr(a, "numpy") else a) for a in arrays]
        n = len(self.arrays[0])
        if any(len(a) != n for a in self.arrays):
            raise GraphcError(f"TensorDataset arrays differ in length: {[len(a) for a in self.arrays]}")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)


class DataLoader:
    """Batches of numpy arrays, optionally shuffled with its own seeded generator.

    >>> import numpy as np
    >>> from graphc.data import DataLoader, TensorDataset
    >>> batches = list(DataLoader(TensorDataset(np.arange(10)), batch_size=4))
    >>> [b[0].tolist() for b in batches]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]

    ``sampler``: any iterable of indices with ``__len__`` (e.g. a ``DistributedSampler``);
    batches follow its order, read once per epoch (per ``iter(loader)``), and it excludes
    ``shuffle=True`` (the sampler decides the order, as in PyTorch).

    >>> from graphc.data import DistributedSampler
    >>> ds = TensorDataset(np.arange(10))
    >>> loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False))
    >>> len(loader), [b[0].tolist() for b in loader]
    (3, [[1, 3], [5, 7], [9]])
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, seed=None,
                 sampler=None):
        if batch_size < 1:
            raise GraphcError(f"batch_size must be >= 1, got {batch_size}")
        if sampler is not None and shuffle:
            raise GraphcError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.sampler = dataset, batch_size, sampler
        self.shuffle, self.drop_last = shuffle, drop_last
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self) -> np.ndarray:
        """This epoch's indices: the sampler's (read once, so a set_epoch before iter counts),
        else a fresh shuffle or range."""
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n = len(self.dataset)
        return self._rng.permutation(n) if self.shuffle else np.arange(n)

    def __iter__(self):
        order = self._order()
        n = len(order)
        for start in range(0, n, self.batch_size):
            index = order[start:start + self.batch_size]
            if self.drop_last and len(index) < self.batch_size:
                return
            if isinstance(self.dataset, TensorDataset):  # one fancy-index per array, no per-item loop
                yield tuple(a[index] for a in self.dataset.arrays)
            else:
                items = [self.dataset[int(i)] for i in index]
                yield tuple(np.stack(column) for column in zip(*items))
