"""``graphc.Tensor``: eager when it holds an array, symbolic while tracing (holds a Value).

Every method funnels through :func:`graphc.core.dispatch.apply`, so the same code builds the
graph when traced and computes when eager. This file holds what a tensor *is* (shape,
dtype, device, conversions, operators); reductions, shape methods and in-place methods are
declared in graphc/ops/ (reductions.py, shaping.py, functions.py, functions_nn.py) and in
graphc/core/inplace.py; graphc.ops.surface installs them.
"""
from __future__ import annotations

import numpy as np

from .dispatch import apply
from ..ir.errors import GraphcError, TraceError
from ..ir.types import DType
from .symint import SymInt


class Tensor:
    """A tensor. ``gc.tensor(np_array)`` makes an eager one.

    >>> import numpy as np, graphc as gc
    >>> t = gc.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> (t * 2 + 1).sum(dim=1).numpy()
    array([ 9., 27.], dtype=float32)
    """

    __array_ufunc__ = None  # make numpy defer: np_array + tensor calls Tensor.__radd__
    __hash__ = object.__hash__
    requires_grad = False  # nn.Parameter sets its own; results of recorded eager ops too
    _grad = None  # the gradient backward() accumulated into this leaf (an eager Tensor)
    _origin = None  # the eager Parameter/buffer a traced stand-in (model.fc.weight while tracing) reads
    _grad_fn = None  # (autograd.TapeEntry, output index) for a recorded eager result
    _version = 0  # bumped by in-place writes: backward refuses values changed after recording

    def __init__(self, data=None, *sizes, _value=None, _tracer=None):
        if sizes or type(data) in (int, list, tuple):  # PyTorch's torch.Tensor(2, 3) and torch.Tensor([1, 2])
            from .legacy import legacy_array
            data = legacy_array("float32", (data, *sizes))
        self.array = data  # the numpy (or cupy) array of an eager tensor; None while traced
        self._value = _value
        self._tracer = _tracer

    @property
    def data(self) -> "Tensor":
        """A Tensor sharing this tensor's array, outside gradient recording (PyTorch's
        ``.data``): in-place methods on it change this tensor (``p.grad.data.zero_()``). Of a
        traced tensor, itself. Assigning rebinds this tensor to the new array (``t.array`` is
        the array itself).

        >>> import graphc as gc
        >>> t = gc.zeros(2)
        >>> t.data.fill_(1.0) is not t, t.numpy().tolist()
        (True, [1.0, 1.0])
        """
        return self if self._tracer is not None else Tensor(self.array)

    @data.setter
    def data(self, value):
        from .inplace import rebind_data

        rebind_data(self, value)

    # ---- what it is -------------------------------------------------------------
    @property
    def is_symbolic(self) -> bool:
        return self._tracer is not None

    @property
    def shape(self) -> tuple:
        if self._tracer is None:
            return tuple(self.array.shape)
        return self._tracer.example_shape(self._value.type)

    @property
    def dims(self) -> tuple:
        """The shape with symbolic dims as their symbols (``("N", 10)``): for graphc's own
        shape checks, which must not turn the batch size into a plain number."""
        return self._value.type.shape if self._tracer is not None else tuple(self.array.shape)

    @property
    def dtype(self) -> DType:
        return self._value.type.dtype if self._tracer is not None else DType.from_any(self.array.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        """The number of dims (``ndim``)."""
        return self.ndim

    def size(self, dim=None):
        """The shape, or one dim's size (``x.size(-1)``); the batch dim stays symbolic when traced.

        >>> import graphc as gc
        >>> x = gc.zeros(2, 3)
        >>> x.size(), x.size(-1), x.dim(), x.numel()
        ((2, 3), 3, 2, 6)
        """
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        """The number of elements (a traced batch dim counts at its example size)."""
        return int(np.prod(self.shape, dtype=np.int64))

    nelement = numel

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
    def device(self):
        """A ``gc.device``: ``device(type='cpu')`` or ``device(type='cuda', index=N)``."""
        from .device import device
        from ..executor.backends import backend_of

        return device("cpu" if self._tracer is not None else backend_of(self.array).name)

    @property
    def is_cuda(self) -> bool:
        """Whether the tensor is on a CUDA device (``t.device.type == "cuda"``), as PyTorch's."""
        return self.device.type == "cuda"

    # ---- leaving graphc ---------------------------------------------------------
    def _concrete(self, what: str):
        if self._tracer is not None:
            raise TraceError(f"{what} needs a concrete value, but this tensor is being traced "
                             "(data-dependent Python control flow cannot be compiled; use gc.where "
                             "or keep the decision outside the model)", self._tracer.user_location())
        return self.array

    def numpy(self) -> np.ndarray:
        from ..executor.backends import backend_of

        data = self._concrete("Tensor.numpy()")
        return backend_of(data).to_numpy(data)

    def item(self):
        if self._tracer is not None:  # inside a compiled function: a traced Python number
            return self._traced_number("Tensor.item()", None)
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
        if self._tracer is not None:  # a branch on a traced value: both sides are traced and joined
            return self._tracer.decide(self, "using a tensor as a Python bool (if/while/and/or)")
        return bool(self._concrete("using a tensor as a Python bool (if/while/and/or)"))

    def __float__(self):
        if self._tracer is not None:
            raise TraceError("float(tensor) inside a compiled function would have to be a real Python float, which a "
                             "traced tensor does not have yet; use tensor.item() (a traced number that takes part in "
                             "arithmetic) or keep computing with the tensor", self._tracer.user_location())
        return float(self._concrete("float(tensor)"))

    def __int__(self):
        if self._tracer is not None:
            raise TraceError("int(tensor) inside a compiled function would have to be a real Python int, which a traced "
                             "tensor does not have yet; use tensor.item() (a traced number that takes part in "
                             "arithmetic) or keep computing with the tensor", self._tracer.user_location())
        return int(self._concrete("int(tensor)"))

    def _traced_number(self, what: str, kind):
        """A traced Python number (graphc/core/traced_scalars.py) of a one-element traced tensor."""
        from .traced_scalars import traced_number

        if any(not isinstance(d, int) or isinstance(d, SymInt) or d != 1 for d in self.shape):
            raise TraceError(f"{what} needs a one-element tensor, got shape {tuple(self.dims)}", self._tracer.user_location())
        if kind is None:
            kind = float if self.dtype.is_float else bool if self.dtype is DType.bool else int
        return traced_number(self, kind)

    def __index__(self):
        return int(self._concrete("using a tensor as an index"))

    def to(self, *args, **kwargs) -> "Tensor":
        """PyTorch's forms: ``t.to(gc.float64)``, ``t.to("cuda")``, ``t.to(gc.device("cpu"),
        gc.float32)``, ``t.to(device=..., dtype=...)``, ``t.to(other)`` (its device and dtype).
        Returns ``t`` itself when nothing changes; ``copy=True`` always copies.

        >>> import graphc as gc
        >>> gc.zeros(2).to("cpu", gc.float64).dtype
        <DType.float64: 'f64'>
        """
        from .device import parse_to

        target, dtype, copy = parse_to(args, kwargs)
        out = self if dtype is None else self.cast(dtype)
        if target is not None and self._tracer is None:
            from ..executor.backends import backend_of, get_backend

            backend, source = get_backend(target), backend_of(self.array)
            if backend is not source:
                out = Tensor(backend.asarray(source.to_numpy(out.array)))
        return out.clone() if copy and out is self else out

    def type_as(self, other: "Tensor") -> "Tensor":
        """Cast to ``other``'s dtype."""
        return self.cast(other.dtype)

    # ---- autograd -----------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Add the gradient of this tensor into ``.grad`` of every leaf that requires grad
        (parameters). Eagerly it runs the recorded ops' vjp rules at once; inside a function
        being compiled it makes the gradients graph values of the plan.

        >>> import graphc as gc
        >>> from graphc import nn
        >>> layer = nn.Linear(3, 1)
        >>> layer(gc.ones(2, 3)).sum().backward()
        >>> layer.bias.grad.numpy().tolist()
        [2.0]
        """
        from .tracer import EAGER

        return (self._tracer or EAGER).backward(self, gradient, retain_graph, create_graph, inputs)

    @property
    def grad(self):
        """The gradient ``backward()`` accumulated into this leaf (an eager Tensor on its device,
        or a graph value inside a function being compiled); None until then. A parameter read
        through its module while tracing (``model.fc.weight``) shows the parameter's own."""
        return self._origin.grad if self._origin is not None else self._grad

    @grad.setter
    def grad(self, value):
        if self._origin is not None:
            self._origin.grad = value
        else:
            if value is None:  # inside a compiled step: its gradient starts afresh (core/step_trace.py)
                from .tracer import note_gradient_reset
                note_gradient_reset(self)
            self._grad = value

    @property
    def is_leaf(self) -> bool:
        """True for tensors not computed by a recorded op (parameters, inputs)."""
        return self._grad_fn is None

    @property
    def grad_fn(self):
        """The recorded op that computed this tensor (its ``.op`` names it), or None for a leaf."""
        return None if self._grad_fn is None else self._grad_fn[0]

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Make this leaf record its gradient (``.grad``) from now on; returns it.

        >>> import graphc as gc
        >>> gc.zeros(2).requires_grad_().requires_grad
        True
        """
        if self._grad_fn is not None and not requires_grad:
            raise GraphcError("requires_grad_(False) on a computed tensor: use .detach() to cut it from the graph")
        if requires_grad and not (self.dtype.is_float or self.dtype.is_complex):
            raise GraphcError(f"only floating-point and complex tensors can require gradients, got {self.dtype.name}")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self) -> "Tensor":
        """The same values, cut from gradient recording (shares the array eagerly)."""
        if self._tracer is not None:
            return apply("stop_gradient", [self])
        return Tensor(self.array)

    def contiguous(self, memory_format=None) -> "Tensor":
        """Itself when its array is C-contiguous (or traced), else a copy, as PyTorch's: an
        in-place write to ``x.T.contiguous()`` must not reach ``x``.

        >>> import graphc as gc
        >>> x = gc.zeros(2, 3)
        >>> x.contiguous() is x, x.T.contiguous().numpy().flags.c_contiguous
        (True, True)
        """
        if self._tracer is not None or self.array.flags.c_contiguous:
            return self
        return self.clone()

    def clone(self, memory_format=None) -> "Tensor":
        """A copy; gradients flow through it as in PyTorch."""
        from .grad_mode import is_grad_enabled

        if self._tracer is not None:  # a new value: an in-place write to either side leaves the other
            return apply("cast", [self], {"dtype": self.dtype.name})
        if self.requires_grad and is_grad_enabled():
            return apply("mul", [self, 1])  # a recorded copy (x * 1 is x exactly, -0.0 and NaN too)
        return Tensor(self.array.copy())

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None) -> "Tensor":
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def __repr__(self) -> str:
        if self._tracer is not None:
            return f"Tensor(symbolic %{self._value.name}:{self._value.type})"
        body = np.array2string(self.numpy(), separator=", ", precision=4, prefix="Tensor(")
        device = str(self.device)
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
    def __pow__(self, o): return self.pow(o)  # graphc/ops/functions.py: refuses int ** negative int, as PyTorch
    def __floordiv__(self, o): return apply("div", [self, o], {"rounding_mode": "floor"})
    def __rfloordiv__(self, o): return apply("div", [o, self], {"rounding_mode": "floor"})
    def __rpow__(self, o): return apply("pow", [o, self])
    def __matmul__(self, o): return apply("matmul", [self, o])
    def __rmatmul__(self, o): return apply("matmul", [o, self])
    # x += y: in place, as PyTorch (inside a trace: graphc/core/inplace.py's rules); an eager value
    # in a recorded computation gets a new tensor instead, so its gradient stays right.
    def __iadd__(self, o): return self._in_place("add_", "add", o)
    def __isub__(self, o): return self._in_place("sub_", "sub", o)
    def __imul__(self, o): return self._in_place("mul_", "mul", o)
    def __itruediv__(self, o): return self._in_place("div_", "div", o)
    def __ifloordiv__(self, o): return self._in_place("floor_divide_", "floor_divide", o)
    def __ipow__(self, o): return self._in_place("pow_", "pow", o)

    def _in_place(self, method: str, op: str, other):
        from .grad_mode import is_grad_enabled

        recording = self.requires_grad and is_grad_enabled()
        if recording and (self._origin is not None or self._tracer is None and self.is_leaf):
            raise GraphcError(f"a leaf tensor that requires grad is used in an in-place operation ({op}); as in "
                              "PyTorch, update parameters inside `with gc.no_grad():` or through p.data")
        if self._tracer is not None or not recording:
            return getattr(self, method)(other)
        return getattr(self, op)(other)

    def __neg__(self): return apply("neg", [self])
    def __abs__(self): return apply("complex_abs" if self.dtype.is_complex else "abs", [self])
    def __eq__(self, o): return apply("eq", [self, o])
    def __ne__(self, o): return apply("ne", [self, o])
    def __lt__(self, o): return apply("lt", [self, o])
    def __le__(self, o): return apply("le", [self, o])
    def __gt__(self, o): return apply("gt", [self, o])
    def __ge__(self, o): return apply("ge", [self, o])
    def __invert__(self): return apply("bitwise_not", [self])  # logical not of bools, as PyTorch

    # exp, log, relu, clamp, eq, sum, max, reshape, split, normal_, ... are declared once in
    # graphc/ops/ (functions.py, reductions.py, shaping.py) and core/inplace.py (graphc.ops.surface installs them).

    def cast(self, dtype) -> "Tensor":
        dtype = DType.from_any(dtype)
        return self if dtype is self.dtype else apply("cast", [self], {"dtype": dtype.name})

    def float(self, memory_format=None): return self.cast(DType.float32)
    def double(self, memory_format=None): return self.cast(DType.float64)
    def half(self, memory_format=None): return self.cast(DType.float16)
    def long(self, memory_format=None): return self.cast(DType.int64)
    def byte(self, memory_format=None): return self.cast(DType.uint8)
    def bool(self, memory_format=None): return self.cast(DType.bool)

    @property
    def T(self):
        """All dims reversed (the transpose of a matrix)."""
        return self.permute(list(reversed(range(self.ndim))))

    @property
    def mT(self):
        """The last two dims swapped (a batch of matrices, transposed)."""
        return self.transpose(-2, -1)

    def __getitem__(self, index):
        from .indexing import getitem

        return getitem(self, index)

    def __setitem__(self, index, value):
        from .inplace import setitem

        setitem(self, index, value)
