"""Kernel factories shared by the numpy and cupy backends.

Every entry is ``factory(xp, spec) -> run`` where ``xp`` is the array module and ``spec``
a :class:`KernelSpec` with the node's attrs and its input/output types at one concrete
batch size. The factory does all per-node work once (axes, strides, index arrays) so that
``run(*arrays)`` does only the arithmetic; it returns one array, or a tuple for
multi-output ops. Backends build their tables from :data:`TABLE` keyed by op name.
"""
from __future__ import annotations

from typing import NamedTuple

from ...ir.registry import REGISTRY
from ...ir.types import DType
from . import attention, collective, control, conv, custom, elementwise, fused, linalg, loss, norm, pool, reduce, shape
from . import recurrent_cell
from . import conv_transpose
from . import scatter
from . import elementwise_math
from . import special
from . import linalg_lapack
from . import sort
from . import cumulative
from . import float_steps
from . import fft
from . import bitwise
from . import fused_elementwise
from .base import as_kernel, writes_out


class KernelSpec(NamedTuple):
    attrs: dict
    in_types: tuple  # concrete TensorTypes
    out_types: tuple
    rng: object = None  # the plan's numpy Generator, for ops with effects="random"


def _cast_inputs_to_output(factory):
    """For ops whose shape rule promotes mixed dtypes (int64 @ f32 -> f32): numpy would widen
    to float64, so inputs are cast to the output dtype first."""
    def make(xp, spec):
        want = spec.out_types[0].dtype
        flags = tuple(t.dtype is not want for t in spec.in_types)
        if not any(flags):
            return factory(xp, spec)
        run = as_kernel(factory(xp, spec._replace(in_types=tuple(t.with_dtype(want) for t in spec.in_types))))
        dtype = want.numpy
        if run.writes_out:
            return writes_out(lambda *arrays, out=None: run(*(a.astype(dtype) if f else a
                                                              for a, f in zip(arrays, flags)), out=out))
        return lambda *arrays: run(*(a.astype(dtype) if f else a for a, f in zip(arrays, flags)))
    return make


def _computes_in_float32(factory):
    """For ops that sum many terms (``OpDef.accumulates``): low-precision float inputs are cast
    to float32, the float32 kernel runs, and its float outputs are rounded back once."""
    def make(xp, spec):
        low = [t.dtype.is_low_precision for t in spec.in_types]
        if not any(low):
            return factory(xp, spec)
        wide = spec._replace(in_types=tuple(t.with_dtype(DType.float32) if f else t for t, f in zip(spec.in_types, low)),
                             out_types=tuple(t.with_dtype(DType.float32) if t.dtype.is_low_precision else t
                                             for t in spec.out_types))
        run = as_kernel(factory(xp, wide)).run
        wanted = [t.dtype.numpy for t in spec.out_types]
        f32 = DType.float32.numpy

        def computed(*arrays):
            result = run(*(a.astype(f32) if f else a for a, f in zip(arrays, low)))
            if len(wanted) == 1:
                return result.astype(wanted[0], copy=False)
            return tuple(r.astype(w, copy=False) for r, w in zip(result, wanted))
        return computed
    return make


TABLE = {}
for _module in (elementwise, linalg, conv, pool, norm, reduce, shape, fused, attention, loss, collective, custom,
                control, recurrent_cell):
    TABLE.update(_module.KERNELS)
TABLE.update(conv_transpose.KERNELS)
TABLE.update(scatter.KERNELS)
TABLE.update(elementwise_math.KERNELS)
TABLE.update(special.KERNELS)
TABLE.update(linalg_lapack.KERNELS)
TABLE.update(sort.KERNELS)
TABLE.update(cumulative.KERNELS)
TABLE.update(float_steps.KERNELS)
TABLE.update(fft.KERNELS)
TABLE.update(bitwise.KERNELS)
TABLE.update(fused_elementwise.KERNELS)
for _name, _opdef in REGISTRY.items():
    if _opdef.promotes_inputs:  # a fact of the op, declared in its OpDef
        TABLE[_name] = _cast_inputs_to_output(TABLE[_name])
    if _opdef.accumulates:  # (applied last: it sees the node's own dtypes)
        TABLE[_name] = _computes_in_float32(TABLE[_name])

__all__ = ["KernelSpec", "TABLE"]
