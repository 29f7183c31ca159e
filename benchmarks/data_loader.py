"""The DataLoader's cost per epoch, next to the bare numpy work it wraps and to PyTorch's.

Run: .venv/bin/python benchmarks/data_loader.py [--rounds 5]

For each data set it prints the median over rounds of one epoch of shuffled batches of 64:
``graphc`` (DataLoader -> gc.Tensor batches), ``numpy`` (one permutation and one fancy index
per array and batch, what the loader did before it yielded Tensors: the floor for the
TensorDataset fast path), and ``torch`` (torch.utils.data.DataLoader over the same data, when
torch is installed). The dict data set goes sample by sample through default_collate. Not a
test: the numbers depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import graphc as gc
from graphc.data import DataLoader, TensorDataset

BATCH = 64


class Records:
    """Dict samples (an image, a label, a name): the per-sample default_collate path."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"image": self.images[i], "label": int(self.labels[i]), "name": f"s{i}"}


def epoch_seconds(make_batches, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _batch in make_batches():
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def numpy_epoch(arrays, rng):
    order = rng.permutation(len(arrays[0]))
    for start in range(0, len(order), BATCH):
        index = order[start:start + BATCH]
        yield tuple(a[index] for a in arrays)


def torch_loader(dataset):
    try:
        import torch
    except ImportError:
        return None
    if isinstance(dataset, Records):
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True)
    tensors = [torch.from_numpy(a) for a in dataset.arrays]
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*tensors), batch_size=BATCH, shuffle=True)


def main(rounds: int) -> None:
    gc.manual_seed(0)
    rng = np.random.default_rng(0)
    small = rng.random((1438, 1, 8, 8), np.float32), rng.integers(0, 10, 1438)  # the digits' size
    large = rng.random((60000, 1, 28, 28), np.float32), rng.integers(0, 10, 60000)  # MNIST's size
    sets = {"tensors 1438x1x8x8": TensorDataset(*small), "tensors 60000x1x28x28": TensorDataset(*large),
            "dicts 1438x1x8x8": Records(*small)}
    print(f"{'data set':<24}{'graphc':>12}{'numpy':>12}{'torch':>12}   (ms per epoch, batches of {BATCH})")
    for name, dataset in sets.items():
        loader = DataLoader(dataset, batch_size=BATCH, shuffle=True)
        ours = epoch_seconds(lambda: loader, rounds)
        arrays = dataset.arrays if isinstance(dataset, TensorDataset) else None
        bare = epoch_seconds(lambda: numpy_epoch(arrays, rng), rounds) if arrays else None
        theirs = torch_loader(dataset)
        torch_s = epoch_seconds(lambda: theirs, rounds) if theirs is not None else None
        cells = [f"{v * 1e3:>12.2f}" if v is not None else f"{'-':>12}" for v in (ours, bare, torch_s)]
        print(f"{name:<24}{''.join(cells)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    main(parser.parse_args().rounds)
