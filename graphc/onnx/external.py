"""ONNX external data: tensor bytes kept in a file beside the model (``model.onnx.data``).

``torch.onnx.export`` writes every weight over a few hundred bytes there. The file an entry
names is read only when it lies in the model's own folder, as onnxruntime requires: a
location that is absolute, has a ``..`` component, or resolves (symlinks included) outside
the folder is refused before anything is opened (the ONNX path-traversal CVE class). Every
key, offset and length is checked, the bytes are counted against the memory budget before
they are read, and the length must be exactly what the tensor's dtype and dims need. Each
refusal is a ``PlanFormatError`` naming the tensor.
"""
from __future__ import annotations

import os
import re
import stat

import numpy as np

from ..ir.errors import PlanFormatError, show

_KNOWN_KEYS = ("location", "offset", "length", "checksum")  # checksum: accepted unchecked, as onnxruntime does
_NUMBER = re.compile(r"[0-9]{1,19}")  # a decimal that fits int64: offsets and lengths are never signed
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def model_folder(model_path: str) -> str:
    """The resolved folder holding the model file: external data must lie inside it."""
    return os.path.realpath(os.path.dirname(os.path.abspath(model_path)))


class ExternalData:
    """Reads external tensor data for one model, keeping a running total against ``budget``."""

    def __init__(self, folder: str, where: str, budget: int):
        self.folder, self.where, self.budget = folder, where, budget
        self.bytes_read = 0

    def array(self, tensor, dtype, what: str) -> np.ndarray:
        """The tensor's values, read from its data file after every check has passed."""
        if tensor.HasField("raw_data") or _typed_values(tensor):
            raise self._error(what, "is marked as external data but also holds data inline")
        entries = self._entries(tensor, what)
        count = int(np.prod(tensor.dims, dtype=object)) if tensor.dims else 1
        want = count * np.dtype(dtype).itemsize  # Python ints: never wraps
        offset = self._number(entries, "offset", 0, what)
        length = self._number(entries, "length", want, what)
        if length != want:
            raise self._error(what, f"declares shape {list(tensor.dims)} ({want} bytes of {np.dtype(dtype).name}) "
                                    f"but its external data is {length} bytes long")
        if self.bytes_read + length > self.budget:
            raise self._error(what, f"needs {length} bytes of external data, which with the {self.bytes_read} "
                                    f"bytes read before it is over the memory budget of {self.budget} bytes")
        path = self._resolve(entries["location"], what)
        data = self._read(path, offset, length, entries["location"], what)
        self.bytes_read += length
        return _to_array(data, dtype, tensor.dims)

    def _entries(self, tensor, what: str) -> dict:
        entries = {}
        for entry in tensor.external_data:
            if entry.key not in _KNOWN_KEYS:
                raise self._error(what, f"has the external data key {show(entry.key)}; graphc knows "
                                        f"{', '.join(_KNOWN_KEYS)}")
            if entry.key in entries:
                raise self._error(what, f"has the external data key {show(entry.key)} twice")
            entries[entry.key] = entry.value
        if not entries.get("location"):
            raise self._error(what, "is marked as external data but names no location")
        return entries

    def _number(self, entries: dict, key: str, default: int, what: str) -> int:
        text = entries.get(key)
        if text is None:
            return default
        if not _NUMBER.fullmatch(text):
            raise self._error(what, f"has the external data {key} {show(text)}, not a whole number of bytes")
        return int(text)

    def _resolve(self, location: str, what: str) -> str:
        """The real path of ``location`` if it lies in the model's folder; a refusal otherwise."""
        named = f"keeps its data in {show(location, 200)}"
        if "\0" in location:
            raise self._error(what, f"{named}, a location with a NUL character")
        if os.path.isabs(location) or location.startswith(("\\", "/")):
            raise self._error(what, f"{named}, an absolute path; external data must lie in the model's folder")
        if ".." in re.split(r"[\\/]", location):
            raise self._error(what, f"{named}, a path with '..'; external data must lie in the model's folder")
        resolved = os.path.realpath(os.path.join(self.folder, location))
        if os.path.commonpath([self.folder, resolved]) != self.folder or resolved == self.folder:
            raise self._error(what, f"{named}, which resolves outside the model's folder (through a symlink); "
                                    "external data must lie in the model's folder")
        return resolved

    def _read(self, path: str, offset: int, length: int, location: str, what: str) -> np.ndarray:
        named = f"keeps its data in {show(location, 200)}"
        try:
            fd = os.open(path, _OPEN_FLAGS)  # no-follow: the resolved path must not turn into a link now
        except OSError as e:
            raise self._error(what, f"{named}, which cannot be opened ({e.strerror or e})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
                raise self._error(what, f"{named}, which is not a regular file")
            if offset + length > info.st_size:
                raise self._error(what, f"{named} at offset {offset}, length {length}, past the end of that "
                                        f"{info.st_size}-byte file")
            data = _read_exactly(fd, offset, length)
        except OSError as e:
            raise self._error(what, f"{named}, which cannot be read ({e.strerror or e})") from None
        finally:
            os.close(fd)
        if len(data) != length:  # the file shrank while it was read
            raise self._error(what, f"{named}, which ended after {len(data)} of {length} bytes")
        return data

    def _error(self, what: str, message: str) -> PlanFormatError:
        return PlanFormatError(f"{self.where}: {what} {message}")


def _typed_values(tensor) -> bool:
    return any(len(getattr(tensor, field)) for field in ("float_data", "int32_data", "int64_data", "double_data",
                                                          "uint64_data", "string_data"))


def _read_exactly(fd: int, offset: int, length: int) -> np.ndarray:
    """``length`` bytes at ``offset`` read straight into one array (no bytes object copied out
    of, so a weight costs its own size once); shorter if the file ends first."""
    buffer = np.empty(length, np.uint8)
    view, done = memoryview(buffer), 0
    while done < length:
        part = view[done:done + min(length - done, 1 << 26)]
        if hasattr(os, "preadv"):
            count = os.preadv(fd, [part], offset + done)
        else:  # no preadv (not on Linux): one more copy of the chunk
            chunk = os.pread(fd, len(part), offset + done)
            part[:len(chunk)], count = chunk, len(chunk)
        if not count:
            break
        done += count
    return buffer[:done]


def _to_array(data: np.ndarray, dtype, dims) -> np.ndarray:
    """ONNX stores raw data little-endian (a view on little-endian hosts, a swap elsewhere);
    bools are one byte each, any non-zero byte true."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return (data != 0).reshape(tuple(dims))
    return data.view(dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(tuple(dims))
