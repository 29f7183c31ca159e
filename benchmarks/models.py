"""The benchmark workloads, built identically in graphc and (when installed) PyTorch."""
from __future__ import annotations

import numpy as np

import graphc as gc
from graphc import nn


def mlp() -> nn.Module:
    """W1: MLP 784-512-512-10 with ReLU."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def cnn() -> nn.Module:
    """W2: the CNN on 1x28x28 from the performance issue."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def torch_twin(model: nn.Module):
    """The same architecture in PyTorch with graphc's weights."""
    import torch

    layers = []
    for m in model:
        if isinstance(m, nn.Linear):
            layers.append(torch.nn.Linear(m.in_features, m.out_features))
        elif isinstance(m, nn.Conv2d):
            layers.append(torch.nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding))
        elif isinstance(m, nn.BatchNorm2d):
            layers.append(torch.nn.BatchNorm2d(m.num_features))
        elif isinstance(m, nn.ReLU):
            layers.append(torch.nn.ReLU())
        elif isinstance(m, nn.MaxPool2d):
            layers.append(torch.nn.MaxPool2d(m.kernel_size))
        elif isinstance(m, nn.Flatten):
            layers.append(torch.nn.Flatten())
    twin = torch.nn.Sequential(*layers)
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    return twin


def data(kind: str, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64)


__all__ = ["cnn", "data", "gc", "mlp", "torch_twin"]
