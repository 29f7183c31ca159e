"""``nextafter``: the next representable float after ``input`` toward ``other`` (C's
nextafter; a primitive because no composite reaches the float's bits). Its gradient is
PyTorch's: the cotangent passes to ``input`` unchanged (the step is below any derivative's
resolution), nothing reaches ``other``."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import OpDef, register
from ..types import TensorType
from ._shapes import broadcast, result_dtype


def _nextafter(in_types, attrs):
    out = TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))
    if not out.dtype.is_float:
        raise ShapeError(f"nextafter takes floating-point tensors (as PyTorch), got "
                         f"{in_types[0].dtype.name} and {in_types[1].dtype.name}")
    return [out]


def _vjp_nextafter(b, node, cts, needs):
    return [cts[0] if needs[0] else None, None]


register(OpDef("nextafter", _nextafter, inputs=(2, 2), promotes_inputs=True, vjp=_vjp_nextafter,
               doc="the next float after input toward other, elementwise with broadcasting"))
