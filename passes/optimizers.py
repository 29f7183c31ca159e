"""Optimizer updates appended to a graph as IR ops, with PyTorch's exact formulas.

A group is plain data: ``{"kind": "sgd"|"adam"|"adamw", "params": [names], "hyper": {...}}``.
Each group's learning rate is a float64 graph input (``lr``, or ``lr.<i>`` with several
groups), so schedulers change it without recompiling. Optimizer state (momentum buffers,
exp_avg, exp_avg_sq, the step count) is graph state with role ``optim``; it starts at zero.
Scalar arithmetic (bias corrections, step sizes) runs in float64, as PyTorch does in Python.
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
    source = next((g["source"] for g in groups if g.get("source")), None)  # where the optimizer was built
    b = Builder(out, meta={"pass": "optimizer", "phase": "update", **({"source": source} if source else {})})
    step = out.add_state(Value(STEP, TensorType((), DType.int64)), "optim")
    new_step = b.emit1("add", [step, _const(b, 1, DType.int64)])
    out.updates[STEP] = new_step
    hyper_inputs = []
    for index, group in enumerate(groups):
        name = out.unique_name(lr_input_name(index, len(groups)))
        lr = out.add_input(Value(name, SCALAR_F64))
        hyper_inputs.append(name)
        update = _UPDATES.get(group["kind"])
        if update is None:
            raise GraphcError(f"unknown optimizer kind {group['kind']!r}")
        ctx = _GroupContext(b, out, lr, step, new_step, group["hyper"])
        for pname in group["params"]:
            grad = grads.get(pname)
            if grad is None:  # unused parameter: PyTorch skips params whose grad is None
                continue
            b.meta = {"pass": "optimizer", "phase": "update", "module": pname, "module_type": group["kind"]}
            if group.get("source"):
                b.meta["source"] = group["source"]
            out.updates[pname] = update(ctx, pname, out.state[pname], grad)
    out.meta["hyper_inputs"] = hyper_inputs
    out.meta["optimizer"] = [{"kind": g["kind"], "params": list(g["params"]), "hyper": dict(g["hyper"])}
                             for g in groups]
    return out


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
        m_new = ctx.set(m, b.emit1("add", [m, b.emit1("mul", [b.emit1("sub", [grad, m]), _const(b, 1 - beta1, dtype)])]))
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


_UPDATES = {"sgd": _sgd, "adam": _adam(False), "adamw": _adam(True)}
