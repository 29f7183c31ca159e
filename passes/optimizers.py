"""Optimizer updates appended to a graph as IR ops, with PyTorch's exact formulas.

A group is plain data: ``{"kind": "sgd"|"adam"|"adamw"|"adadelta"|"rmsprop"|"adagrad", "params":
[names], "hyper": {...}}``.
Each group's learning rate is a float64 graph input (``lr``, or ``lr.<i>`` with several
groups), so schedulers change it without recompiling. Optimizer state (momentum buffers,
exp_avg, exp_avg_sq, the step count) is graph state with role ``optim``, named after
PyTorch's state keys (``optim.<param>.<slot>``); it starts at zero (Adagrad's ``sum`` is filled
with ``initial_accumulator_value`` by the optimizer when the plan is built). Scalar arithmetic
(bias corrections, step sizes) runs in float64, as PyTorch does in Python; elementwise
arithmetic follows the order of PyTorch's single-tensor (CPU) kernels: ``addcmul_(a, b,
value=v)`` is ``(v * a) * b``, ``addcdiv_(a, b, value=v)`` is ``(v * a) / b``.
"""
from __future__ import annotations

import numpy as np

from ..ir.builder import Builder
from ..ir.errors import GraphcError
from ..ir.graph import Graph, Value
from ..ir.types import DType, TensorType

STEP = "optim.step"
SCALAR_F64 = TensorType((), DType.float64)


def lr_input_name(index: int, count: int) -> str:
    return "lr" if count == 1 else f"lr.{index}"


def append_optimizer(graph: Graph, grads: dict, groups: list) -> Graph:
    """Add update nodes for every parameter with a gradient; record them in ``graph.updates``."""
    out = graph.copy()
    add_optimizer_updates(out, grads, groups)
    return out


def add_optimizer_updates(out: Graph, grads: dict, groups: list, step_per_param: bool = False,
                          current: dict | None = None) -> None:
    """What :func:`append_optimizer` adds, added to ``out`` itself: a traced ``optimizer.step()``
    appends to the graph being traced; the pass works on a copy. ``current``: a parameter's
    value where the step function changed it in place before ``step()`` (default: its state).

    A plan updates the same parameters every step, so one ``optim.step`` counts for all. The
    eager ``step()`` skips parameters whose ``.grad`` is None, so it counts per parameter
    (``optim.<param>.step``, ``step_per_param=True``), as PyTorch's per-parameter ``step``."""
    source = next((g["source"] for g in groups if g.get("source")), None)  # where the optimizer was built
    b = Builder(out, meta={"pass": "optimizer", "phase": "update", **({"source": source} if source else {})})
    # a second optimizer stepped in the same function (its own parameters) shares the one count:
    # both step once per call
    if step_per_param:
        shared = None
    elif STEP in out.state:
        shared = out.state[STEP], out.updates[STEP]
    else:
        shared = _add_step(out, b, STEP)
    hyper_inputs = list(out.meta.get("hyper_inputs", []))
    earlier = len(hyper_inputs)
    for index, group in enumerate(groups, start=earlier):
        name = out.unique_name(lr_input_name(index, earlier + len(groups)))
        lr = out.add_input(Value(name, SCALAR_F64))
        hyper_inputs.append(name)
        update = _UPDATES.get(group["kind"])
        if update is None:
            raise GraphcError(f"unknown optimizer kind {group['kind']!r}")
        ctx = _GroupContext(b, out, lr, *shared, group["hyper"]) if shared else None
        for pname in group["params"]:
            grad = grads.get(pname)
            if grad is None:  # unused parameter: PyTorch skips params whose grad is None
                continue
            b.meta = {"pass": "optimizer", "phase": "update", "module": pname, "module_type": group["kind"]}
            if group.get("source"):
                b.meta["source"] = group["source"]
            if shared is None:
                ctx = _GroupContext(b, out, lr, *_add_step(out, b, f"optim.{pname}.step"), group["hyper"])
            out.updates[pname] = update(ctx, pname, (current or {}).get(pname, out.state[pname]), grad)
    out.meta["hyper_inputs"] = hyper_inputs
    out.meta["optimizer"] = out.meta.get("optimizer", [])[:earlier] + [
        {"kind": g["kind"], "params": list(g["params"]), "hyper": dict(g["hyper"])} for g in groups]


def _add_step(out: Graph, b: Builder, name: str) -> tuple:
    """A step-count state and its value after this update."""
    step = out.add_state(Value(name, TensorType((), DType.int64)), "optim")
    new_step = b.emit1("add", [step, _const(b, 1, DType.int64)])
    out.updates[name] = new_step
    return step, new_step


def _const(b, value, dtype: DType) -> Value:
    return b.constant(np.array(value, dtype=dtype.numpy), dtype)


class _GroupContext:
    """Per-group values shared by its parameters' updates (scalars built once)."""

    def __init__(self, b, graph, lr, step, new_step, hyper):
        self.b, self.graph, self.hyper = b, graph, hyper
        self.lr, self.step, self.new_step = lr, step, new_step
        self._cache = {}

    def scalar(self, key, build, dtype: DType):
        """A float scalar computed once per group, cast to the parameter's dtype."""
        if (key, dtype) not in self._cache:
            value = build()
            if value.type.dtype != dtype:
                value = self.b.emit1("cast", [value], {"dtype": dtype.name})
            self._cache[(key, dtype)] = value
        return self._cache[(key, dtype)]

    def state(self, pname: str, slot: str, like: Value) -> Value:
        return self.graph.add_state(Value(f"optim.{pname}.{slot}", like.type), "optim")

    def set(self, value: Value, new: Value) -> Value:
        self.graph.updates[value.name] = new
        return new


def _sgd(ctx: _GroupContext, pname: str, param: Value, grad: Value) -> Value:
    b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
    d = grad
    if h["weight_decay"]:
        d = b.emit1("add", [d, b.emit1("mul", [param, _const(b, h["weight_decay"], dtype)])])
    if h["momentum"]:
        buf = ctx.state(pname, "momentum_buffer", param)
        m = _const(b, h["momentum"], dtype)
        new_buf = b.emit1("add", [b.emit1("mul", [buf, m]),
                                  b.emit1("mul", [d, _const(b, 1 - h["dampening"], dtype)]) if h["dampening"] else d])
        if h["dampening"]:  # PyTorch's first step copies d into the buffer, without dampening
            first = b.emit1("eq", [ctx.step, _const(b, 0, DType.int64)])
            new_buf = b.emit1("where", [first, d, new_buf])
        ctx.set(buf, new_buf)
        d = b.emit1("add", [d, b.emit1("mul", [new_buf, m])]) if h["nesterov"] else new_buf
    lr = ctx.scalar("lr", lambda: ctx.lr, dtype)
    return b.emit1("sub", [param, b.emit1("mul", [d, lr])])


def _adam(decoupled: bool):
    def update(ctx: _GroupContext, pname: str, param: Value, grad: Value) -> Value:
        b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
        beta1, beta2 = h["betas"]
        if h["weight_decay"] and decoupled:  # AdamW: p *= 1 - lr * wd, before the Adam step
            shrink = ctx.scalar("shrink", lambda: b.emit1("sub", [_const(b, 1.0, DType.float64), b.emit1(
                "mul", [ctx.lr, _const(b, h["weight_decay"], DType.float64)])]), dtype)
            param = b.emit1("mul", [param, shrink])
        elif h["weight_decay"]:
            grad = b.emit1("add", [grad, b.emit1("mul", [param, _const(b, h["weight_decay"], dtype)])])
        m, v = ctx.state(pname, "exp_avg", param), ctx.state(pname, "exp_avg_sq", param)
        # exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
        m_new = ctx.set(m, _lerp(b, m, grad, 1 - beta1, dtype))
        v_new = ctx.set(v, b.emit1("add", [b.emit1("mul", [v, _const(b, beta2, dtype)]), b.emit1(
            "mul", [b.emit1("mul", [grad, grad]), _const(b, 1 - beta2, dtype)])]))
        step_size = ctx.scalar("step_size", lambda: b.emit1("div", [ctx.lr, _bias_correction(ctx, beta1)]), dtype)
        bc2_sqrt = ctx.scalar("bc2_sqrt", lambda: b.emit1("sqrt", [_bias_correction(ctx, beta2)]), dtype)
        denom = b.emit1("add", [b.emit1("div", [b.emit1("sqrt", [v_new]), bc2_sqrt]), _const(b, h["eps"], dtype)])
        return b.emit1("sub", [param, b.emit1("mul", [b.emit1("div", [m_new, denom]), step_size])])
    return update


def _bias_correction(ctx: _GroupContext, beta: float) -> Value:
    """1 - beta ** step, in float64, with the step count after this update."""
    b = ctx.b
    t = ctx.scalar("t", lambda: ctx.new_step, DType.float64)
    return b.emit1("sub", [_const(b, 1.0, DType.float64), b.emit1("pow", [_const(b, beta, DType.float64), t])])


def _lerp(b, start: Value, end: Value, weight: float, dtype: DType) -> Value:
    """``start.lerp(end, weight)`` with PyTorch's two branches (chosen here: the weight is a
    constant): ``start + w * (end - start)`` below 0.5, else ``end - (end - start) * (1 - w)``."""
    w = np.array(weight, dtype.numpy)  # torch casts the weight to the tensor's dtype first
    diff = b.emit1("sub", [end, start])
    if abs(w) < 0.5:
        return b.emit1("add", [start, b.emit1("mul", [diff, _const(b, w, dtype)])])
    return b.emit1("sub", [end, b.emit1("mul", [diff, _const(b, np.array(1, dtype.numpy) - w, dtype)])])


def _prepared_grad(ctx: _GroupContext, param: Value, grad: Value) -> Value:
    """``-grad`` with ``maximize``, then ``+ weight_decay * param`` (L2), as the adaptive
    optimizers (Adadelta, RMSprop, Adagrad) start their step."""
    b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
    if h.get("maximize"):
        grad = b.emit1("neg", [grad])
    if h["weight_decay"]:
        grad = b.emit1("add", [grad, b.emit1("mul", [param, _const(b, h["weight_decay"], dtype)])])
    return grad


def _decayed_square(ctx: _GroupContext, avg: Value, x: Value, decay: float) -> Value:
    """``avg.mul_(decay).addcmul_(x, x, value=1 - decay)``."""
    b, dtype = ctx.b, avg.type.dtype
    scaled = b.emit1("mul", [b.emit1("mul", [x, _const(b, 1 - decay, dtype)]), x])
    return b.emit1("add", [b.emit1("mul", [avg, _const(b, decay, dtype)]), scaled])


def _adadelta(ctx: _GroupContext, pname: str, param: Value, grad: Value) -> Value:
    """delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * grad; p -= lr * delta."""
    b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
    grad = _prepared_grad(ctx, param, grad)
    eps = _const(b, h["eps"], dtype)
    square_avg, acc_delta = ctx.state(pname, "square_avg", param), ctx.state(pname, "acc_delta", param)
    sq_new = ctx.set(square_avg, _decayed_square(ctx, square_avg, grad, h["rho"]))
    std = b.emit1("sqrt", [b.emit1("add", [sq_new, eps])])
    delta = b.emit1("sqrt", [b.emit1("add", [acc_delta, eps])])
    delta = b.emit1("mul", [b.emit1("div", [delta, std]), grad])
    ctx.set(acc_delta, _decayed_square(ctx, acc_delta, delta, h["rho"]))
    lr = ctx.scalar("lr", lambda: ctx.lr, dtype)
    return b.emit1("sub", [param, b.emit1("mul", [lr, delta])])


def _rmsprop(ctx: _GroupContext, pname: str, param: Value, grad: Value) -> Value:
    """avg = sqrt(square_avg [- grad_avg^2 if centered]) + eps; with momentum
    buf = momentum * buf + grad / avg and p -= lr * buf, else p -= lr * grad / avg."""
    b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
    grad = _prepared_grad(ctx, param, grad)
    square_avg = ctx.state(pname, "square_avg", param)
    sq_new = ctx.set(square_avg, _decayed_square(ctx, square_avg, grad, h["alpha"]))
    if h["centered"]:
        grad_avg = ctx.state(pname, "grad_avg", param)
        ga_new = ctx.set(grad_avg, _lerp(b, grad_avg, grad, 1 - h["alpha"], dtype))
        # square_avg.addcmul(grad_avg, grad_avg, value=-1)
        sq_new = b.emit1("add", [sq_new, b.emit1("mul", [b.emit1("neg", [ga_new]), ga_new])])
    avg = b.emit1("add", [b.emit1("sqrt", [sq_new]), _const(b, h["eps"], dtype)])
    lr = ctx.scalar("lr", lambda: ctx.lr, dtype)
    if h["momentum"] > 0:
        buf = ctx.state(pname, "momentum_buffer", param)
        new_buf = ctx.set(buf, b.emit1("add", [b.emit1("mul", [buf, _const(b, h["momentum"], dtype)]),
                                               b.emit1("div", [grad, avg])]))
        return b.emit1("sub", [param, b.emit1("mul", [lr, new_buf])])
    return b.emit1("sub", [param, b.emit1("div", [b.emit1("mul", [lr, grad]), avg])])


def _adagrad(ctx: _GroupContext, pname: str, param: Value, grad: Value) -> Value:
    """sum += grad^2; p -= clr * grad / (sqrt(sum) + eps), clr = lr / (1 + (step - 1) * lr_decay)."""
    b, h, dtype = ctx.b, ctx.hyper, param.type.dtype
    grad = _prepared_grad(ctx, param, grad)
    state_sum = ctx.state(pname, "sum", param)
    sum_new = ctx.set(state_sum, b.emit1("add", [state_sum, b.emit1("mul", [grad, grad])]))
    std = b.emit1("add", [b.emit1("sqrt", [sum_new]), _const(b, h["eps"], dtype)])
    clr = ctx.scalar("clr", lambda: _decayed_lr(ctx, h["lr_decay"]), dtype)
    return b.emit1("sub", [param, b.emit1("div", [b.emit1("mul", [clr, grad]), std])])


def _decayed_lr(ctx: _GroupContext, lr_decay: float) -> Value:
    """Adagrad's ``lr / (1 + (step - 1) * lr_decay)`` in float64, step counted after this update."""
    if not lr_decay:  # lr / (1 + 0) is lr exactly
        return ctx.lr
    b = ctx.b
    t = ctx.scalar("t", lambda: ctx.new_step, DType.float64)
    steps_before = b.emit1("sub", [t, _const(b, 1.0, DType.float64)])
    denom = b.emit1("add", [_const(b, 1.0, DType.float64), b.emit1("mul", [steps_before, _const(b, lr_decay, DType.float64)])])
    return b.emit1("div", [ctx.lr, denom])


_UPDATES = {"sgd": _sgd, "adam": _adam(False), "adamw": _adam(True), "adadelta": _adadelta, "rmsprop": _rmsprop,
            "adagrad": _adagrad}
