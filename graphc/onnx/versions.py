"""Which version of its op an ONNX node is, and which versions graphc reads.

A model imports one opset per domain; a node's op is then the version of that op whose
``since_version`` is the newest at or below the model's opset (onnx's own schema history,
``onnx.defs``): in an opset-28 model ``Relu`` is Relu-14, the same op as in opset 14. Readers
get it as ``r.version`` and read each version's own attributes and inputs (Softmax before 13
coerces to 2-D, Squeeze before 13 takes ``axes`` as an attribute, ...). A version whose
semantics a reader does not implement is refused by name here (:data:`REFUSED`) or by the
reader; every other version of an op with a reader is read.
"""
from __future__ import annotations

from ..ir.errors import show

DEFAULT_DOMAINS = ("", "ai.onnx")
ML_DOMAIN = "ai.onnx.ml"
TRAINING_DOMAIN = "ai.onnx.preview.training"
READ_DOMAINS = DEFAULT_DOMAINS + (ML_DOMAIN, TRAINING_DOMAIN)

# (op key, since_version) -> why graphc does not read that version of the op
REFUSED = {
    ("GRU", 1): "GRU-1 (the misspelled 'foward' default direction, no linear_before_reset)",
    ("Upsample", 1): "Upsample-1 (height_scale/width_scale attributes, an experimental op)",
}


def reader_key(domain: str, op_type: str) -> str:
    """The readers' table key: the op type for the default domain, ``domain:op`` for others."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}:{op_type}"


def domain_opsets(model) -> dict:
    """Domain -> the opset the model imports for it (the default domain under ``""``)."""
    opsets = {}
    for entry in model.opset_import:
        opsets["" if entry.domain in DEFAULT_DOMAINS else entry.domain] = int(entry.version)
    return opsets


def op_version(onnx, op_type: str, domain: str, opset: int) -> int | None:
    """The since_version of ``op_type`` in ``domain`` at ``opset`` (None: no such op there)."""
    try:
        return int(onnx.defs.get_schema(op_type, opset, "" if domain in DEFAULT_DOMAINS else domain).since_version)
    except onnx.defs.SchemaError:
        return None


def check_version(onnx, node, opsets: dict) -> int:
    """The node's op version, or a ValueError saying why it cannot be read (an op missing from
    the model's opset, a domain the model does not import, a version graphc refuses)."""
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    opset = opsets.get(domain)
    label = show(node.op_type) + ("" if not domain else f" of domain {show(domain)}")
    if opset is None:
        raise ValueError(f"op {label}: the model imports no opset of its domain")
    version = op_version(onnx, node.op_type, domain, opset)
    if version is None:
        raise ValueError(f"op {label} is not in opset {opset} of its domain (onnx {onnx.__version__} has no "
                         "definition of it there)")
    why = REFUSED.get((reader_key(domain, node.op_type), version))
    if why:
        raise ValueError(f"{why} is not imported by graphc (opset {opset} gives {node.op_type}-{version})")
    return version
