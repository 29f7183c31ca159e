"""The numpy (CPU) backend: the shared kernel table bound to numpy."""
from __future__ import annotations

import functools

import numpy as np

from ..kernels import TABLE


class Backend:
    """A device's array module plus its kernel table (``op name -> factory(spec)``)."""

    def __init__(self, name: str, xp, kernels: dict):
        self.name = name
        self.xp = xp
        self.kernels = kernels

    def asarray(self, data, dtype=None):
        return self.xp.asarray(data, dtype=dtype)

    def to_numpy(self, array) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        """Wait until queued work has finished (numpy runs synchronously: nothing to wait for)."""

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"


NUMPY = Backend("cpu", np, {name: functools.partial(factory, np) for name, factory in TABLE.items()})
