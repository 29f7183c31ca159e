"""Bundled data sets (no downloads)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from .loader import TensorDataset

_SPLIT_SEED = 0
_TEST_FRACTION = 0.2


def digits(split: str = "train") -> TensorDataset:
    """scikit-learn's bundled 8x8 digits: images ``(n, 1, 8, 8)`` float32 in [0, 1], int64 labels.

    A fixed, seeded 80/20 split (1438 train / 359 test images).

    >>> from graphc.data import datasets
    >>> ds = datasets.digits("test")
    >>> len(ds), ds[0][0].shape
    (359, (1, 8, 8))
    """
    if split not in ("train", "test"):
        raise GraphcError(f"digits split must be 'train' or 'test', got {split!r}")
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise GraphcError("the digits data set needs scikit-learn: pip install 'graphc[data]'") from None
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = data.target.astype(np.int64)
    order = np.random.default_rng(_SPLIT_SEED).permutation(len(labels))
    n_test = int(round(len(labels) * _TEST_FRACTION))
    index = order[n_test:] if split == "train" else order[:n_test]
    return TensorDataset(images[index], labels[index])
