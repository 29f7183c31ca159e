"""``gc.save(state_dict, path)`` and the non-plan half of ``gc.load``: state dicts as
``.safetensors`` files (the ``safetensors`` package, an optional extra). graphc never
pickles and never unpickles: ``torch.save`` files are refused with the way to convert them.

``gc.load`` tells the formats apart by their first bytes (:func:`sniff`), not by the name:
a plan is a msgpack map; a safetensors file starts with its header's length (8 bytes,
little-endian) and then ``{``. Every other file (a pickle, ``torch.save``'s zip of pickles, an
``.npz``, text, unknown bytes) is a ``PlanFormatError`` saying what it looks like
(``file_kinds``); so is a damaged safetensors file.
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Mapping

import numpy as np

from .file_kinds import kind_of, read_ends, refusal
from .ir.errors import GraphcError, PlanFormatError

LOADABLE = ("plan", "safetensors", "onnx")  # what gc.load reads; file_kinds names the rest

EXTRA = "pip install 'graphc[safetensors]'"
MAX_HEADER = 100_000_000  # the safetensors library's own limit on the JSON header
# Dtypes a safetensors file may hold that numpy has no type for: say so before the library does.
NO_NUMPY_DTYPE = {"BF16": "bfloat16", "F8_E4M3": "float8", "F8_E5M2": "float8", "F8_E8M0": "float8",
                  "F4": "float4", "F6_E2M3": "float6", "F6_E3M2": "float6", "C32": "complex32"}


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
    from .core.tensor import Tensor

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
    """What ``gc.load`` should do with a file, by its first bytes (``file_kinds.kind_of``):
    ``"plan"``, ``"safetensors"``, ``"onnx"``, or None for a file named ``*.onnx`` that is empty,
    text or bytes in no known format (the ONNX importer then says what is wrong). Any other file is
    refused here with a PlanFormatError saying what it looks like (a pickle, a zip, text...)
    and what graphc reads; so is a path that cannot be read.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.graphc")
    >>> _ = open(path, "wb").write(b"\\x80\\x04\\x95 rest of a pickle")
    >>> sniff(path)
    Traceback (most recent call last):
    graphc.ir.errors.PlanFormatError: ...x.graphc is a pickle (torch.save's legacy format, or pickle.dump); ...
    """
    head, last = read_ends(path)
    kind = kind_of(head, last)
    if kind in LOADABLE:
        return kind
    if kind in ("text", "binary", "empty") and os.fsdecode(path).lower().endswith(".onnx"):
        return None
    raise refusal(path, kind, head)


def load_safetensors(path) -> dict:
    """The named arrays of a safetensors file, as writable numpy arrays on the host."""
    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PlanFormatError(f"cannot read {where}: {e.strerror or e}") from e
    _check_header(where, data)
    try:
        arrays = _safetensors().load(data)
    except GraphcError:
        raise
    except Exception as e:  # the library's SafetensorError and friends: the file is damaged
        raise PlanFormatError(f"{where} is not a valid safetensors file: {e}") from None
    return {name: np.array(a) if not a.flags.writeable else a for name, a in arrays.items()}


def _check_header(where: str, data: bytes) -> None:
    """Refuse a truncated header and dtypes numpy cannot hold, with messages that say so."""
    size = struct.unpack("<Q", data[:8])[0]
    if size > min(MAX_HEADER, len(data) - 8):
        raise PlanFormatError(f"{where} is not a valid safetensors file: its header claims {size} bytes, but the "
                              f"file has {len(data) - 8} after the length (truncated?)")
    try:
        header = json.loads(data[8:8 + size])
    except (ValueError, UnicodeDecodeError) as e:
        raise PlanFormatError(f"{where} is not a valid safetensors file: its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise PlanFormatError(f"{where} is not a valid safetensors file: its header is not a JSON object")
    for name, entry in header.items():
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if dtype in NO_NUMPY_DTYPE:
            raise PlanFormatError(f"{where}: tensor {name!r} is {NO_NUMPY_DTYPE[dtype]} ({dtype}), which numpy and "
                                  "graphc cannot hold; convert it to float32 before saving "
                                  "(save_file({k: v.float() for k, v in state_dict.items()}, path))")
