"""Test helper: edit the body of a saved plan file and re-pack it with a valid checksum, so a
test reaches the loader's checks behind the checksum (hostile but well-formed files)."""
from __future__ import annotations

import hashlib

import msgpack

ALIGN = 64  # the data section starts at the first multiple of 64 after the header (docs/format.md)


def rewrite_body(path, edit) -> None:
    """``edit(body)`` changes the decoded body map in place; the file is rewritten with its data
    section (format 1.3) unchanged, re-aligned after the new header."""
    data = path.read_bytes()
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(data))
    unpacker.feed(data)
    outer = unpacker.unpack()
    section = data[-(-unpacker.tell() // ALIGN) * ALIGN:] if "data" in outer else b""
    body = msgpack.unpackb(outer["body"], raw=False)
    edit(body)
    outer["body"] = msgpack.packb(body, use_bin_type=True)
    outer["checksum"] = "sha256:" + hashlib.sha256(outer["body"]).hexdigest()
    header = msgpack.packb(outer, use_bin_type=True)
    padding = b"\0" * (-len(header) % ALIGN) if section else b""
    path.write_bytes(header + padding + section)
