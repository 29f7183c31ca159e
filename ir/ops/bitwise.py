"""Bitwise ops on integers and bools: ``bitwise_and/or/xor`` (PyTorch's ``& | ^``, ONNX's
Bitwise*), ``bitwise_not`` (``~``) and the shifts ``bitwise_left_shift`` / ``bitwise_right_shift``
(``<< >>``, ONNX's BitShift). Inputs promote as PyTorch's (weak Python ints keep the tensor's
type); floats are refused, as PyTorch refuses them, and so are bools for the shifts. Shifts by
the type's width or more give 0 (left) or the sign (right), as PyTorch's and numpy's. No
gradient: the values are integers."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, result_dtype


def _integer_dtype(name: str, in_types, bools: bool) -> DType:
    dtype = result_dtype(in_types)
    if dtype.is_float or dtype.is_complex or (dtype is DType.bool and not bools):
        got = " and ".join(t.dtype.name for t in in_types)
        kinds = "integer or bool" if bools else "integer"
        raise ShapeError(f"{name} takes {kinds} tensors (as PyTorch), got {got}")
    return dtype


def _binary(name: str, bools: bool = True):
    def rule(in_types, attrs):
        return [TensorType(broadcast(*(t.shape for t in in_types)), _integer_dtype(name, in_types, bools))]
    return rule


def _not(in_types, attrs):
    return [TensorType(in_types[0].shape, _integer_dtype("bitwise_not", in_types, True))]


for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    register(OpDef(_name, _binary(_name), inputs=(2, 2), promotes_inputs=True,
                   doc=f"elementwise {_name} of integers or bools, with broadcasting"))
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    register(OpDef(_name, _binary(_name, bools=False), inputs=(2, 2), promotes_inputs=True,
                   doc=f"elementwise {_name} of integers, with broadcasting (arithmetic for signed types)"))
register(OpDef("bitwise_not", _not, doc="elementwise bitwise not of integers; logical not of bools"))
