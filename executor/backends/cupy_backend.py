"""The cupy (GPU) backend, imported lazily: graphc imports and runs without cupy.

It binds the shared kernel factories to cupy (cuBLAS GEMMs, im2col convolution, arenas
from cupy's memory pool) and overrides the activation backwards with fused
``ElementwiseKernel``s, which read each input once instead of making temporaries.
"""
from __future__ import annotations

import functools

from ...ir.errors import DeviceError
from ..kernels import TABLE
from ..kernels.base import writes_out
from .numpy_backend import Backend

_FUSED = {  # op -> (inputs, output, body): one pass over memory on the GPU
    "relu_grad": ("T g, T y", "T out", "out = y > 0 ? g : (T)0"),
    "sigmoid_grad": ("T g, T y", "T out", "out = g * y * ((T)1 - y)"),
    "tanh_grad": ("T g, T y", "T out", "out = g * ((T)1 - y * y)"),
}


def _fused_factory(cupy, name):
    params, output, body = _FUSED[name]
    kernel = cupy.ElementwiseKernel(params, output, body, f"graphc_{name}")

    def factory(xp, spec):
        return writes_out(lambda g, y, out=None: kernel(g, y, out) if out is not None else kernel(g, y))
    return factory


class CupyBackend(Backend):
    def __init__(self, cupy, index: int):
        table = dict(TABLE)
        table.update({name: _fused_factory(cupy, name) for name in _FUSED})
        super().__init__(f"cuda:{index}", cupy, {name: functools.partial(f, cupy) for name, f in table.items()})
        self.index = index

    def asarray(self, data, dtype=None):
        with self.xp.cuda.Device(self.index):
            return self.xp.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        return self.xp.asnumpy(array)

    def synchronize(self) -> None:
        """Wait for the GPU: kernels launch asynchronously, so timings need this."""
        self.xp.cuda.Device(self.index).synchronize()

    def total_memory(self) -> int:
        """The GPU's memory in bytes (the default memory budget is a fraction of it)."""
        with self.xp.cuda.Device(self.index):
            return int(self.xp.cuda.runtime.memGetInfo()[1])


_BACKENDS: dict = {}  # one backend object per device index (cupy kernels compile once)


def cupy_backend(index: int) -> CupyBackend:
    try:
        import cupy
    except ImportError:
        raise DeviceError("device 'cuda' needs cupy, which is not installed: pip install 'graphc[cuda12x]'") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises its own CUDARuntimeError when the driver finds no GPU
        raise DeviceError(f"cupy is installed but no CUDA device is usable ({type(e).__name__}: {e})") from None
    if index >= count:
        raise DeviceError(f"device cuda:{index} requested but only {count} CUDA device(s) exist")
    if index not in _BACKENDS:
        _BACKENDS[index] = CupyBackend(cupy, index)
    return _BACKENDS[index]
