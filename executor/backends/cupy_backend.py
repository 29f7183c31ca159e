"""The cupy (GPU) backend, imported lazily: graphc runs without cupy installed."""
from __future__ import annotations

import functools

from ...ir.errors import DeviceError
from ..kernels import TABLE
from .numpy_backend import Backend


class CupyBackend(Backend):
    def __init__(self, cupy, index: int):
        super().__init__(f"cuda:{index}", cupy, {name: functools.partial(f, cupy) for name, f in TABLE.items()})
        self.index = index

    def asarray(self, data, dtype=None):
        with self.xp.cuda.Device(self.index):
            return self.xp.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        return self.xp.asnumpy(array)


def cupy_backend(index: int) -> CupyBackend:
    try:
        import cupy
    except ImportError:
        raise DeviceError("device 'cuda' needs cupy: pip install 'graphc[cuda12x]'") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # the driver raises its own error types when no GPU is present
        raise DeviceError(f"cupy is installed but no CUDA device is usable: {e}") from None
    if index >= count:
        raise DeviceError(f"device cuda:{index} requested but only {count} CUDA device(s) exist")
    return CupyBackend(cupy, index)
