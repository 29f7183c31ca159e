"""``.item()`` of a traced tensor: a traced Python number.

Inside a compiled step a tensor has no value yet, so ``value.item()`` gives a
:class:`TracedFloat` or, for an integer tensor, a :class:`TracedInt`, holding a 0-d graph
value instead of a number. Neither subclasses ``float``/``int``: Python, numpy and ``math``
read such a subclass's own value directly (a placeholder), where these refuse instead.
``float(t)`` and ``int(t)`` must return real numbers, so on a traced tensor they are a
TraceError: use ``t.item()`` or keep a tensor. Arithmetic with Python numbers, with other traced
numbers and with tensors records graph ops, with Python's own result types (``int / int``
is a float, anything with a float is a float) and, next to a tensor, a Python number's weak
dtype (``f32_tensor * x.item()`` stays float32), so actor-critic code such as
``advantage = R - value.item()`` compiles. Like a Python number it carries no gradient.
A comparison gives a traced boolean, which an ``if`` may branch on (both sides are traced).
A Python number passed to a compiled function is a traced number with an example value:
where Python needs a real number (``range(n)``, a shape, an attr such as dropout's ``p``),
it gives that value and pins the plan to it (``graph.meta["guards"]``; another value
traces again, see ``Plan.respecialize``).
Where Python needs the real number (formatting it, indexing a list, ``range(n)``, a dict
key), a :class:`~graphc.TraceError` names the line; numpy ufuncs on one raise numpy's
TypeError (``__array_ufunc__ = None``): use graphc's ops on tensors.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import TraceError
from ..ir.types import DType


def traced_number(tensor, kind: type, example=None, sources: tuple = ()):
    """``tensor`` (one element, traced) as a traced Python ``float`` or ``int`` (a bool stays a
    0-d tensor: Python's bool cannot be subclassed, and ``if`` on it branches as well).
    ``example``: its value in the example inputs when it is one of them (``sources``: the
    inputs it comes from), which a use needing a real int specialises the plan on."""
    value = tensor.detach().reshape(()) if tensor.ndim else tensor.detach()
    if kind is bool:
        return value.bool() if value.dtype is not DType.bool else value
    dtype = DType.float64 if kind is float else DType.int64
    value = value.cast(dtype) if value.dtype is not dtype else value
    number = TracedFloat(value) if kind is float else TracedInt(value)
    number.example, number.sources = example, tuple(sources)
    return number


def _wrap(tensor, example=None, sources=()):
    if tensor.dtype is DType.bool:
        return tensor  # a comparison: a traced boolean
    number = TracedFloat(tensor) if tensor.dtype.is_float else TracedInt(tensor)
    number.example, number.sources = example, tuple(sources)
    return number


def _example(name: str, a, b):
    """The example value of ``a <op> b`` when both are known (Python's own arithmetic)."""
    left = a.example if isinstance(a, _Traced) else a
    right = b.example if isinstance(b, _Traced) else b
    if left is None or right is None:
        return None
    try:
        return getattr(left, name)(right)
    except (ArithmeticError, TypeError, ValueError):
        return None


def _operand(x):
    """A number's tensor (traced numbers) or the number; None for anything else."""
    if isinstance(x, (TracedFloat, TracedInt)):
        return x.tensor
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    return None


def _as_float(x):
    return x.cast(DType.float64) if hasattr(x, "cast") and not x.dtype.is_float else (
        float(x) if isinstance(x, int) else x)


def _binary(name: str, true_division: bool = False):
    def method(self, other):
        from .tensor import Tensor

        if isinstance(other, Tensor):  # next to a tensor: a Python number's weak dtype
            return getattr(self.weak_for(other), name)(other)
        operand = _operand(other)
        if operand is None:
            return NotImplemented
        mine = self.tensor
        if true_division or isinstance(self, TracedFloat) or isinstance(other, (float, np.floating, TracedFloat)):
            mine, operand = _as_float(mine), _as_float(operand)  # Python's result types: floats are float64
        result = _mod(mine, operand, name) if "mod" in name else getattr(mine, name)(operand)
        if result.dtype is DType.bool:
            return result
        return _wrap(result, _example(name, self, other), self.sources + getattr(other, "sources", ()))
    method.__name__ = name
    return method


def _mod(mine, operand, name: str):
    """Python's ``%`` (the sign of the divisor), from floor division."""
    a, b = (mine, operand) if name == "__mod__" else (operand, mine)
    return a - (a // b) * b


def _unary(name: str):
    def method(self):
        example = None if self.example is None else getattr(self.example, name)()
        return _wrap(getattr(self.tensor, name)(), example, self.sources)
    method.__name__ = name
    return method


def _static(what: str, kind=int):
    """A use that needs a real number (a shape, an index, a count of loop trips, an attr): the
    example's value, on which the plan is specialised (graph.meta["guards"]); else a TraceError."""
    fail = _needs_value(what)

    def method(self, *args):
        if self.example is None or not self.sources:
            return fail(self, *args)
        self.tensor._tracer.guard(self.sources)
        return kind(self.example)
    method.__name__ = what
    return method


def _needs_value(what: str):
    def method(self, *args):
        origin = (f"the plan input {', '.join(self.sources)} (a Python number passed to the compiled function)"
                  if self.sources else "from .item() of a tensor inside a compiled function")
        raise TraceError(f"{what} needs a real number, but this one is {origin}, which has no value while tracing; "
                         "compute with it as a number (it becomes graph ops), or return it and use its value "
                         "outside", self.where)
    method.__name__ = what
    return method


class _Traced:
    """What TracedFloat and TracedInt share; ``tensor`` is the 0-d graph value."""

    __array_ufunc__ = None  # numpy defers to our reflected operators, and its ufuncs refuse one

    @property
    def _tracer(self):  # dispatch finds the trace through it, as through a Tensor
        return self.tensor._tracer

    @property
    def where(self):
        return self.tensor._tracer.user_location()

    def weak_for(self, other):
        """This number as a tensor next to ``other``, with the dtype a Python number takes."""
        from .scalars import weak_dtype

        dtype = weak_dtype(1.0 if isinstance(self, TracedFloat) else 1, [other.dtype])
        return self.tensor.cast(dtype) if self.tensor.dtype is not dtype else self.tensor

    def __bool__(self):
        return bool(self.tensor != 0)  # a branch on it: both sides are traced

    __format__ = _needs_value("formatting it (an f-string, format(), '%' or print)")
    __str__ = _needs_value("str()")
    __repr__ = _needs_value("repr()")
    __hash__ = _needs_value("hashing it (a dict key or a set member)")
    example = None  # its value in the example inputs, when known (see traced_number)
    sources: tuple = ()


for _name in ("add", "sub", "mul", "floordiv", "mod", "pow"):
    setattr(_Traced, f"__{_name}__", _binary(f"__{_name}__"))
    setattr(_Traced, f"__r{_name}__", _binary(f"__r{_name}__"))
_Traced.__truediv__ = _binary("__truediv__", true_division=True)
_Traced.__rtruediv__ = _binary("__rtruediv__", true_division=True)
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(_Traced, f"__{_name}__", _binary(f"__{_name}__"))
_Traced.__neg__ = _unary("__neg__")
_Traced.__abs__ = _unary("__abs__")
_Traced.__pos__ = lambda self: self


class TracedFloat(_Traced):
    """A traced Python float (see the module doc)."""

    def __init__(self, tensor):
        self.tensor = tensor

    __float__ = _static("float()", float)
    __int__ = _static("int()")

    def __round__(self, ndigits=None):
        if ndigits is not None:
            return _needs_value("round(x, ndigits)")(self)
        return TracedInt(self.tensor.round().cast(DType.int64))

    def __floor__(self):
        return TracedInt(self.tensor.floor().cast(DType.int64))

    def __ceil__(self):
        return TracedInt(self.tensor.ceil().cast(DType.int64))

    def __trunc__(self):
        return TracedInt(self.tensor.trunc().cast(DType.int64))


class TracedInt(_Traced):
    """A traced Python int (see the module doc). Not an ``int`` subclass: Python's C code reads
    an int subclass's value directly (``list[i]``, ``range(n)``), which would be a silent
    placeholder; this one refuses every such use with a TraceError instead."""

    def __init__(self, tensor):
        self.tensor = tensor

    __int__ = _static("int()")
    __float__ = _static("float()", float)
    __index__ = _static("using it as an index or a count (list[i], range(n))")
