"""One entry point for every op on Tensors: record it while tracing, run it eagerly otherwise.

Eager execution runs the very kernel the executor runs (the backend table entry), after
the OpDef's shape rule has checked the inputs.
"""
from __future__ import annotations

from ..executor.backends import NUMPY, backend_of
from ..executor.run_node import run_node
from ..ir.errors import DeviceError, GraphcError
from ..ir.registry import get_op, infer_types
from ..ir.types import DType, TensorType
from . import tape
from .scalars import scalar_array, weak_dtype
from .. import random as _random
from .tracer import current_tracer


def apply(op: str, args: list, attrs: dict | None = None):
    """Apply ``op`` to Tensors / Python scalars; returns a Tensor or a tuple of Tensors."""
    from .tensor import Tensor

    # (a traced Python number, .item() in a trace, has a _tracer too)
    tracer = None
    for a in args:
        t = getattr(a, "_tracer", None)
        if t is None or t is tracer:
            continue
        if tracer is not None:  # a body's value with one from outside: the body (innermost) records, capturing
            current = current_tracer()
            if any(getattr(b, "_tracer", None) is current for b in args):
                tracer = current
            break
        tracer = t
    if tracer is None:  # a model's parameter or buffer read inside a step being traced is a graph value
        current = current_tracer()
        if current is not None and (any(isinstance(a, Tensor) and current.state_name(a) for a in args)
                                    or _symbolic(attrs)):
            tracer = current  # (a shape naming a traced dim: gc.ones(1, 4).expand(x.shape[0], 4))
    if tracer is not None:
        return tracer.record(op, args, attrs or {})
    return _run_eager(op, args, attrs or {})


def _symbolic(attrs) -> bool:
    """Whether an attr holds a symbolic dim (a shape read off a traced tensor)."""
    return bool(attrs) and any(isinstance(v, (list, tuple)) and any(isinstance(d, str) for d in v)
                               for v in attrs.values())


def eager_backend(tensors):
    """The backend all eager inputs live on (mixing devices is an error, as in PyTorch)."""
    backends = {backend_of(t.array).name: backend_of(t.array) for t in tensors}
    if len(backends) > 1:
        raise DeviceError(f"tensors on different devices in one op: {sorted(backends)}; move them with .to()")
    return next(iter(backends.values()), NUMPY)


def _run_eager(op, args, attrs):
    from .tensor import Tensor

    opdef = get_op(op)
    attrs = opdef.normalize_attrs(attrs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    backend = eager_backend(tensors)
    tensor_dtypes = [DType.from_any(a.array.dtype) for a in tensors]
    arrays = []
    for a in args:
        if isinstance(a, Tensor):
            arrays.append(a.array)
        else:
            arrays.append(backend.asarray(scalar_array(a, weak_dtype(a, tensor_dtypes))))
    in_types = [TensorType(a.shape, DType.from_any(a.dtype)) for a in arrays]
    try:
        out_types = infer_types(opdef, in_types, attrs)
    except GraphcError as e:
        from .source import user_source

        raise e.located(f"at {user_source()}") from None
    results = run_node(op, arrays, attrs, backend, _random.generator(), out_types)
    outs = []
    for r, t in zip(results, out_types):
        r = backend.xp.asarray(r)
        if r.dtype != t.dtype.numpy or r.shape != t.shape:
            raise GraphcError(f"kernel {op!r} returned {r.dtype}{list(r.shape)}, expected {t}")
        outs.append(Tensor(r))
    if tape.needs_recording(tensors):  # for loss.backward(): the same vjp rules as compiled plans
        tape.record(op, attrs, [a if isinstance(a, Tensor) else Tensor(x) for a, x in zip(args, arrays)], outs)
    return outs[0] if len(outs) == 1 else tuple(outs)
