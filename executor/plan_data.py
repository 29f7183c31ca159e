"""The raw data section of a plan file (format 1.3, docs/format.md "Data section").

Since 1.3 every tensor's bytes follow the msgpack header in one section: tensors in the order
of their records, each at the next multiple of ``ALIGN`` (64) bytes, zero bytes between them,
the section starting at the first multiple of 64 after the header. Its integrity check is
zlib's CRC-32, 4.3 GB/s here against SHA-256's 1.8 (docs/design-notes.md, "Plan files at disk
speed"); the header's small body keeps its SHA-256.

Writing (``DataSection``): the chunks are views of the arrays themselves (no copy), and
``coalesce`` groups the small ones, so a save is a few large writes. Reading (``read_file``,
``Placer``): the file is read with one ``readinto`` into one writable buffer whose start is
64-byte aligned; every record is checked against the section (its own bytes, in order, no
overlap, no gap, nothing past the end) before ``np.frombuffer`` makes a view of it. The
loaded plan's state lives in that buffer: writable, aligned, never copied again.
"""
from __future__ import annotations

import os
import stat
import zlib

import numpy as np

from .plan_limits import fail, show

ALIGN = 64  # bytes: a cache line, and more than any dtype's alignment
CHECKSUM = "crc32"
_ZEROS = bytes(ALIGN)
_WRITE_SIZE = 1 << 22  # chunks smaller than this are grouped into writes of about this size


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def padding(n: int) -> bytes:
    """The zero bytes that bring ``n`` to the next multiple of ALIGN."""
    return _ZEROS[:align(n) - n]


# ---- writing ---------------------------------------------------------------------------------------
class DataSection:
    """The data section being laid out: ``add`` places an array (C-contiguous, little-endian)
    and returns its ``(offset, nbytes)``; ``chunks`` are its bytes (views of the arrays and
    zero padding), ``size`` its length and ``checksum()`` its CRC-32."""

    def __init__(self):
        self.chunks: list = []
        self.size = 0

    def add(self, array: np.ndarray) -> tuple[int, int]:
        if self.size % ALIGN:
            self._put(padding(self.size))
        offset = self.size
        if array.size:
            self._put(memoryview(array.reshape(-1).view(np.uint8)))
        return offset, array.nbytes

    def _put(self, chunk) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)

    def checksum(self) -> str:
        return f"{CHECKSUM}:{crc32(self.chunks):08x}"


def crc32(chunks) -> int:
    """zlib's CRC-32 of the concatenated ``chunks`` (buffers)."""
    crc = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return crc


def coalesce(chunks, size: int = _WRITE_SIZE):
    """The chunks as few large buffers: small ones are copied together, big ones pass as they are."""
    pending = bytearray()
    for chunk in chunks:
        if len(chunk) >= size:
            if pending:
                yield pending
                pending = bytearray()
            yield chunk
            continue
        pending += chunk
        if len(pending) >= size:
            yield pending
            pending = bytearray()
    if pending:
        yield pending


# ---- reading ---------------------------------------------------------------------------------------
def aligned_buffer(size: int) -> np.ndarray:
    """``size`` writable bytes starting at a multiple of ALIGN in memory."""
    raw = np.empty(size + ALIGN, np.uint8)
    shift = -raw.ctypes.data % ALIGN
    return raw[shift:shift + size]


def read_file(path: str) -> memoryview:
    """The whole file, read with one ``readinto`` (a regular file) into an aligned, writable buffer.
    OSError as ``open`` and ``read`` raise it."""
    with open(path, "rb", buffering=0) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):  # a pipe or a device: its size is unknown
            return memoryview(f.read())
        buffer = memoryview(aligned_buffer(info.st_size))
        got = 0
        while got < len(buffer):
            n = f.readinto(buffer[got:])
            if not n:
                break  # the file shrank since fstat: what was read is checked like any other file
            got += n
        if got == len(buffer) and f.read(1):
            fail("the file grew while it was being read")
    return buffer[:got]


def section(view: memoryview, header_end: int, info: dict) -> memoryview:
    """The data section described by the header's ``data`` map (``info``: checked here), as a
    writable aligned view of ``view`` (copied once if ``view`` is read-only or misaligned)."""
    size, checksum = info.get("size"), info.get("checksum")
    if type(size) is not int or size < 0:
        fail(f"file.data.size should be a byte count, got {show(size)}")
    if not isinstance(checksum, str):
        fail(f"file.data.checksum should be a string, got {show(checksum)}")
    start = align(header_end)
    if start + size > len(view):
        fail(f"truncated file: its data section should be {size} bytes from byte {start}, the file is "
             f"{len(view)} bytes long")
    if start + size < len(view):
        fail(f"{len(view) - start - size} trailing bytes after the data section")
    if view[header_end:start] != padding(header_end):
        fail("the bytes between the header and the data section must be zeros")
    data = view[start:]
    algorithm, _, digest = checksum.partition(":")
    if algorithm != CHECKSUM:
        fail(f"unsupported data section checksum {show(algorithm)} (this graphc checks {CHECKSUM})")
    if digest != f"{crc32([data]):08x}":
        fail("data section checksum mismatch: the file is corrupted")
    if data.readonly or np.frombuffer(data, np.uint8).ctypes.data % ALIGN:
        copy = aligned_buffer(len(data))
        copy[:] = np.frombuffer(data, np.uint8)
        data = memoryview(copy)
    return data


class Placer:
    """Checks each tensor record's place in the data section, in record order, and makes its view."""

    def __init__(self, data: memoryview):
        self.data, self.end, self.last = data, 0, None

    def view(self, rec: dict, name: str, dtype: np.dtype, shape: list, nbytes: int) -> np.ndarray:
        """``dtype``: little-endian; ``nbytes``: ``prod(shape) * itemsize``, checked by the caller."""
        offset, stored = rec.get("offset"), rec.get("nbytes")
        for key, value in (("offset", offset), ("nbytes", stored)):
            if type(value) is not int or value < 0:
                fail(f"tensor {show(name)}: {key} should be a non-negative int, got {show(value)}")
        if stored != nbytes:
            fail(f"tensor {show(name)}: shape {shape} x {dtype.itemsize} bytes is {nbytes} bytes, the record "
                 f"says {stored}")
        if offset % ALIGN:
            fail(f"tensor {show(name)} starts at byte {offset} of the data section, not a multiple of {ALIGN}")
        if offset + nbytes > len(self.data):
            fail(f"tensor {show(name)} (bytes {offset} to {offset + nbytes}) runs past the end of the data "
                 f"section ({len(self.data)} bytes)")
        if offset < self.end:
            fail(f"tensor {show(name)} (from byte {offset}) overlaps tensor {show(self.last)}, which ends at "
                 f"byte {self.end}")
        if offset != align(self.end):
            fail(f"tensor {show(name)} starts at byte {offset}, leaving a gap: tensors are stored in order, "
                 f"each at the first multiple of {ALIGN} after the previous one (here {align(self.end)})")
        if self.data[self.end:offset] != padding(self.end):
            fail(f"the padding before tensor {show(name)} must be zeros")
        self.end, self.last = offset + nbytes, name
        if not nbytes:
            return np.zeros(shape, dtype.newbyteorder("="))
        array = np.frombuffer(self.data, dtype, nbytes // dtype.itemsize, offset).reshape(shape)
        return array if dtype.isnative else array.astype(dtype.newbyteorder("="))

    def finish(self) -> None:
        if self.end != len(self.data):
            fail(f"the data section holds {len(self.data) - self.end} bytes after its last tensor")
