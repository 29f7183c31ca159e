"""In-place tensor methods (``normal_``, ``uniform_``, ``fill_``, ``zero_``, ``copy_``,
``add_``/``sub_``/``mul_``/``div_``/``clamp_``, ``t[i] = v`` and ``x += y``).

Eager, they write into the tensor's array, so a compiled plan that shares it (a model's
parameters) sees the new values: ``model.fc.weight.data.normal_(0, 0.01)`` after
``gc.compile`` changes what the plan computes.

While a function is traced they never touch an array; they become graph values instead
(PyTorch's functionalization):

- a write to a model's parameter or buffer (the tensor itself, its ``.data``, or the stand-in
  a module reads while traced) is a state update of the plan, and later reads in the same
  trace see it: the manual SGD step ``p.data.add_(-lr * p.grad)`` compiles;
- a write to another traced tensor (not an input of the traced function) rebinds that Tensor to the new value, unless a view
  shares it (``y = x.view(-1); y.add_(1)`` must change ``x`` too, which a rebound value
  cannot do): that is a ``TraceError``;
- a write of a traced value into an eager tensor made outside the trace is a ``TraceError``
  (the plan could never change it).
"""
from __future__ import annotations

import numpy as np

from .grad_mode import is_grad_enabled
from .dispatch import apply
from ..executor.backends import backend_of
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..random import generator
from ..ops.surface import torchsymbol
from .indexing import as_tuple, index_put
from .tensor import Tensor
from .tracer import current_tracer

_METHOD_ONLY = dict(top=False, functional=False)


# ---- eager writes -------------------------------------------------------------------------
def _eager(tensor: Tensor, what: str) -> None:
    if tensor._grad_fn is not None and is_grad_enabled():
        from .source import user_source

        raise GraphcError(f"{what} on a tensor computed with gradients recorded: its gradient would go wrong; write "
                          "x = x.op(...) instead (or change it inside gc.no_grad())", f"at {user_source()}")


def _on_backend(tensor: Tensor, value):
    """``value`` (a Tensor, array or scalar) as an array on ``tensor``'s device."""
    value = value.array if isinstance(value, Tensor) else value
    if not isinstance(value, (np.ndarray, np.generic)) and not hasattr(value, "__cuda_array_interface__"):
        return value  # Python scalars and lists: numpy/cupy convert them on assignment
    source, target = backend_of(value), backend_of(tensor.array)
    return value if source is target else target.asarray(source.to_numpy(value))


def _write(tensor: Tensor, index, value, what: str) -> Tensor:
    try:
        tensor.array[index] = _on_backend(tensor, value)
    except (ValueError, IndexError, TypeError) as e:
        raise ShapeError(f"{what}: cannot write {_describe(value)} into a tensor of shape "
                         f"{tuple(tensor.array.shape)}: {e}") from None
    tensor._version += 1  # an op that saved this tensor for backward() now refuses it
    return tensor


def fits_in_place(result, target) -> bool:
    """PyTorch's rule for an in-place result: it may be stored (cast) in a tensor of a category
    as high or higher (bool < integer < float): ``f32 += f64`` is fine, ``int64 *= 0.5`` is not."""
    return result.category <= target.category


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else repr(value)


def _draw_like(current: Tensor, distribution: str) -> Tensor:
    return current._tracer.draw(list(current._value.type.shape), distribution, current.dtype)


def _need_float(tensor: Tensor, what: str) -> None:
    if not tensor.dtype.is_float:
        raise GraphcError(f"{what} needs a floating-point tensor, got {tensor.dtype.name}")


# ---- traced writes ------------------------------------------------------------------------
def _tracer_for(tensor: Tensor, operands, what: str):
    """The trace that records this change of ``tensor``, or None to write the array now."""
    tracer = tensor._tracer or current_tracer()
    if tracer is None:
        return None
    if tensor._tracer is not None or tracer.state_name(tensor) is not None:
        return tracer
    if tensor.requires_grad and tensor.is_leaf:  # a Parameter of a model the step does not name
        raise TraceError(f"{what} changes a Parameter of shape {tuple(tensor.shape)} that is not part of the compiled "
                         "step's models, which tracing would change once and the plan never; name its model in the "
                         "step function (a global, closure or argument variable)", tracer.user_location())
    if any(isinstance(o, Tensor) and (o._tracer is not None or tracer.state_name(o)) for o in operands):
        raise TraceError(f"{what} writes a traced value into a tensor made outside the traced computation: the "
                         "plan could never change that tensor; build the result with tensor ops instead "
                         "(x = gc.where(mask, value, x), gc.cat([...]))", tracer.user_location())
    return None  # an eager scratch tensor: written now, a constant of the graph


def _current(tracer, tensor: Tensor) -> Tensor:
    """``tensor``'s contents at this point of the trace, as a traced Tensor."""
    return Tensor(_value=tracer.lift(tensor, []), _tracer=tracer)


def _commit(tracer, tensor: Tensor, new, what: str, cast: bool = False) -> Tensor:
    """``tensor <- new`` in the trace (``new`` broadcast to its shape; ``cast``: any dtype is
    converted, as ``copy_`` does); returns ``tensor``, as PyTorch's in-place methods do."""
    current = _current(tracer, tensor)
    new = new if isinstance(new, Tensor) else Tensor(_value=tracer.lift(new, [current.dtype]), _tracer=tracer)
    if not cast and not fits_in_place(new.dtype, current.dtype):
        raise GraphcError(f"{what}: the result is {new.dtype.name}, which cannot be stored in place in a "
                          f"{current.dtype.name} tensor (as in PyTorch); use the out-of-place form",
                          tracer.user_location())
    new = new.cast(current.dtype)
    dims = current._value.type.shape
    if new._tracer is None or new._value.type.shape != dims:
        source = new if new._tracer is not None else _current(tracer, new)
        was_aliased = id(source._value) in tracer.aliased
        new = apply("broadcast_to", [source], {"shape": list(dims)})
        # a write copies (PyTorch's fill_/copy_): the written tensor is no view of its source,
        # so neither is refused a later in-place write for sharing storage
        tracer.aliased.discard(id(new._value))
        tracer.state_views.pop(id(new._value), None)
        if not was_aliased:
            tracer.aliased.discard(id(source._value))
    name = tracer.state_name(tensor)
    if name is not None:
        tracer.write_state(name, new._value)
    if tensor._tracer is not None:
        tensor._value = new._value
    return tensor


def _check_writable(tracer, tensor: Tensor, what: str) -> None:
    """A traced tensor that is no parameter or buffer can be rebound to new contents unless
    the caller's array or another tensor shares it."""
    if tracer.state_name(tensor) is not None:
        return
    if id(tensor._value) in tracer.arguments:
        raise TraceError(f"{what} changes an input of the traced function in place: a plan never changes the arrays "
                         "it is given; write x = x.op(...) instead", tracer.user_location())
    if id(tensor._value) in tracer.aliased:
        raise TraceError(f"{what} changes a traced tensor that shares storage with another (a view, reshape, "
                         "slice or detach of it, or what it was made from): a compiled graph cannot change both; "
                         "write x = x.op(...) instead", tracer.user_location())


def _in_place(tensor: Tensor, what: str, operands, traced, eager):
    """Run an in-place method: ``traced(current)`` gives the new contents inside a trace,
    ``eager()`` writes the array otherwise."""
    tracer = _tracer_for(tensor, operands, what)
    if tracer is None:
        _eager(tensor, what)
        return eager()
    _check_writable(tracer, tensor, what)
    return _commit(tracer, tensor, traced(_current(tracer, tensor)), what, cast=what in ("copy_", "fill_"))


# ---- the methods --------------------------------------------------------------------------
@torchsymbol(**_METHOD_ONLY)
def normal_(input, mean=0.0, std=1.0):
    """Fill with samples from N(mean, std**2) drawn from graphc's seeded generator (inside a
    compiled function: from the plan's generator, every run); returns the tensor.

    >>> import graphc as gc
    >>> gc.manual_seed(0)
    >>> w = gc.zeros(1000).normal_(0.0, 0.01)
    >>> 0.009 < float(w.numpy().std()) < 0.011
    True
    """
    _need_float(input, "normal_")
    if not std >= 0:
        raise GraphcError(f"normal_ expects std >= 0, got {std}")
    return _in_place(input, "normal_", (), lambda cur: _draw_like(cur, "normal") * std + mean,
                     lambda: _write(input, ..., generator().normal(mean, std, size=input.shape), "normal_"))


@torchsymbol(**_METHOD_ONLY)
def uniform_(input, a=0.0, b=1.0):
    """Fill with samples from U[a, b) (PyTorch's ``from``/``to``); returns the tensor.

    >>> import graphc as gc
    >>> w = gc.zeros(1000).uniform_(-0.1, 0.1)
    >>> bool((w.numpy() >= -0.1).all() and (w.numpy() <= 0.1).all())
    True
    """
    _need_float(input, "uniform_")
    if not a <= b:
        raise GraphcError(f"uniform_ expects a <= b, got a={a} > b={b}")
    return _in_place(input, "uniform_", (), lambda cur: _draw_like(cur, "uniform") * (b - a) + a,
                     lambda: _write(input, ..., generator().uniform(a, b, size=input.shape), "uniform_"))


@torchsymbol(**_METHOD_ONLY)
def fill_(input, value):
    """Set every element to ``value`` (a number or a 0-d tensor); returns the tensor.

    >>> import graphc as gc
    >>> gc.zeros(3).fill_(2.5).numpy().tolist()
    [2.5, 2.5, 2.5]
    """
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"fill_ takes a number or a 0-d tensor, got shape {value.shape}")
    return _in_place(input, "fill_", (value,), lambda cur: value, lambda: _write(input, ..., value, "fill_"))


@torchsymbol(**_METHOD_ONLY)
def zero_(input):
    """Set every element to 0; returns the tensor."""
    return fill_(input, 0)


@torchsymbol(**_METHOD_ONLY)
def copy_(input, src):
    """Copy ``src`` (broadcast to this shape, cast to this dtype, from any device) into the
    tensor; returns the tensor.

    >>> import graphc as gc
    >>> gc.zeros(2, 2).copy_(gc.tensor([1.0, 2.0])).numpy().tolist()
    [[1.0, 2.0], [1.0, 2.0]]
    """
    return _in_place(input, "copy_", (src,), lambda cur: src, lambda: _write(input, ..., src, "copy_"))


def setitem(tensor: Tensor, index, value) -> None:
    """``t[index] = value`` (PyTorch's indexing: ints, slices, index tensors, bool masks). On a
    plain eager tensor the array is written; where gradients are recorded (the tensor was
    computed from, or the value requires, grad) and inside a trace the write is ``index_put``
    (a ``scatter``, whose gradient reaches both) and the tensor is rebound to its result."""
    put_in_place(tensor, as_tuple(index), value, False, "t[...] = value")


def put_in_place(tensor: Tensor, index: tuple, value, accumulate: bool, what: str) -> Tensor:
    """``tensor[index] = value`` (``+=`` with ``accumulate``), in place; returns the tensor."""
    tracer = _tracer_for(tensor, (*index, value), what)
    if tracer is None:
        recorded = is_grad_enabled() and (tensor._grad_fn is not None
                                          or isinstance(value, Tensor) and value.requires_grad)
        if not recorded:
            return _eager_put(tensor, index, value, accumulate, what)
        if tensor.requires_grad and tensor.is_leaf:
            raise GraphcError(f"{what} on a leaf tensor that requires grad (as PyTorch refuses): its gradient "
                              "would go wrong; change it inside gc.no_grad() or write x = x.index_put(...)")
        return _rebind_eager(tensor, index_put(_snapshot(tensor), index, value, accumulate))
    _check_writable(tracer, tensor, what)
    current = _current(tracer, tensor)
    return _commit(tracer, tensor, index_put(current, index, value, accumulate), what, cast=True)


def _eager_put(tensor: Tensor, index: tuple, value, accumulate: bool, what: str) -> Tensor:
    if accumulate:
        new = index_put(Tensor(tensor.array), index, value, True)
        return _write(tensor, ..., new, what)
    parts = tuple(_on_backend(tensor, p) if isinstance(p, Tensor) else p for p in index)
    return _write(tensor, parts if len(parts) != 1 else parts[0], value, what)


def _snapshot(tensor: Tensor) -> Tensor:
    """A Tensor holding ``tensor``'s present array and place on the tape."""
    old = Tensor(tensor.array)
    old._grad_fn, old.requires_grad = tensor._grad_fn, tensor.requires_grad
    return old


def _rebind_eager(tensor: Tensor, new: Tensor) -> Tensor:
    """``tensor`` takes ``new``'s array and tape entry (PyTorch's in-place op on a recorded
    tensor); ops that read it before see a new version and refuse a backward through it."""
    tensor.array = new.array
    tensor._grad_fn, tensor.requires_grad = new._grad_fn, new.requires_grad
    tensor._version += 1
    return tensor


def _arithmetic(op_name: str, compute):
    def method(input, *args, **kwargs):
        def eager():
            out = compute(input, *args, **kwargs)
            if not fits_in_place(out.dtype, input.dtype):
                raise GraphcError(f"{op_name}_: the result is {out.dtype.name}, which cannot be stored in place in "
                                  f"a {input.dtype.name} tensor (as in PyTorch); use the out-of-place {op_name}")
            return _write(input, ..., out, f"{op_name}_")
        return _in_place(input, f"{op_name}_", (*args, *kwargs.values()),
                         lambda cur: compute(cur, *args, **kwargs), eager)
    method.__name__ = method.__qualname__ = f"{op_name}_"
    method.__doc__ = f"In-place ``{op_name}``: computes it, writes the result into the tensor, returns the tensor."
    return torchsymbol(**_METHOD_ONLY)(method)


add_ = _arithmetic("add", lambda x, other, alpha=1: x.add(other, alpha=alpha))
sub_ = _arithmetic("sub", lambda x, other, alpha=1: x.sub(other, alpha=alpha))
mul_ = _arithmetic("mul", lambda x, other: x.mul(other))
div_ = _arithmetic("div", lambda x, other, rounding_mode=None: x.div(other, rounding_mode=rounding_mode))
floor_divide_ = _arithmetic("floor_divide", lambda x, other: x.floor_divide(other))
pow_ = _arithmetic("pow", lambda x, exponent: x.pow(exponent))


def rebind_data(tensor: Tensor, value) -> None:
    """``t.data = value``: eagerly, ``t`` takes ``value``'s array (PyTorch's rebinding, any
    shape); inside a trace, a write of the new contents (``p.data = p.data - lr * p.grad``),
    which must keep ``t``'s shape and dtype."""
    tracer = _tracer_for(tensor, (value,), "t.data = value")
    if tracer is None:
        tensor.array = value.array if isinstance(value, Tensor) else value
        return
    new = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
    current = _current(tracer, tensor)._value.type
    if tuple(new.dims) != tuple(current.shape) or new.dtype is not current.dtype:
        raise TraceError(f"t.data = value with a {new.dtype.name}{list(new.dims)} value for a {current} tensor "
                         "cannot be compiled: a plan keeps every tensor's shape and dtype", tracer.user_location())
    _check_writable(tracer, tensor, "t.data = value")
    _commit(tracer, tensor, new, "t.data = value")
clamp_ = _arithmetic("clamp", lambda x, min=None, max=None: x.clamp(min, max))  # noqa: A006
