"""The index samplers a DataLoader draws from, as ``torch.utils.data`` has them: in order,
shuffled (by a ``gc.Generator`` or graphc's global seed), and grouped into batches.
(``DistributedSampler``, each rank's share, is in sampler.py.)"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.errors import GraphcError
from ..random import numpy_generator


class Sampler:
    """Base class: an iterable of dataset indices, with ``__len__`` when the count is known."""

    def __iter__(self):
        raise GraphcError(f"{type(self).__name__} does not define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``.

    >>> from graphc.data import SequentialSampler
    >>> list(SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random order of the indices at every ``iter()`` (each epoch).

    The numbers come from ``generator`` (a ``gc.Generator``) or, without one, from graphc's
    global generator, so ``gc.manual_seed(n)`` fixes the orders of a run: the same seed gives
    the same sequence of epochs, each epoch a different order. ``replacement=True`` draws
    ``num_samples`` indices with repeats; without replacement, ``num_samples`` beyond the
    dataset's length takes further permutations (as PyTorch).

    >>> import graphc as gc
    >>> from graphc.data import RandomSampler
    >>> s = RandomSampler(range(5), generator=gc.Generator().manual_seed(0))
    >>> sorted(s), len(s)
    ([0, 1, 2, 3, 4], 5)
    >>> gc.manual_seed(1); a = list(RandomSampler(range(5)))
    >>> gc.manual_seed(1); a == list(RandomSampler(range(5)))
    True
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        if not isinstance(replacement, bool):
            raise GraphcError(f"RandomSampler: replacement must be True or False, got {replacement!r}")
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer))
                                        or num_samples <= 0):
            raise GraphcError(f"RandomSampler: num_samples must be a positive integer, got {num_samples!r}")
        numpy_generator(generator)  # refuse a wrong generator now, not at the first epoch
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = None if num_samples is None else int(num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, count = len(self.data_source), self.num_samples
        rng = numpy_generator(self.generator)  # read now: gc.manual_seed after construction counts
        if n == 0:
            return iter(())
        if self.replacement:
            return iter(rng.integers(0, n, size=count).tolist())
        whole, rest = divmod(count, n)
        parts = [rng.permutation(n) for _ in range(whole)] + ([rng.permutation(n)[:rest]] if rest else [])
        return iter(np.concatenate(parts).tolist()) if parts else iter(())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``, read lazily; the last one is shorter
    unless ``drop_last``.

    >>> from graphc.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(BatchSampler(range(5), batch_size=2, drop_last=True))
    2
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise GraphcError(f"batch_size should be a positive integer value, but got batch_size={batch_size!r}")
        if not isinstance(drop_last, bool):
            raise GraphcError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        indices = iter(self.sampler)  # once per epoch: a sampler's set_epoch before iter() counts
        while True:
            batch = list(itertools.islice(indices, self.batch_size))
            if not batch or self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
