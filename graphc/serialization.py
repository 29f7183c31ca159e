"""``gc.save(state_dict, path)`` and the non-plan half of ``gc.load``: state dicts as
``.safetensors`` files (the ``safetensors`` package, an optional extra). graphc never
pickles and never unpickles: ``torch.save`` files are refused with the way to convert them.

``gc.load`` tells the formats apart by their first bytes (:func:`sniff`), not by the name:
a plan is a msgpack map holding the magic ``graphc-plan``; a safetensors file starts with its
header's length (8 bytes, little-endian) and then ``{``; a pickle starts ``0x80``, protocol;
``torch.save``'s default is a zip archive holding ``data.pkl``.
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Mapping

import numpy as np

from .ir.errors import GraphcError

EXTRA = "pip install 'graphc[safetensors]'"
PLAN_MAGIC = b"graphc-plan"
# The tags of ModelProto fields that follow ir_version (field 1, tag 0x08) in a serialized model:
# producer_name, producer_version, domain, model_version, doc_string, graph, opset_import.
ONNX_SECOND_FIELDS = {0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42}
SNIFF_BYTES = 512  # enough for the plan's magic and a zip's first member name
MAX_HEADER = 100_000_000  # the safetensors library's own limit on the JSON header
# Dtypes a safetensors file may hold that numpy has no type for: say so before the library does.
NO_NUMPY_DTYPE = {"BF16": "bfloat16", "F8_E4M3": "float8", "F8_E5M2": "float8", "F8_E8M0": "float8",
                  "F4": "float4", "F6_E2M3": "float6", "F6_E3M2": "float6", "C32": "complex32"}
CONVERT = ("convert it where PyTorch is installed: `from safetensors.torch import save_file; "
           "save_file(torch.load(path, weights_only=True), 'model.safetensors')` (for a state dict), then "
           "gc.load('model.safetensors')")


def _safetensors():
    try:
        import safetensors.numpy as st
    except ImportError:
        raise GraphcError(f".safetensors files need the optional 'safetensors' package: {EXTRA}") from None
    return st


# ---- saving -----------------------------------------------------------------------------------
def save(obj, path) -> None:
    """Write a state dict (names to tensors or arrays, e.g. ``model.state_dict()``) as a
    safetensors file, whatever the file's name. Nested checkpoints, modules and other Python
    objects are refused: the format holds named arrays only, and graphc never pickles.
    Plans are saved with ``plan.save(path)``.

    >>> import os, tempfile, graphc as gc
    >>> from graphc import nn
    >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
    >>> model = nn.Linear(3, 2)
    >>> gc.save(model.state_dict(), path)
    >>> sorted(gc.load(path)), nn.Linear(3, 2).load_state_dict(gc.load(path))
    (['bias', 'weight'], IncompatibleKeys(missing_keys=[], unexpected_keys=[]))
    """
    if not isinstance(path, (str, os.PathLike)):
        raise GraphcError(f"gc.save writes to a file path (str or os.PathLike), got {type(path).__name__}")
    data = _safetensors().save(_arrays(obj))
    try:
        _write_atomically(os.fspath(path), data)
    except OSError as e:
        raise GraphcError(f"cannot write {os.fspath(path)}: {e.strerror or e}") from None


def _arrays(obj) -> dict:
    """The state dict's entries as contiguous numpy arrays on the host."""
    from .executor import Plan
    from .nn.module import Module
    from .tensor import Tensor

    if isinstance(obj, Module):
        raise GraphcError("gc.save writes state dicts: save model.state_dict() (graphc never pickles whole modules)")
    if isinstance(obj, Plan):
        raise GraphcError("gc.save writes state dicts; save a compiled plan with plan.save(path)")
    if not isinstance(obj, Mapping):
        raise GraphcError(f"gc.save writes a dict of name -> tensor (a state dict), got {type(obj).__name__}")
    arrays = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise GraphcError(f"gc.save: state dict keys must be strings, got {key!r}")
        if isinstance(value, Tensor):
            value = value.numpy()  # from the GPU too
        elif hasattr(value, "__cuda_array_interface__"):
            from .executor.backends import backend_of

            value = backend_of(value).to_numpy(value)
        if not isinstance(value, (np.ndarray, np.generic)) or value.dtype.kind not in "biuf":
            raise GraphcError(f"gc.save: {key!r} is a {type(value).__name__}, not a tensor or numeric array; a "
                              "safetensors file holds named arrays only (save nested checkpoints as one file per "
                              "state dict)")
        arrays[key] = np.require(value, requirements="C")  # ascontiguousarray would make 0-d into 1-d
    return arrays


def _write_atomically(path: str, data: bytes) -> None:
    """Write next to ``path`` and rename over it, so a crash never leaves half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".graphc-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---- loading ----------------------------------------------------------------------------------
def sniff(path) -> str | None:
    """What a file is by its first bytes: ``"plan"``, ``"safetensors"``, ``"onnx"``, ``"pickle"``,
    ``"torch-zip"``, ``"zip"``, or None (unknown, or unreadable: the plan loader then reports it).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.pt")
    >>> _ = open(path, "wb").write(b"\\x80\\x04\\x95 rest of a pickle")
    >>> sniff(path)
    'pickle'
    """
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, TypeError):
        return None
    msgpack_map = bool(head) and (0x80 <= head[0] <= 0x8F or head[0] in (0xDE, 0xDF))  # fixmap, map16, map32
    if msgpack_map and PLAN_MAGIC in head[:64]:
        return "plan"
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if len(head) >= 3 and head[0] == 0x08 and head[1] < 0x40 and head[2] in ONNX_SECOND_FIELDS:
        return "onnx"  # a ModelProto: ir_version first, then another of its fields
    if head[:4] == b"PK\x03\x04":
        return "torch-zip" if b"data.pkl" in head or b".pkl" in head else "zip"
    return None


def refuse(path, kind: str):
    """The error for a file graphc will not read (a pickle or another zip archive)."""
    where = os.fspath(path)
    if kind in ("pickle", "torch-zip"):
        raise GraphcError(f"{where} is a pickle (torch.save's format); graphc never loads pickles, since unpickling "
                          f"can run arbitrary code: {CONVERT}")
    raise GraphcError(f"{where} is a zip archive, not a graphc plan or a safetensors file (an .npz file opens with "
                      "np.load(path, allow_pickle=False))")


def load_safetensors(path) -> dict:
    """The named arrays of a safetensors file, as writable numpy arrays on the host."""
    where = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    _check_header(where, data)
    try:
        arrays = _safetensors().load(data)
    except GraphcError:
        raise
    except Exception as e:  # the library's SafetensorError and friends: the file is damaged
        raise GraphcError(f"{where} is not a valid safetensors file: {e}") from None
    return {name: np.array(a) if not a.flags.writeable else a for name, a in arrays.items()}


def _check_header(where: str, data: bytes) -> None:
    """Refuse a truncated header and dtypes numpy cannot hold, with messages that say so."""
    size = struct.unpack("<Q", data[:8])[0]
    if size > min(MAX_HEADER, len(data) - 8):
        raise GraphcError(f"{where} is not a valid safetensors file: its header claims {size} bytes, but the file "
                          f"has {len(data) - 8} after the length (truncated?)")
    try:
        header = json.loads(data[8:8 + size])
    except (ValueError, UnicodeDecodeError) as e:
        raise GraphcError(f"{where} is not a valid safetensors file: its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise GraphcError(f"{where} is not a valid safetensors file: its header is not a JSON object")
    for name, entry in header.items():
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if dtype in NO_NUMPY_DTYPE:
            raise GraphcError(f"{where}: tensor {name!r} is {NO_NUMPY_DTYPE[dtype]} ({dtype}), which numpy and graphc "
                              "cannot hold; convert it to float32 before saving "
                              "(save_file({k: v.float() for k, v in state_dict.items()}, path))")
