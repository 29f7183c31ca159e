"""Test helper: edit the body of a saved plan file and re-pack it with a valid checksum, so a
test reaches the loader's checks behind the checksum (hostile but well-formed files)."""
from __future__ import annotations

import hashlib

import msgpack


def rewrite_body(path, edit) -> None:
    """``edit(body)`` changes the decoded body map in place; the file is rewritten."""
    outer = msgpack.unpackb(path.read_bytes(), raw=False)
    body = msgpack.unpackb(outer["body"], raw=False)
    edit(body)
    outer["body"] = msgpack.packb(body, use_bin_type=True)
    outer["checksum"] = "sha256:" + hashlib.sha256(outer["body"]).hexdigest()
    path.write_bytes(msgpack.packb(outer, use_bin_type=True))
