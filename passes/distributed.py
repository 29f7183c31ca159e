"""Gradient averaging for data-parallel training: the gradients become the outputs of a few
``allreduce`` nodes (mean over the processes), bucketed into messages of about
``bucket_bytes`` each. Buckets run from the last parameter to the first, as PyTorch's
DistributedDataParallel orders them (the output layers' gradients are ready first), one dtype
per bucket; the order is a pure function of the graph, so every process sends the same messages.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.builder import Builder
from ..ir.graph import Value

PASS_META = {"pass": "average_gradients", "phase": "backward"}


def _bytes(value: Value) -> int:
    return math.prod(value.type.shape) * np.dtype(value.type.dtype.numpy).itemsize


def buckets(named: list, bucket_bytes: int) -> list:
    """``[(param, grad Value)]`` split into lists of at most ``bucket_bytes`` (a bigger gradient
    gets a bucket of its own), in reverse order, one dtype per bucket."""
    out, current, size = [], [], 0
    for param, grad in reversed(named):
        if current and (size + _bytes(grad) > bucket_bytes or grad.type.dtype is not current[0][1].type.dtype):
            out.append(current)
            current, size = [], 0
        current.append((param, grad))
        size += _bytes(grad)
    return out + ([current] if current else [])


def average_gradients(builder: Builder, named: list, bucket_bytes: int) -> dict:
    """Emit the allreduce nodes; returns ``{param: averaged gradient Value}``."""
    averaged = {}
    for bucket in buckets([(p, g) for p, g in named if g is not None], bucket_bytes):
        outputs = builder.emit("allreduce", [g for _, g in bucket], {"op": "mean"}, meta=PASS_META)
        averaged.update({param: out for (param, _), out in zip(bucket, outputs)})
    return averaged


def allreduced_bytes(graph) -> int:
    """Bytes one step of ``graph`` sends through allreduce (each process, each direction)."""
    return sum(_bytes(v) for node in graph.nodes if node.op == "allreduce" for v in node.inputs)
