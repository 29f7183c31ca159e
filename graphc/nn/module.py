"""``nn.Module`` and containers, with PyTorch's registration rules and state_dict layout."""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from ..ir.errors import GraphcError, ShapeError, TraceError
from ..core.tensor import Tensor
from ..core.source import user_source

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Parameter(Tensor):
    """A trainable tensor of a Module (always eager). ``p.data`` is a Tensor sharing its array,
    as in PyTorch, so ``p.data.normal_(0, 0.01)`` initialises it in place; ``p.array`` is
    the array itself.

    >>> import numpy as np
    >>> from graphc import nn
    >>> p = nn.Parameter(np.zeros(3, np.float32))
    >>> p.shape, p.data.fill_(1.0) is not p, p.numpy().tolist()
    ((3,), True, [1.0, 1.0, 1.0])
    """

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = np.empty(0, np.float32)  # PyTorch's Parameter() is an empty float tensor
        array = data.array if isinstance(data, Tensor) else np.asarray(data)
        if array.dtype == np.float64 and not isinstance(data, (np.ndarray, Tensor)):
            array = array.astype(np.float32)
        super().__init__(np.require(array, requirements="C"))  # ascontiguousarray makes 0-d into 1-d
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of every layer and model; subclasses define ``forward``.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> Net()(gc.ones(3, 4)).shape
    (3, 2)
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_gc_tracer", None)  # set only while a tracer calls this module
        # Where the user built this module: ops recorded inside it point here.
        object.__setattr__(self, "_gc_source", user_source())

    # ---- registration ------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise GraphcError(f"call super().__init__() in {type(self).__name__}.__init__ before assigning {name!r}")
        if isinstance(value, Tensor) and value._tracer is not None and (name in self._buffers or
                                                                        name in self._parameters):
            self._assign_traced_state(name, value)
        elif isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.add_module(name, value)
        elif name in self._buffers:
            self._buffers[name] = value if value is None or isinstance(value, Tensor) else Tensor(np.asarray(value))
        elif name in self._parameters or name in self._modules:
            if value is not None:
                raise GraphcError(f"cannot assign {type(value).__name__} to {name!r}: it is a parameter or "
                                  "submodule (use nn.Parameter / an nn.Module, or None)")
            (self._parameters if name in self._parameters else self._modules)[name] = None
        else:
            object.__setattr__(self, name, value)

    def _assign_traced_state(self, name: str, value: Tensor) -> None:
        """``self.buf = <traced value>`` in a traced forward: the plan's update of that buffer,
        as PyTorch's rebinding is (the module keeps its own array). ``self.w += x`` (an in-place
        write, then this assignment of the same tensor) changes nothing more."""
        table = self._buffers if name in self._buffers else self._parameters
        current, tracer = table[name], value._tracer
        target = tracer.state_name(current) if current is not None else None
        if target is not None and tracer.state_name(value) == target:
            return
        if target is None or table is self._parameters:
            raise TraceError(f"{type(self).__name__}.{name} = <traced value>: only a buffer of the traced model can be "
                             "assigned inside it (change a parameter in place: p.copy_(...) under gc.no_grad())",
                             tracer.user_location())
        tracer.assign(current, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                value = entries[name]
                tracer = self.__dict__.get("_gc_tracer")
                if tracer is not None and table != "_modules" and value is not None:
                    return tracer.symbolic(value)  # inside a traced call, state reads are graph values
                return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise GraphcError(f"cannot assign {type(param).__name__} as parameter {name!r} (use nn.Parameter)")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        if tensor is not None and not isinstance(tensor, Tensor):
            tensor = Tensor(np.asarray(tensor))
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module) -> None:
        if module is not None and not isinstance(module, Module):
            raise GraphcError(f"{type(module).__name__} is not a Module (submodule {name!r})")
        self.__dict__.pop(name, None)
        self._modules[name] = module

    # ---- calling ----------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise GraphcError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        tracer = next((a._tracer for a in (*args, *kwargs.values())
                       if isinstance(a, Tensor) and a._tracer is not None), None)
        # A submodule of the model being traced is traced even when called on constants only
        # (a position embedding of arange(T)): its parameters must stay graph state, never
        # frozen into constants by an eager call.
        tracer = tracer or self.__dict__.get("_gc_tracer")
        if tracer is None:
            return self.forward(*args, **kwargs)
        outer = self.__dict__.get("_gc_tracer")
        object.__setattr__(self, "_gc_tracer", tracer)
        tracer.scope.append(self)
        try:
            return self.forward(*args, **kwargs)
        finally:
            tracer.scope.pop()
            object.__setattr__(self, "_gc_tracer", outer)

    # ---- walking ------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """``(dotted name, module)`` for this module ("" or ``prefix``) and every submodule, depth
        first in registration order, as PyTorch; a module reached twice is listed once unless
        ``remove_duplicate=False``. ``memo`` is a set of modules already listed.

        >>> from graphc import nn
        >>> [name for name, _ in nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU())).named_modules()]
        ['', '0', '1', '1.0']
        """
        memo = set() if memo is None else memo
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def _named_members(self, table: str, recurse: bool):
        seen = set()
        modules = self.named_modules() if recurse else [("", self)]
        for prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{prefix}.{name}" if prefix else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        for name, p in self._named_members("_parameters", recurse):
            yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self, recurse: bool = True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``optimizer.zero_grad()`` for this module's ones)."""
        from ..optim.optimizer import zero_grads

        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True):
        """Freeze (False) or unfreeze every parameter: frozen ones get no ``.grad`` and no update.

        >>> from graphc import nn
        >>> layer = nn.Linear(2, 2).requires_grad_(False)
        >>> [p.requires_grad for p in layer.parameters()]
        [False, False]
        """
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        for name, b in self._named_members("_buffers", recurse):
            yield (f"{prefix}.{name}" if prefix else name), b

    def buffers(self, recurse: bool = True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- state --------------------------------------------------------------------
    def state_dict_tensors(self, prefix: str = "") -> "OrderedDict[str, Tensor]":
        """PyTorch's state_dict order (each module's params, then buffers, then children)."""
        out = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b
        for name, child in self._modules.items():
            if child is not None:
                out.update(child.state_dict_tensors(prefix + name + "."))
        return out

    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Parameters and persistent buffers as numpy arrays (sharing storage, like PyTorch)."""
        return OrderedDict((k, t.array) for k, t in self.state_dict_tensors().items())

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy arrays in (a PyTorch state_dict converted with ``.numpy()`` loads unchanged)."""
        own = self.state_dict_tensors()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise GraphcError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for key, tensor in own.items():
            if key not in state_dict:
                continue
            src = state_dict[key]
            src = src if isinstance(src, Tensor) else Tensor(src if hasattr(src, "shape") else np.asarray(src))
            if tuple(src.shape) != tuple(tensor.array.shape):
                raise ShapeError(f"load_state_dict: {key} has shape {tuple(src.shape)}, "
                                 f"the model expects {tuple(tensor.array.shape)}")
            # In place, so compiled plans that share this storage see the new values; inside a
            # compiled step, a state update reading the source's current values (a target
            # network's ``target.load_state_dict(model.state_dict())``)
            tensor.data.copy_(src)
        return IncompatibleKeys(missing, unexpected)

    def train(self, mode: bool = True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, **kwargs):
        """Move every parameter and buffer to a device ("cpu", "cuda", "cuda:N", a ``gc.device``)
        and/or cast the floating-point ones to a dtype, in place: the same Parameter objects (so
        optimizers keep working) now hold the new arrays. PyTorch's forms: ``to(device)``,
        ``to(dtype)``, ``to(device, dtype)``, ``to(device=..., dtype=...)``, ``to(tensor)``
        (its device and dtype); ``non_blocking`` is accepted and means nothing here.

        >>> import graphc as gc
        >>> from graphc import nn
        >>> m = nn.Linear(2, 2).to("cpu", gc.float64)
        >>> m.weight.dtype, m.to(device="cpu", dtype=gc.float32).weight.dtype, m.to(gc.zeros(1)).weight.device
        (<DType.float64: 'f64'>, <DType.float32: 'f32'>, device(type='cpu'))
        """
        from ..core.device import parse_to
        from ..executor.backends import backend_of, get_backend

        unknown = set(kwargs) - {"device", "dtype", "non_blocking", "memory_format"}
        if unknown:
            raise GraphcError(f"Module.to() got unexpected keyword arguments {sorted(unknown)}")
        device, dtype, _ = parse_to([a for a in args if a is not None], kwargs)
        if dtype is not None and not dtype.is_float:
            raise GraphcError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype.name}")
        tensors = self.state_dict_tensors().values()
        if device is not None:
            backend = get_backend(device)
            for t in tensors:
                source = backend_of(t.array)
                if source is not backend:
                    t.array = backend.asarray(source.to_numpy(t.array))
        if dtype is not None:
            for t in tensors:
                if t.array.dtype.kind == "f":
                    t.array = t.array.astype(dtype.numpy)
        return self

    def double(self):
        from ..ir.types import DType

        return self.to(DType.float64)

    def float(self):
        from ..ir.types import DType

        return self.to(DType.float32)

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first, depth first) and then on this module,
        as PyTorch does (typically to initialise weights); returns this module.

        >>> from graphc import nn
        >>> seen = []
        >>> _ = nn.Sequential(nn.Linear(2, 2), nn.ReLU()).apply(lambda m: seen.append(type(m).__name__))
        >>> seen
        ['Linear', 'ReLU', 'Sequential']
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ")" if not lines else head + "\n  " + "\n  ".join(lines) + "\n)"
