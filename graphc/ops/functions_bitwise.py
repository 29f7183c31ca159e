"""The bitwise functions, declared once for ``Tensor.x``, ``gc.x`` (the primitives of
ir/ops/bitwise.py) and the operators ``& | ^ << >>`` with their reflected and in-place forms, as
PyTorch has them (``~`` is ``Tensor.__invert__``: bitwise not, logical not of bools).

>>> import graphc as gc
>>> a = gc.tensor([12, 10], dtype=gc.int32)
>>> (a & 6).tolist(), (a | 1).tolist(), (a ^ a).tolist(), (~a).tolist(), (a << 2).tolist(), (a >> 1).tolist()
([4, 2], [13, 11], [0, 0], [-13, -11], [48, 40], [6, 5])
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..core.inplace import _arithmetic
from .creation_more import _METHOD_AND_TOP, _METHOD_ONLY
from .surface import torchsymbol


def _binary(op: str, doc: str):
    def fn(input, other):
        return apply(op, [input, other])
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return torchsymbol(**_METHOD_AND_TOP)(fn)


bitwise_and = _binary("bitwise_and", "Elementwise and of the bits of integers (logical and of bools).")
bitwise_or = _binary("bitwise_or", "Elementwise or of the bits of integers (logical or of bools).")
bitwise_xor = _binary("bitwise_xor", "Elementwise xor of the bits of integers (logical xor of bools).")
bitwise_left_shift = _binary("bitwise_left_shift", "``input << other`` elementwise, for integers.")
bitwise_right_shift = _binary("bitwise_right_shift", "``input >> other`` elementwise (arithmetic for signed types).")


@torchsymbol(**_METHOD_AND_TOP)
def bitwise_not(input):
    """Elementwise not of the bits of integers (``~x``; logical not of bools).

    >>> import graphc as gc
    >>> gc.bitwise_not(gc.tensor([0, 5])).tolist()
    [-1, -6]
    """
    return apply("bitwise_not", [input])


def _operator(name: str, op: str, reflected: bool):
    def method(self, other):
        return apply(op, [other, self] if reflected else [self, other])
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{'other' if reflected else 'self'} {_SYMBOLS[op]} {'self' if reflected else 'other'}``."
    return torchsymbol(**_METHOD_ONLY)(method)


def _augmented(name: str, op: str):
    """``x &= y``: in place, as PyTorch (Tensor._in_place's rules, as ``+=``)."""
    def method(self, other):
        return self._in_place(f"{op}_", op, other)
    method.__name__ = method.__qualname__ = name
    return torchsymbol(**_METHOD_ONLY)(method)


_SYMBOLS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "bitwise_left_shift": "<<",
            "bitwise_right_shift": ">>"}
for _dunder, _op in (("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                     ("lshift", "bitwise_left_shift"), ("rshift", "bitwise_right_shift")):
    _operator(f"__{_dunder}__", _op, False)
    _operator(f"__r{_dunder}__", _op, True)
    _augmented(f"__i{_dunder}__", _op)
    _arithmetic(_op, lambda x, other, _o=_op: apply(_o, [x, other]))
_arithmetic("bitwise_not", lambda x: apply("bitwise_not", [x]))
