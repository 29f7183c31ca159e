"""What a file is, by its first and last bytes, and the error for one that graphc will not read.

``gc.load`` reads three formats: plan files (``plan.save``, ``gc.export``), safetensors state
dicts (``gc.save``) and ONNX models. Everything else is refused before any loader sees it, with
a ``gc.PlanFormatError`` that says what the file looks like and what to do instead: a pickle
(``torch.save``, any protocol, or its zip archive) is never unpickled; an ``.npz`` or ``.npy``
opens with numpy; an empty file, text, or bytes in no known format are named as such. A path
that cannot be read at all (missing, a directory, no permission) is a PlanFormatError too,
``cannot read PATH: reason``, with the OSError as its ``__cause__``.
"""
from __future__ import annotations

import os
import re

from .ir.errors import GraphcError, PlanFormatError

SNIFF_BYTES = 512  # enough for a plan's first key, a zip's first member name, a pickle's first opcodes
READS = ("graphc reads plan files (plan.save, gc.export), safetensors state dicts (gc.save) and ONNX models "
         "(.onnx)")
CONVERT = ("convert it where PyTorch is installed: `from safetensors.torch import save_file; "
           "save_file(torch.load(path, weights_only=True), 'model.safetensors')` (for a state dict), then "
           "gc.load('model.safetensors')")
# The tags of ModelProto fields that follow ir_version (field 1, tag 0x08) in a serialized model:
# producer_name, producer_version, domain, model_version, doc_string, graph, opset_import.
ONNX_SECOND_FIELDS = {0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42}
MSGPACK_MAPS = {*range(0x81, 0x90), 0xDE, 0xDF}  # fixmap of 1 to 15 entries, map16, map32
MSGPACK_STR_KEYS = {*range(0xA0, 0xC0), 0xD9, 0xDA, 0xDB}  # fixstr, str8/16/32: a plan's keys
# Protocol 0 and 1 pickles have no header; they end with STOP (".") and start with one of these
# opcode sequences: MARK and a container, an empty container then a memo put or MARK, GLOBAL
# ("cmodule\nname\n", as __reduce__ writes), or a scalar (rare as a whole file, but cheap to say).
TEXT_PICKLE_START = re.compile(
    rb"\((?:d|l|t|\(|[IFLSVNKJMGXUTc])"
    rb"|[\]})](?:q|h|r|j|\(|\.|[IKJMGXUTNV])"
    rb"|c[\w.]+\n[\w.]+\n"
    rb"|[IL]-?\d+L?\n|F[-+\w.]+\n|[SV][^\n]*\n|[NK]")
OTHER_SIGNATURES = {  # formats people mistake for weights files, by their magic numbers
    b"\x93NUMPY": "npy",
    b"\x89HDF\r\n\x1a\n": "hdf5",
    b"\x1f\x8b": "gzip",
    b"PK\x05\x06": "zip",  # an empty zip archive
}
DESCRIPTIONS = {
    "pickle": ("a pickle (torch.save's legacy format, or pickle.dump)",
               "graphc never loads pickles, since unpickling can run arbitrary code; " + CONVERT),
    "torch-zip": ("a pickle in a zip archive (torch.save's format)",
                  "graphc never loads pickles, since unpickling can run arbitrary code; " + CONVERT),
    "npz": ("a numpy .npz archive",
            "Open it with np.load(path, allow_pickle=False) and pass the arrays to model.load_state_dict"),
    "npy": ("a numpy .npy array", "Open it with np.load(path, allow_pickle=False)"),
    "zip": ("a zip archive (neither torch.save's nor numpy's)", "Unpack it and load the file inside"),
    "hdf5": ("an HDF5 file (Keras or h5py)", "Export the weights as a safetensors file"),
    "gzip": ("gzip-compressed data", "Decompress it first"),
    "empty": ("an empty file (0 bytes)", "Was a copy or download interrupted? (plan.save and gc.save write "
                                         "atomically, so they never leave one)"),
    "text": ("text", "A plan or state dict is a binary file"),
    "binary": ("bytes in no format graphc knows", "Check that this is the file you meant"),
}


def kind_of(head: bytes, last: bytes) -> str:
    """The kind of a file whose first bytes are ``head`` (up to SNIFF_BYTES) and whose last byte
    is ``last``: ``"plan"`` (a msgpack map keyed by strings: the plan loader checks the rest),
    ``"safetensors"``, ``"onnx"``, or a kind graphc refuses (a key of DESCRIPTIONS).

    >>> kind_of(b"\\x80\\x04\\x95 rest of a pickle", b".")
    'pickle'
    >>> kind_of(b"(dp0\\nVa\\np1\\nI1\\ns.", b"."), kind_of(b"hello\\n", b"\\n"), kind_of(b"", b"")
    ('pickle', 'text', 'empty')
    """
    if not head:
        return "empty"
    if head[0] == 0x80 and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and head[2:3] not in (b"", b"\0"):
        return "pickle"  # PROTO 2..5 then an opcode (never 0); a safetensors length of 0x0280 has zeros there
    if head[0] in MSGPACK_MAPS and len(head) > 1 and head[1] in MSGPACK_STR_KEYS:
        return "plan"
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"  # an 8-byte little-endian header length, then the JSON header
    if len(head) >= 3 and head[0] == 0x08 and head[1] < 0x40 and head[2] in ONNX_SECOND_FIELDS:
        return "onnx"  # a ModelProto: ir_version first, then another of its fields
    if head[:4] == b"PK\x03\x04":
        return _zip_kind(head)
    for signature, kind in OTHER_SIGNATURES.items():
        if head.startswith(signature):
            return kind
    if last == b"." and TEXT_PICKLE_START.match(head):
        return "pickle"  # protocol 0 or 1
    return "text" if _is_text(head) else "binary"


def _zip_kind(head: bytes) -> str:
    """torch.save's archive holds ``<name>/data.pkl``; np.savez's members are ``.npy`` files."""
    size = int.from_bytes(head[26:28], "little")
    first = head[30:30 + size]
    if first.endswith(b".pkl") or b"data.pkl" in head:
        return "torch-zip"
    return "npz" if first.endswith(b".npy") else "zip"


def _is_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:  # a character cut at the end of the sniffed bytes is still text
        if e.start < len(head) - 3:
            return False
        text = head[:e.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\n\r\f" for c in text)


def read_ends(path) -> tuple[bytes, bytes]:
    """The file's first SNIFF_BYTES bytes and its last byte. A path that is not a str or
    os.PathLike is a GraphcError; one that cannot be read is a PlanFormatError naming it."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise GraphcError(f"gc.load reads a file path (str or os.PathLike), got {type(path).__name__}")
    where = os.fsdecode(path)
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
            if len(head) < SNIFF_BYTES:
                return head, head[-1:]
            f.seek(-1, os.SEEK_END)
            return head, f.read(1)
    except IsADirectoryError as e:
        raise PlanFormatError(f"cannot read {where}: it is a directory, not a file ({READS})") from e
    except OSError as e:
        raise PlanFormatError(f"cannot read {where}: {e.strerror or e}") from e


def refusal(path, kind: str, head: bytes = b"") -> PlanFormatError:
    """The error for a file of ``kind`` (a key of DESCRIPTIONS), which graphc will not read;
    bytes in no known format are quoted (their first 8, in hex) to help recognize them."""
    looks_like, advice = DESCRIPTIONS[kind]
    if kind == "binary" and head:
        looks_like += f" (it starts {head[:8].hex(' ')})"
    return PlanFormatError(f"{os.fsdecode(path)} is {looks_like}; {READS}. {advice}")
