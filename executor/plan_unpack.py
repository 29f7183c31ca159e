"""Unpacking a plan file within its limits (``plan_limits``).

The loader never unpacks a whole map in one go. ``Fields`` locates each field of a map
without building objects, then unpacks a field only when asked, with that field's limits:
msgpack's ``max_*_len`` options for one container, and hooks that count lists, maps and
entries over the whole field and refuse duplicate or non-string keys (msgpack would keep the
last of two ``kind`` keys, and lets bytes keys through ``strict_map_key``). Long lists
(values, nodes, tensors) are read one entry at a time, so the first bad entry stops the load
before the rest is built. Unknown keys (a newer minor version's fields) are only located.

Locating is done in Python (``span``: type bytes and sizes only, so a tensor's bytes are
jumped over and the body is a view of the file, never a copy), except for the graph's big
fields, which hold many small objects and no bins: msgpack's C ``Unpacker.skip`` walks them.
"""
from __future__ import annotations

import msgpack

from ..ir.errors import PlanFormatError
from .plan_limits import BIN, MAX_KEY_BYTES, MAX_KEYS, Limit, Stream, clip, fail, show

_READ_SIZE = 1 << 16  # an Unpacker's buffer: this plus the largest single entry
_REQUIRED = object()
_PYTHON_SPAN = 4096  # fields of at most this many objects are located in Python (checking for ext types)


# ---- unpacking one field ---------------------------------------------------------------------
class _Budget:
    """msgpack hooks that count lists, maps and entries against a Limit and check map keys.
    They run once per container inside msgpack's C loop: kept short on purpose."""

    def __init__(self, limit: Limit, what: str):
        self.limit, self.what = limit, what
        self.reset()

    def reset(self):
        self.items, self.containers = self.limit.items, self.limit.containers

    def _over(self):
        fail(f"{self.what} holds more than {self.limit.items} entries or {self.limit.containers} lists and maps "
             f"(the format's limit for this field)")

    def list_hook(self, value: list) -> list:
        self.items -= len(value)
        self.containers -= 1
        if self.items < 0 or self.containers < 0:
            self._over()
        return value

    def pairs_hook(self, pairs: list) -> dict:
        self.items -= len(pairs)
        self.containers -= 1
        if self.items < 0 or self.containers < 0:
            self._over()
        out = dict(pairs)
        if len(out) != len(pairs):
            seen = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))
            fail(f"{self.what} has the key {show(key)} twice")
        for key in out:
            if type(key) is not str:
                fail(f"{self.what} has a {type(key).__name__} key {show(key)}; map keys must be strings")
        return out


def _options(limit: Limit, budget: _Budget, size: int) -> dict:
    binary = limit.string if limit.binary is None else limit.binary
    return {"raw": False, "strict_map_key": True, "use_list": True, "max_str_len": limit.string,
            "max_bin_len": size if binary < 0 else binary, "max_array_len": limit.length,
            "max_map_len": limit.length, "max_ext_len": 0, "list_hook": budget.list_hook,
            "object_pairs_hook": budget.pairs_hook}


def unpack(data, limit: Limit, what: str):
    """One msgpack document within ``limit``; every problem is a PlanFormatError."""
    budget = _Budget(limit, what)
    try:
        return msgpack.unpackb(data, **_options(limit, budget, len(data)))
    except PlanFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - msgpack's errors are translated, anything else re-raised
        _msgpack_error(e, what)


def _msgpack_error(error: Exception, what: str):
    """msgpack's exceptions (truncation, bad bytes, over a limit, too deep) as PlanFormatError."""
    text = clip(error, 160)
    if isinstance(error, (msgpack.exceptions.OutOfData, msgpack.exceptions.ExtraData)) or "incomplete" in text:
        reason = "trailing bytes" if isinstance(error, msgpack.exceptions.ExtraData) else "truncated"
        fail(f"not a graphc plan file, or a damaged one: {what} is not one msgpack document ({reason})")
    if isinstance(error, msgpack.exceptions.StackError):
        fail(f"{what} is nested more deeply than msgpack allows")
    if isinstance(error, (msgpack.exceptions.UnpackException, ValueError, TypeError, OverflowError, RecursionError,
                          MemoryError)):  # UnpackException: BufferFull too
        if "exceeds max_" in text:
            fail(f"{what} is over a limit of the plan format ({text}; see docs/format.md)")
        fail(f"{what} is not valid msgpack ({type(error).__name__}: {text or 'no detail'})")
    raise error


class _ViewReader:
    """A file-like object over a memoryview: an Unpacker then buffers one entry, not a copy of all."""

    def __init__(self, view: memoryview):
        self.view, self.pos = view, 0

    def read(self, n: int) -> bytes:
        chunk = bytes(self.view[self.pos:self.pos + n])
        self.pos += len(chunk)
        return chunk


def _unpacker(view: memoryview, **options) -> msgpack.Unpacker:
    buffer = min(max(len(view), _READ_SIZE), 2**32 - 1)
    return msgpack.Unpacker(_ViewReader(view), read_size=_READ_SIZE, max_buffer_size=buffer, **options)


def _c_skip(view: memoryview, start: int, what: str) -> int:
    """Where the object at ``start`` ends, found by msgpack's C code (nothing is built)."""
    unpacker = _unpacker(view[start:])
    try:
        unpacker.skip()
    except Exception as e:  # noqa: BLE001 - msgpack's errors are translated, anything else re-raised
        _msgpack_error(e, what)
    return start + unpacker.tell()


# ---- a map's fields ---------------------------------------------------------------------------
class Fields:
    """The fields of one msgpack map, located without unpacking them, each unpacked on request
    within its limit (``limits[key]``: a Limit, a Stream, a nested dict of limits, or BIN).
    Keys must be unique strings; at most ``MAX_KEYS`` of them. Unknown keys are located
    within ``unknown`` (a Limit) if given, else only checked to be well-formed msgpack.
    Bytes after the map are refused unless ``trailing``; ``end`` is where the map ends (the
    file's header: a 1.3 file's raw data section follows it)."""

    def __init__(self, data, what: str, limits: dict, unknown: Limit | None = None, trailing: bool = False):
        self.what, self.limits, self.unknown = what, limits, unknown
        self.view = memoryview(data)
        self.spans, self.entries = {}, {}
        count, pos = _header(self.view, 0, _MAP_HEADERS, f"the {what}", "a map")
        if count > MAX_KEYS:
            fail(f"the {what} has {count} keys (at most {MAX_KEYS})")
        for _ in range(count):
            key, pos = _key(self.view, pos, what)
            if key in self.spans:
                fail(f"the {what} has the key {show(key)} twice")
            end = self._locate(key, pos)
            self.spans[key] = (pos, end)
            pos = end
        self.end = pos
        if pos != len(self.view) and not trailing:
            fail(f"not a graphc plan file, or a damaged one: trailing bytes after the {what}")

    def _locate(self, key: str, start: int) -> int:
        limit, what = self.limits.get(key, self.unknown), f"{self.what}.{key}"
        if isinstance(limit, Stream) and limit.zero_copy:
            count, pos = _header(self.view, start, _ARRAY_HEADERS, what, "a list")
            if count > limit.count:
                fail(f"{what} has {count} entries (at most {limit.count})")
            spans = []
            for _ in range(count):
                end = span(self.view, pos, 2 * limit.entry.items + 1, f"an entry of {what}")
                spans.append((pos, end))
                pos = end
            self.entries[key] = spans
            return pos
        objects = 1 if limit is BIN else 2 * limit.items + 1 if isinstance(limit, Limit) else None
        if objects is not None and objects <= _PYTHON_SPAN:
            return span(self.view, start, objects, what)
        # big fields (the graph's values and nodes, metadata, fields of a newer version) are
        # walked by msgpack's C code, in time proportional to their bytes; they are unpacked,
        # with their limits, only when asked for (unknown fields never are)
        return _c_skip(self.view, start, what)

    def __contains__(self, key: str) -> bool:
        return key in self.spans

    def raw(self, key: str) -> memoryview:
        if key not in self.spans:
            fail(f"the {self.what} is missing {key!r}")
        start, end = self.spans[key]
        return self.view[start:end]

    def get(self, key: str, default=_REQUIRED):
        """The field unpacked within its limit, or ``default`` when it is absent."""
        if key not in self.spans:
            if default is _REQUIRED:
                fail(f"the {self.what} is missing {key!r}")
            return default
        return unpack(self.raw(key), self.limits[key], f"{self.what}.{key}")

    def length(self, key: str) -> int:
        """How many entries the list field ``key`` holds, read from its header (nothing is unpacked)."""
        return _header(self.raw(key), 0, _ARRAY_HEADERS, f"{self.what}.{key}", "a list")[0]

    def fields(self, key: str) -> Fields:
        return Fields(self.raw(key), key, self.limits[key])

    def bin(self, key: str) -> memoryview:
        """A bin field's bytes, as a view of the document (the body: never copied)."""
        raw = self.raw(key)
        size = _BIN_SIZES.get(raw[0])
        if size is None:
            fail(f"{self.what}.{key} should be bytes (a msgpack bin)")
        return raw[1 + size:]

    def stream(self, key: str):
        """``(count, entries)`` of a list field: entries are unpacked one at a time, each within
        the field's per-entry limit, so a bad entry stops the load before the rest is built."""
        spec: Stream = self.limits[key]
        what = f"{self.what}.{key}"
        if spec.zero_copy:
            spans = self.entries[key]
            return len(spans), (unpack(self.view[s:e], spec.entry, f"an entry of {what}") for s, e in spans)
        view = self.raw(key)
        budget = _Budget(spec.entry, f"an entry of {what}")
        unpacker = _unpacker(view, **_options(spec.entry, budget, len(view)))
        count, _ = _header(view, 0, _ARRAY_HEADERS, what, "a list")
        if count > spec.count:
            fail(f"{what} has {count} entries (at most {spec.count})")
        unpacker.read_array_header()  # checked just above

        def entries():
            for _ in range(count):
                budget.reset()
                try:
                    entry = unpacker.unpack()
                except PlanFormatError:
                    raise
                except Exception as e:  # noqa: BLE001 - msgpack's errors are translated, anything else re-raised
                    _msgpack_error(e, what)
                yield entry

        return count, entries()


# ---- locating msgpack objects without unpacking them -------------------------------------------
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2,
          0xD2: 4, 0xD3: 8}  # nil, false, true, float32/64, uint8..64, int8..64: bytes after the type byte
_BIN_SIZES = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_STR_SIZES = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_SIZED = {**_BIN_SIZES, **_STR_SIZES}
_ARRAY_HEADERS = {0xDC: 2, 0xDD: 4, **{b: 0 for b in range(0x90, 0xA0)}}
_MAP_HEADERS = {0xDE: 2, 0xDF: 4, **{b: 0 for b in range(0x80, 0x90)}}


def _header(view: memoryview, pos: int, kinds: dict, what: str, expected: str) -> tuple[int, int]:
    """``(count, position after the header)`` of the array or map header at ``pos``."""
    if pos >= len(view):
        fail(f"not a graphc plan file, or a truncated one: {what} ends early")
    kind = view[pos]
    if kind not in kinds:
        fail(f"{what} should be {expected}")
    size = kinds[kind]
    if size == 0:
        return kind & 0x0F, pos + 1
    if pos + 1 + size > len(view):
        fail(f"not a graphc plan file, or a truncated one: {what} ends early")
    return int.from_bytes(view[pos + 1:pos + 1 + size], "big"), pos + 1 + size


def _key(view: memoryview, pos: int, what: str) -> tuple[str, int]:
    """A map key: a str of at most MAX_KEY_BYTES bytes (keys of the header, body and graph maps)."""
    kind = view[pos] if pos < len(view) else None
    if kind is not None and 0xA0 <= kind <= 0xBF:
        size, pos = kind & 0x1F, pos + 1
    elif kind in _STR_SIZES:
        width = _STR_SIZES[kind]
        size, pos = int.from_bytes(view[pos + 1:pos + 1 + width], "big"), pos + 1 + width
    else:
        fail(f"the {what} has a key that is not a string" if kind is not None else
             f"not a graphc plan file, or a truncated one: the {what} ends early")
    if size > MAX_KEY_BYTES or pos + size > len(view):
        fail(f"the {what} has a key of {size} bytes (at most {MAX_KEY_BYTES}), or ends early")
    try:
        return str(view[pos:pos + size], "utf-8"), pos + size
    except UnicodeDecodeError:
        fail(f"the {what} has a key that is not UTF-8 text")


def span(view: memoryview, pos: int, max_objects: int, what: str) -> int:
    """Where the msgpack object at ``pos`` ends, reading only type bytes and sizes (a bin's
    bytes are jumped over, never copied). More than ``max_objects`` objects (keys count), an
    ext type or the unused byte 0xc1 is refused."""
    budget, pending = max_objects, 1
    while pending:
        pending -= 1
        max_objects -= 1
        if max_objects < 0:
            fail(f"{what} is over the format's size limit for it (more than {budget} msgpack objects; "
                 f"see docs/format.md)")
        if pos >= len(view):
            fail(f"not a graphc plan file, or a truncated one: {what} ends early")
        kind = view[pos]
        pos += 1
        if kind <= 0x7F or kind >= 0xE0:  # positive and negative fixint
            continue
        if kind <= 0x8F:  # fixmap
            pending += 2 * (kind & 0x0F)
        elif kind <= 0x9F:  # fixarray
            pending += kind & 0x0F
        elif kind <= 0xBF:  # fixstr
            pos += kind & 0x1F
        elif kind in _FIXED:
            pos += _FIXED[kind]
        elif kind in _SIZED:
            width = _SIZED[kind]
            pos += width + int.from_bytes(view[pos:pos + width], "big")
        elif kind in _ARRAY_HEADERS or kind in _MAP_HEADERS:
            width = _ARRAY_HEADERS.get(kind) or _MAP_HEADERS[kind]
            count = int.from_bytes(view[pos:pos + width], "big")
            pos += width
            pending += count if kind in _ARRAY_HEADERS else 2 * count
        else:
            fail(f"{what} holds an ext type or an invalid byte (0x{kind:02x})")
    if pos > len(view):
        fail(f"not a graphc plan file, or a truncated one: {what} ends early")
    return pos
