"""``torch.cuda``'s queries for files written for PyTorch (``import graphc as torch``).

graphc runs on the GPU through cupy: ``is_available()`` is True when cupy is installed and
finds a CUDA device (the same check ``gc.device("cuda")`` placement makes), so
``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` picks what graphc can use.

>>> import graphc as gc
>>> d = gc.device("cuda" if gc.cuda.is_available() else "cpu")
>>> gc.cuda.is_available() == (gc.cuda.device_count() > 0), d.type in ("cpu", "cuda")
(True, True)
"""
from __future__ import annotations


def device_count() -> int:
    """The CUDA devices cupy sees (0 without cupy or without a GPU)."""
    try:
        import cupy
    except ImportError:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # cupy's CUDARuntimeError when the driver finds no GPU
        return 0


def is_available() -> bool:
    """Whether graphc's cupy backend has a CUDA device to run on."""
    return device_count() > 0


def current_device() -> int:
    """The index of the current CUDA device (graphc places on ``cuda:0`` unless told)."""
    return 0


def synchronize(device=None) -> None:
    """Wait for the GPU's queued kernels (nothing to wait for without one)."""
    if is_available():
        from .executor.backends import get_backend

        get_backend(str(device) if device is not None else "cuda").synchronize()


def manual_seed(seed: int) -> None:
    """A no-op, as PyTorch's is for the CPU stream: graphc draws every random number, for
    every device, from the one generator ``gc.manual_seed`` seeds; a CUDA-only seed has no
    separate stream to set. Call ``gc.manual_seed`` (``torch.manual_seed``) to seed graphc.

    >>> import graphc as gc
    >>> gc.cuda.manual_seed(0), gc.cuda.manual_seed_all(0)
    (None, None)
    """
    int(seed)  # PyTorch refuses a seed that is not a number


def manual_seed_all(seed: int) -> None:
    """A no-op, as :func:`manual_seed`."""
    int(seed)


def empty_cache() -> None:
    """Free cupy's cached GPU memory blocks (nothing without a GPU)."""
    if is_available():
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
