"""Backends: one kernel table each, keyed by op name (the registry's keys).

``get_backend("cpu")`` gives numpy; ``"cuda"``/``"cuda:N"`` gives cupy, imported only then.
"""
from __future__ import annotations

from ...ir.errors import DeviceError
from .numpy_backend import NUMPY


def parse_device(device) -> tuple[str, int]:
    """``"cpu" -> ("cpu", 0)``, ``"cuda:1" -> ("cuda", 1)``; anything else is refused."""
    text = str(device or "cpu").strip().lower()
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index not in ("", "0")):
        raise DeviceError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'")
    return kind, int(index or 0)


def get_backend(device="cpu"):
    kind, index = parse_device(device)
    if kind == "cpu":
        return NUMPY
    from .cupy_backend import cupy_backend

    return cupy_backend(index)


def backend_of(array):
    """The backend owning ``array``: cupy arrays run on their GPU, anything else on numpy."""
    if type(array).__module__.split(".")[0] == "cupy":
        return get_backend(f"cuda:{array.device.id}")
    return NUMPY
