"""``run_node``: the one way to run a single op on concrete arrays, with the very kernel a
compiled plan runs. Eager tensors, constant folding and the debugging tools (backend
comparison, non-finite search) all go through it, as torch.fx's ``Interpreter.run_node``.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.registry import get_op, infer_types
from ..ir.types import BATCH, DType, TensorType, binding_of
from .kernels import KernelSpec
from .kernels.base import as_kernel, keeps_declared_dtypes


def run_node(op: str, arrays: list, attrs: dict | None = None, backend=None, rng=None,
             out_types: list | None = None) -> list:
    """Run ``op`` on ``arrays``; return its outputs as a list.

    ``out_types`` means the caller has already checked the call (a graph node's normalized attrs
    and types bound to the batch size, or eager dispatch after the shape rule): the attrs and
    the shape rule are not checked twice. ``rng`` feeds random ops (dropout).

    >>> import numpy as np
    >>> run_node("add", [np.ones(2, np.float32), np.full(2, 2.0, np.float32)])
    [array([3., 3.], dtype=float32)]
    """
    from .backends import NUMPY

    backend = backend or NUMPY
    in_types = [TensorType(a.shape, DType.from_any(a.dtype)) for a in arrays]
    if out_types is None:
        opdef = get_op(op)
        attrs = opdef.normalize_attrs(attrs or {})
        out_types = infer_types(opdef, in_types, attrs)
    spec = KernelSpec(attrs or {}, tuple(in_types), tuple(out_types), rng)
    try:
        with np.errstate(all="ignore"):  # like PyTorch: log(0) is -inf, silently
            result = keeps_declared_dtypes(as_kernel(backend.kernels[op](spec)), spec)(*arrays)
    except GraphcError:
        raise
    except (ValueError, TypeError, ArithmeticError, IndexError, MemoryError) as e:  # as compiled plans do
        raise GraphcError(f"kernel {op!r} failed: {e}") from e
    return list(result) if len(out_types) > 1 else [result]


def run_graph_node(node, arrays: list, backend=None, rng=None, batch: int | None = None) -> list:
    """Run a graph node (its attrs, its output types bound to ``batch`` and to the sizes its
    inputs' shapes give their symbols)."""
    binding = binding_of([v.type.shape for v in node.inputs], [np.shape(a) for a in arrays])
    if batch is not None:
        binding.setdefault(BATCH, batch)
    out_types = [v.type.bind(binding) if not v.type.is_static else v.type for v in node.outputs]
    return run_node(node.op, arrays, node.attrs, backend, rng, out_types)
