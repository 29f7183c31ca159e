"""``SymInt``: the symbolic batch size as a Python int while tracing, and the helpers that turn
shape arguments (which may hold it) into attr data."""
from __future__ import annotations

from ..ir.types import dim_mul


class SymInt(int):
    """An int that remembers it is the symbolic batch size (its example value while tracing).

    Passing it to ``reshape``/``view`` keeps the batch dim symbolic; multiplying it by an
    int keeps it symbolic too (``x.shape[0] * 4``). Any other use as a number (``/``,
    ``range(n)``, comparisons, ``int(n)``) bakes the example value into the graph: the
    tracer then marks the plan as valid for that batch size only, so running another batch
    size raises ``ShapeError`` instead of computing a silently wrong result.
    """

    def __new__(cls, value: int, sym: str, tracer=None):
        obj = super().__new__(cls, value)
        obj.sym = sym
        obj.tracer = tracer
        return obj

    def __mul__(self, other):
        if isinstance(other, int) and not isinstance(other, (SymInt, bool)):
            return SymInt(int.__int__(self) * other, dim_mul(self.sym, other), self.tracer)
        return self._concrete() * other

    __rmul__ = __mul__

    def _concrete(self) -> int:
        if self.tracer is not None:
            self.tracer.fix_size(self.sym)
        return int.__int__(self)

    def __repr__(self) -> str:
        return f"{int.__int__(self)} ({self.sym})"


def _baking(name):
    def method(self, *args):
        return getattr(int, name)(self._concrete(), *args)
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__truediv__", "__rtruediv__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__index__", "__int__",
              "__float__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__divmod__"):
    setattr(SymInt, _name, _baking(_name))
SymInt.__hash__ = int.__hash__


def dims_attr(dims) -> list:
    """Shape arguments as attr data: SymInts become their symbol."""
    return [d.sym if isinstance(d, SymInt) else int(d) for d in dims]


def shape_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)
