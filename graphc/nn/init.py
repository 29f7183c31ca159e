"""PyTorch's default initialisers (kaiming-uniform style bounds), drawn from graphc's RNG."""
from __future__ import annotations

import math

import numpy as np

from ..random import generator


def uniform(shape, bound: float, dtype=np.float32) -> np.ndarray:
    return generator().uniform(-bound, bound, size=shape).astype(dtype)


def fan_in(shape) -> int:
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive


def kaiming_uniform(shape, a: float = math.sqrt(5)) -> np.ndarray:
    """``kaiming_uniform_(w, a=sqrt(5))`` as Linear and Conv2d use: bound = 1/sqrt(fan_in)."""
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in(shape)) if fan_in(shape) else 0.0
    return uniform(shape, bound)


def bias_uniform(weight_shape, size: int) -> np.ndarray:
    fan = fan_in(weight_shape)
    return uniform((size,), 1 / math.sqrt(fan) if fan > 0 else 0.0)
