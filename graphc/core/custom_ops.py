"""Custom ops with their own gradient: ``gc.custom_op`` and ``gc.autograd.Function``.

A custom op is a class with PyTorch's static ``forward(ctx, *args)`` and ``backward(ctx,
*grads)``, written with graphc tensor operations. The first call with given input types
traces both into graphs (``ir/ops/custom.py``); every call is then one ``custom_call`` node
holding them as data, so the op runs eagerly and compiled, autodiff uses the user's backward,
and a plan that uses it saves, loads and resumes training with no user code. Constants the
bodies use (``x + 1.0``, a captured array) become inputs of the node, so bodies hold no data.

>>> import graphc as gc
>>> @gc.custom_op
... class Square:
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return 2 * x * grad
>>> x = gc.tensor([1.0, 3.0], requires_grad=True)
>>> Square(x).sum().backward()
>>> x.grad.numpy().tolist()
[2.0, 6.0]
"""
from __future__ import annotations

import inspect

import numpy as np

from .dispatch import apply
from ..ir.errors import GraphcError, TraceError
from ..ir.graph import Value
from ..ir.registry import get_op
from ..ir.types import DType, TensorType
from .tensor import Tensor


MAX_TRACES = 64  # traced (forward, backward) pairs one custom op keeps


class FunctionCtx:
    """The ``ctx`` of forward and backward: ``save_for_backward``, ``saved_tensors``,
    ``needs_input_grad``, and any attribute the forward sets (plain values, or tensors, which
    are saved like ``save_for_backward``'s)."""

    def __init__(self, needs_input_grad: tuple):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *tensors) -> None:
        """Accepted for PyTorch code: their cotangents are zeros unless a loss reads them."""

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted for PyTorch code: missing cotangents are always zeros here."""


class CustomOp:
    """A custom op made from a class with ``forward`` and ``backward`` (see the module doc).
    Calling it takes tensors and plain Python values (baked into the traced bodies, one
    tracing per distinct set); it returns what ``forward`` returns."""

    def __init__(self, cls, name: str | None = None):
        for method in ("forward", "backward"):
            if not callable(getattr(cls, method, None)):
                raise GraphcError(f"custom op {cls.__name__}: needs a static {method}(ctx, ...) method")
        self.cls, self.name = cls, name or cls.__name__
        # (input types, plain args, batch size) -> (attrs, constants, single output); the oldest
        # of more than MAX_TRACES goes (a plain float that changes every call traces every call)
        self._traced: dict = {}

    def __repr__(self) -> str:
        return f"<custom op {self.name}>"

    def __call__(self, *args, **kwargs):
        args = self._positional(args, kwargs) if kwargs else args
        tensors = [a if isinstance(a, Tensor) else Tensor(a) for a in args if _is_tensor(a)]
        tracer = next((t._tracer for t in tensors if t._tracer is not None), None)
        types = tuple(t._value.type if t._tracer is not None
                      else TensorType(t.array.shape, DType.from_any(t.array.dtype)) for t in tensors)
        plain = tuple((i, a) for i, a in enumerate(args) if not _is_tensor(a))
        batch = tracer.batch_size if tracer is not None else None
        try:
            hash(plain)
        except TypeError:
            raise GraphcError(f"custom op {self.name}: non-tensor arguments must be plain values "
                              "(numbers, strings, tuples)") from None
        # by type and repr, not ==: True and 1, or -0.0 and 0.0, are traced apart
        key = (types, tuple((i, type(a).__qualname__, repr(a)) for i, a in plain), batch)
        if key not in self._traced:
            if len(self._traced) >= MAX_TRACES:
                del self._traced[next(iter(self._traced))]
            self._traced[key] = trace_bodies(self, types, plain, len(args), tracer)
        attrs, constants, single = self._traced[key]
        out = apply("custom_call", [*tensors, *(Tensor(c) for c in constants)], attrs)
        out = out if isinstance(out, tuple) else (out,)
        return out[0] if single else out[:attrs["outputs"]]


    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """Keyword arguments (``apply(x, alpha=3.0)``) put in their places, defaults filled in
        before them, as ``forward``'s signature says."""
        params = list(inspect.signature(self.cls.forward).parameters.values())
        if getattr(self.cls, "setup_context", None) is None:
            params = params[1:]  # ctx
        try:
            bound = inspect.Signature(params).bind(*args, **kwargs)
        except TypeError as e:
            raise GraphcError(f"custom op {self.name}: {e}") from None
        if bound.kwargs:
            raise GraphcError(f"custom op {self.name}: keyword-only arguments {sorted(bound.kwargs)} are not supported")
        bound.apply_defaults()
        return tuple(bound.args)


def _is_tensor(a) -> bool:
    return isinstance(a, (Tensor, np.ndarray))


def custom_op(cls=None, *, name: str | None = None):
    """Make a custom op from a class with static ``forward(ctx, *args)`` and ``backward(ctx,
    *grads)`` (``@gc.custom_op`` or ``@gc.custom_op(name="...")``); see the module doc."""
    if cls is None:
        return lambda c: CustomOp(c, name)
    return CustomOp(cls, name)


class Function:
    """PyTorch's ``torch.autograd.Function``: subclass it with static ``forward`` and
    ``backward`` and call ``MyFunction.apply(*args)``; the same machinery as ``gc.custom_op``.

    >>> import graphc as gc
    >>> class Double(gc.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         return grad * 2
    >>> Double.apply(gc.tensor([1.0])).numpy().tolist()
    [2.0]
    """

    @classmethod
    def apply(cls, *args, **kwargs):
        op = cls.__dict__.get("_gc_custom_op")
        if op is None:
            op = CustomOp(cls)
            cls._gc_custom_op = op  # per class, like PyTorch's own per-class state
        return op(*args, **kwargs)


# ---- tracing the two bodies -------------------------------------------------------------------
def trace_bodies(op: CustomOp, types: tuple, plain: tuple, count: int, outer) -> tuple:
    """``(custom_call attrs, constant arrays, whether forward returned one tensor)``."""
    from .tracer import Tracer, active

    batch = outer.batch_size if outer is not None else None
    forward = Tracer(f"{op.name}.forward")
    forward.batch_size = batch
    inputs = [_placeholder(forward, f"x{i}", t) for i, t in enumerate(types)]
    ctx = FunctionCtx(tuple(_is_float_arg(inputs, plain, i) for i in range(count)))
    args = _merge(inputs, plain, count)
    with active(forward):  # the body's own trace: the model's state is not its state
        result = _call_user(op, "forward", ctx, *args)
    single = not isinstance(result, (tuple, list))
    outs = [_traced_value(forward, t, op, "forward returned") for t in ((result,) if single else result)]
    saved = _saved_tensors(ctx, forward, op)
    known = {id(v) for v in [*(t._value for t in inputs), *outs]}
    residuals = list({id(v): v for v in saved if v is not None and id(v) not in known}.values())
    forward.graph.outputs = outs + residuals
    _check_body(op, forward)
    try:
        backward, grads = _trace_backward(op, forward, inputs, outs, residuals, saved, ctx, plain, count, batch)
    except NotImplementedError:  # a forward-only Function: usable until something differentiates it
        backward, grads = None, None
    if backward is not None:
        _check_body(op, backward)
    if outer is not None and any("fixed_batch" in t.graph.meta for t in (forward, backward) if t is not None):
        outer.fix_batch()
    body = backward.graph if backward is not None and grads else None  # all None: no gradient to run
    fwd_consts, bwd_consts = _hoist_constants(forward.graph), _hoist_constants(body) if body is not None else []
    _align_inputs(forward.graph, body, len(inputs), fwd_consts, bwd_consts)
    attrs = get_op("custom_call").normalize_attrs({
        "name": op.name, "forward": forward.graph, "backward": body, "outputs": len(outs), "grads": grads or (),
        "differentiable": grads is not None})
    constants = [a for _, a in fwd_consts] + [a for _, a in bwd_consts]
    return attrs, constants, single


def _trace_backward(op, forward, inputs, outs, residuals, saved, ctx, plain, count, batch):
    """Trace ``backward(ctx, *cotangents)`` reading placeholders for the inputs, the outputs
    and the cotangents; the saved tensors and tensor attributes of ``ctx`` become those."""
    from .tracer import Tracer, active

    backward = Tracer(f"{op.name}.backward")
    backward.batch_size = batch
    stand_in = {}  # forward value -> its first placeholder (an output may also be an input)
    for prefix, values in (("x", [t._value for t in inputs]), ("y", outs + residuals)):
        for i, v in enumerate(values):
            placeholder = _placeholder(backward, f"{prefix}{i}", v.type)  # one per position, used or not
            stand_in.setdefault(id(v), placeholder)
    cotangents = [_placeholder(backward, f"grad{i}", v.type) for i, v in enumerate(outs)]
    ctx.saved_tensors = tuple(None if v is None else stand_in[id(v)] for v in saved[:len(ctx.saved_tensors)])
    for key, value in list(vars(ctx).items()):
        if isinstance(value, Tensor) and value._tracer is forward:
            setattr(ctx, key, stand_in[id(value._value)])
    with active(backward):
        result = _call_user(op, "backward", ctx, *cotangents)
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) > count and all(r is None for r in result[count:]):  # PyTorch drops trailing Nones
        result = result[:count]
    missing = range(len(result), count)
    if missing and all(i in dict(plain) for i in missing):  # defaults filled in for keyword calls: no gradient
        result = result + (None,) * len(missing)
    if len(result) != count:
        raise GraphcError(f"custom op {op.name}: backward returned {len(result)} gradients for the {count} "
                          "arguments of forward (one per argument, None where there is none)")
    grads, outputs = [], []
    tensor_positions = [i for i in range(count) if i not in dict(plain)]
    for index, position in enumerate(tensor_positions):
        grad = result[position]
        if grad is None:
            continue
        value = _traced_value(backward, grad, op, f"backward's gradient {position}")
        want = inputs[index]._value.type
        if value.type != want:
            raise GraphcError(f"custom op {op.name}: backward's gradient {position} is {value.type}, its input is "
                              f"{want}")
        grads.append(index)
        outputs.append(value)
    for position in dict(plain):
        if result[position] is not None:
            raise GraphcError(f"custom op {op.name}: backward returned a gradient for argument {position}, "
                              "which is not a tensor (return None there)")
    backward.graph.outputs = outputs
    return backward, tuple(grads)


def _placeholder(tracer, name: str, ttype: TensorType) -> Tensor:
    value = tracer.graph.add_input(Value(tracer.graph.unique_name(name), ttype))
    tracer.builder.reserve(value.name)
    return Tensor(_value=value, _tracer=tracer)


def _merge(tensors: list, plain: tuple, count: int) -> list:
    given, it = dict(plain), iter(tensors)
    return [given[i] if i in given else next(it) for i in range(count)]


def _is_float_arg(inputs, plain, i) -> bool:
    if i in dict(plain):
        return False
    index = sum(1 for k in range(i) if k not in dict(plain))
    return inputs[index]._value.type.dtype.is_float


def _call_user(op, method: str, ctx, *args):
    """``forward(ctx, *args)`` (or PyTorch 2's ``forward(*args)`` then ``setup_context(ctx,
    inputs, output)``) or ``backward(ctx, *grads)``, refusing random draws: a body that drew
    numbers eagerly (``gc.randn``) would hold them as constants, the same every call."""
    from ..random import generator

    before = generator().bit_generator.state
    try:
        setup = getattr(op.cls, "setup_context", None)
        if method == "forward" and setup is not None:
            output = op.cls.forward(*args)
            setup(ctx, tuple(args), output)
        else:
            output = getattr(op.cls, method)(ctx, *args)
    except GraphcError as e:
        raise type(e)(f"custom op {op.name}.{method}: {e.message}{_hint(e)}", e.where) from None
    if generator().bit_generator.state != before:
        raise GraphcError(f"custom op {op.name}.{method} draws random numbers (gc.randn, gc.rand, ...); a custom op's "
                          "body is traced once, so they would be the same every call: pass them as an argument")
    return output


def _hint(e) -> str:
    if "another trace" not in e.message:
        return ""
    return ("; a body reads its arguments, ctx.saved_tensors and tensors set as ctx attributes; pass any other "
            "tensor (a model's buffer, say) as an argument")


def _traced_value(tracer, t, op, what: str) -> Value:
    if not isinstance(t, Tensor):
        raise GraphcError(f"custom op {op.name}: {what} a {type(t).__name__}, not a tensor")
    return tracer.lift(t, [])


def _saved_tensors(ctx, forward, op) -> list:
    """The forward values the backward reads: saved tensors, then tensor attributes of ctx."""
    extra = [v for v in vars(ctx).values() if isinstance(v, Tensor) and v._tracer is forward]
    saved = []
    for t in [*ctx.saved_tensors, *extra]:
        if t is None:  # save_for_backward(x, None) gives None back, as in PyTorch
            saved.append(None)
            continue
        if not isinstance(t, Tensor):
            raise GraphcError(f"custom op {op.name}: save_for_backward takes tensors, got a {type(t).__name__}")
        saved.append(forward.lift(t, []))
    return saved


def _check_body(op, tracer) -> None:
    """Bodies are pure functions of their inputs: no random ops, no state, no trainable
    tensors captured from outside (their gradient would be lost)."""
    for node in tracer.graph.nodes:
        if get_op(node.op).effects != "pure":
            raise GraphcError(f"custom op {op.name}: {node.op} ({get_op(node.op).effects}) cannot be used in a "
                              "custom op's body; bodies must be pure functions of their inputs", node.location())
    for t in tracer.keep_alive:
        if getattr(t, "requires_grad", False):
            raise TraceError(f"custom op {op.name}: a tensor that requires grad (shape {tuple(t.shape)}) is used "
                             "from outside; pass it as an argument so that its gradient is computed")
    if tracer.graph.updates:
        raise TraceError(f"custom op {op.name}: a body cannot update buffers")


def _hoist_constants(graph) -> list:
    """Turn the body's constants into trailing inputs; returns ``[(Value, array)]``."""
    hoisted = [(v, graph.constant_data[name]) for name, v in graph.constants.items()]
    graph.constants, graph.constant_data = {}, {}
    return hoisted


def _align_inputs(forward, backward, n_args: int, fwd_consts: list, bwd_consts: list) -> None:
    """Both bodies read the node's inputs: (args, forward's constants, backward's constants);
    the backward also the node's outputs and the cotangents. Unused ones are plain inputs."""
    def unused(graph, prefix, entries):
        return [Value(graph.unique_name(f"{prefix}{i}"), v.type) for i, (v, _) in enumerate(entries)]

    if backward is None:
        forward.inputs = [*forward.inputs, *(v for v, _ in fwd_consts)]
        return
    args, rest = backward.inputs[:n_args], backward.inputs[n_args:]
    forward.inputs = [*forward.inputs, *(v for v, _ in fwd_consts), *unused(forward, "unused", bwd_consts)]
    backward.inputs = [*args, *unused(backward, "unused", fwd_consts), *(v for v, _ in bwd_consts), *rest]
