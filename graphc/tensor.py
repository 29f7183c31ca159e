"""``graphc.Tensor``: eager when it holds an array, symbolic while tracing (holds a Value).

Every method funnels through :func:`graphc.dispatch.apply`, so the same code builds the
graph when traced and computes when eager.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .dispatch import apply
from .ir.errors import GraphcError, TraceError
from .ir.types import DType, dim_poly

MaxResult = namedtuple("MaxResult", ["values", "indices"])


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
            coef, power = dim_poly(self.sym)
            from .ir.types import poly_dim
            return SymInt(int.__int__(self) * other, poly_dim(coef * other, power), self.tracer)
        return self._concrete() * other

    __rmul__ = __mul__

    def _concrete(self) -> int:
        if self.tracer is not None:
            self.tracer.fix_batch()
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


class Tensor:
    """A tensor. ``gc.tensor(np_array)`` makes an eager one.

    >>> import numpy as np, graphc as gc
    >>> t = gc.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> (t * 2 + 1).sum(dim=1).numpy()
    array([ 9., 27.], dtype=float32)
    """

    __array_ufunc__ = None  # make numpy defer: np_array + tensor calls Tensor.__radd__
    __hash__ = object.__hash__

    def __init__(self, data=None, *, _value=None, _tracer=None):
        self.data = data
        self._value = _value
        self._tracer = _tracer

    # ---- what it is -------------------------------------------------------------
    @property
    def is_symbolic(self) -> bool:
        return self._tracer is not None

    @property
    def shape(self) -> tuple:
        if self._tracer is None:
            return tuple(self.data.shape)
        return self._tracer.example_shape(self._value.type)

    @property
    def dims(self) -> tuple:
        """The shape with symbolic dims as their symbols (``("N", 10)``): for graphc's own
        shape checks, which must not turn the batch size into a plain number."""
        return self._value.type.shape if self._tracer is not None else tuple(self.data.shape)

    @property
    def dtype(self) -> DType:
        return self._value.type.dtype if self._tracer is not None else DType.from_any(self.data.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise GraphcError("len() of a 0-d tensor")
        first = self.shape[0]
        return first._concrete() if isinstance(first, SymInt) else first  # len() yields a plain int

    def __iter__(self):
        if not self.shape:
            raise GraphcError("iteration over a 0-d tensor")
        if self._tracer is not None and isinstance(self.shape[0], SymInt):
            raise TraceError("iterating over the batch dim of a traced tensor is data-size-dependent Python "
                             "control flow; use tensor ops over the whole batch", self._tracer.user_location())
        return (self[i] for i in range(self.shape[0]))

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        from .executor.backends import backend_of

        return "cpu" if self._tracer is not None else backend_of(self.data).name

    # ---- leaving graphc ---------------------------------------------------------
    def _concrete(self, what: str):
        if self._tracer is not None:
            raise TraceError(f"{what} needs a concrete value, but this tensor is being traced "
                             "(data-dependent Python control flow cannot be compiled; use gc.where "
                             "or keep the decision outside the model)", self._tracer.user_location())
        return self.data

    def numpy(self) -> np.ndarray:
        from .executor.backends import backend_of

        data = self._concrete("Tensor.numpy()")
        return backend_of(data).to_numpy(data)

    def item(self):
        data = self._concrete("Tensor.item()")
        if data.size != 1:
            raise GraphcError(f"item() needs a one-element tensor, got shape {data.shape}")
        return data.item()

    def tolist(self):
        self._concrete("Tensor.tolist()")
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        data = self.numpy() if self._tracer is None else self._concrete("converting to a numpy array")
        return data if dtype is None else data.astype(dtype)

    def __bool__(self):
        return bool(self._concrete("using a tensor as a Python bool (if/while/and/or)"))

    def __float__(self):
        return float(self._concrete("float(tensor)"))

    def __int__(self):
        return int(self._concrete("int(tensor)"))

    def __index__(self):
        return int(self._concrete("using a tensor as an index"))

    def to(self, target) -> "Tensor":
        """``t.to("cpu")``, ``t.to("cuda")`` or ``t.to(gc.float64)`` (a dtype casts)."""
        try:
            dtype = DType.from_any(target)
        except GraphcError:
            dtype = None
        if dtype is not None and not (isinstance(target, str) and target.startswith(("cpu", "cuda"))):
            return self.cast(dtype)
        from .executor.backends import backend_of, get_backend

        backend = get_backend(target)
        if self._tracer is not None or backend is backend_of(self.data):
            return self
        return Tensor(backend.asarray(backend_of(self.data).to_numpy(self.data)))

    def detach(self) -> "Tensor":
        return self

    def contiguous(self) -> "Tensor":
        return self

    def clone(self) -> "Tensor":
        return self if self._tracer is not None else Tensor(self.data.copy())

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def __repr__(self) -> str:
        if self._tracer is not None:
            return f"Tensor(symbolic %{self._value.name}:{self._value.type})"
        body = np.array2string(self.numpy(), separator=", ", precision=4, prefix="Tensor(")
        device = self.device
        return f"Tensor({body}, dtype={self.dtype.name}" + (f", device='{device}')" if device != "cpu" else ")")

    # ---- arithmetic ---------------------------------------------------------------
    def __add__(self, o): return apply("add", [self, o])
    def __radd__(self, o): return apply("add", [o, self])
    def __sub__(self, o): return apply("sub", [self, o])
    def __rsub__(self, o): return apply("sub", [o, self])
    def __mul__(self, o): return apply("mul", [self, o])
    def __rmul__(self, o): return apply("mul", [o, self])
    def __truediv__(self, o): return apply("div", [self, o])
    def __rtruediv__(self, o): return apply("div", [o, self])
    def __pow__(self, o): return apply("pow", [self, o])
    def __rpow__(self, o): return apply("pow", [o, self])
    def __matmul__(self, o): return apply("matmul", [self, o])
    def __rmatmul__(self, o): return apply("matmul", [o, self])
    def __neg__(self): return apply("neg", [self])
    def __abs__(self): return apply("abs", [self])
    def __eq__(self, o): return apply("eq", [self, o])
    def __ne__(self, o): return apply("ne", [self, o])
    def __lt__(self, o): return apply("lt", [self, o])
    def __le__(self, o): return apply("le", [self, o])
    def __gt__(self, o): return apply("gt", [self, o])
    def __ge__(self, o): return apply("ge", [self, o])
    def __invert__(self): return apply("logical_not", [self])

    # exp, log, relu, sigmoid, clamp, eq, flatten, ... are declared once in graphc/functions.py
    # (graphc.surface installs them here and as gc.x and F.x).
    def softmax(self, dim): return apply("softmax", [self], {"dim": dim})
    def log_softmax(self, dim): return apply("log_softmax", [self], {"dim": dim})

    def cast(self, dtype) -> "Tensor":
        dtype = DType.from_any(dtype)
        return self if dtype is self.dtype else apply("cast", [self], {"dtype": dtype.name})

    def float(self): return self.cast(DType.float32)
    def double(self): return self.cast(DType.float64)
    def long(self): return self.cast(DType.int64)
    def bool(self): return self.cast(DType.bool)

    # ---- reductions ---------------------------------------------------------------
    def sum(self, dim=None, keepdim=False):
        return apply("sum", [self], {"dims": _dims(dim), "keepdim": keepdim})

    def mean(self, dim=None, keepdim=False):
        return apply("mean", [self], {"dims": _dims(dim), "keepdim": keepdim})

    def max(self, dim=None, keepdim=False):
        """Like PyTorch: with ``dim`` returns ``(values, indices)``; without, the max element."""
        if isinstance(dim, Tensor):
            return apply("maximum", [self, dim])
        if dim is None:
            return apply("max", [self], {"dims": None, "keepdim": False})
        values = apply("max", [self], {"dims": (dim,), "keepdim": keepdim})
        return MaxResult(values, self.argmax(dim, keepdim))

    def min(self, dim=None, keepdim=False):
        """Like ``max`` (``(values, indices)`` with a dim), through ``-max(-x)``."""
        if isinstance(dim, Tensor):
            return apply("minimum", [self, dim])
        if dim is None:
            return -apply("max", [-self], {"dims": None, "keepdim": False})
        neg = -self
        values = -apply("max", [neg], {"dims": (dim,), "keepdim": keepdim})
        return MaxResult(values, neg.argmax(dim, keepdim))

    def amax(self, dim=None, keepdim=False):
        return apply("max", [self], {"dims": _dims(dim), "keepdim": keepdim})

    def argmax(self, dim=None, keepdim=False):
        return apply("argmax", [self], {"dim": dim, "keepdim": keepdim})

    # ---- shape ------------------------------------------------------------------
    def reshape(self, *shape):
        return apply("reshape", [self], {"shape": dims_attr(shape_args(shape))})

    view = reshape

    def permute(self, *dims):
        return apply("permute", [self], {"perm": list(shape_args(dims))})

    def transpose(self, dim0, dim1):
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(perm)

    @property
    def T(self):
        return self.permute(list(reversed(range(self.ndim))))

    def unsqueeze(self, dim):
        shape = list(self.shape)
        shape.insert(dim % (len(shape) + 1), 1)
        return self.reshape(shape)

    def squeeze(self, dim=None):
        shape = list(self.shape)
        if dim is None:
            keep = [d for d in shape if isinstance(d, SymInt) or d != 1]
        else:
            dim = dim % max(len(shape), 1)
            keep = shape[:dim] + shape[dim + 1:] if shape and not isinstance(shape[dim], SymInt) and shape[dim] == 1 \
                else shape
        return self.reshape(keep)

    def expand(self, *shape):
        return apply("broadcast_to", [self], {"shape": dims_attr(shape_args(shape))})

    def __getitem__(self, index):
        from .indexing import getitem

        return getitem(self, index)


def _dims(dim):
    if dim is None:
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)
