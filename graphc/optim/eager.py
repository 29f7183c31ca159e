"""The eager ``optimizer.step()``: the optimizer pass's update rules, compiled once into a small
plan over the parameters, run on their current ``.grad`` arrays.

There is one set of update formulas (graphc/passes/optimizers.py): a compiled training plan
appends them to its step graph; here they form a graph of their own whose inputs are the
gradients, whose state is the parameters (shared, updated in place) and the optimizer state.
Parameters whose ``.grad`` is None are skipped, as PyTorch skips them; each set of parameters
with gradients gets its own small plan, all sharing the same optimizer state arrays.
"""
from __future__ import annotations

from ..executor import Plan
from ..executor.backends import backend_of
from ..ir.errors import GraphcError
from ..ir.graph import Graph, Value
from ..ir.types import DType, TensorType
from ..passes.optimizers import add_optimizer_updates


class EagerUpdate:
    """The optimizer state of eager steps (``optim.<name>.<slot>`` arrays, ``optim.step``) and
    the update plans, one per set of parameters that have gradients."""

    def __init__(self, optimizer, names: list, state: dict | None = None, plan_step=None):
        self.optimizer = optimizer
        self.names = names  # the state name of each parameter, in param_groups order
        self.state = dict(state or {})  # shared with every update plan built here
        self._plans: dict = {}
        # A compiled plan's one ``optim.step`` (the same optimizer's plan): eager steps count per
        # parameter and keep it at the highest count, so the plan continues where they stopped.
        self.plan_step = plan_step

    def make_initial_state(self) -> None:
        """Slots that do not start at zero (Adagrad's ``sum``) exist for every parameter from the
        start, as PyTorch's constructor makes them, with the step count at 0."""
        import numpy as np

        for key, p, value in self.optimizer.initial_slots(self.names):
            self.state[key] = backend_of(p.array).xp.full(p.array.shape, value, p.array.dtype)
            self.state[key.rsplit(".", 1)[0] + ".step"] = np.zeros((), np.int64)

    def step(self) -> None:
        params = self.optimizer.params()
        has_grad = tuple(p.grad is not None for p in params)
        if not any(has_grad):
            raise GraphcError(f"{type(self.optimizer).__name__}.step(): no parameter has a gradient; call "
                              "loss.backward() first")
        # A rebound parameter (p.data = ...) or an edited hyper-parameter (momentum) gets a new plan;
        # the learning rate is a plan input and needs none.
        hyper = tuple(repr(sorted(self.optimizer.hyper(g).items())) for g in self.optimizer.param_groups)
        key = (has_grad, tuple(id(p.array) for p in params), hyper)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build(params, has_grad)
        grads = []
        for p, name in zip(params, self.names):
            if p.grad is not None:
                if tuple(p.grad.shape) != tuple(p.shape) or p.grad.dtype is not p.dtype:
                    raise GraphcError(f"the gradient of {name} is {p.grad.dtype.name}{list(p.grad.shape)}, the "
                                      f"parameter {p.dtype.name}{list(p.shape)}")
                grads.append(p.grad.array)
        plan.run(grads)
        if self.plan_step is not None:
            counts = [int(v) for k, v in self.state.items() if k.endswith(".step")]
            self.plan_step[...] = max(counts, default=0)
        for p in params:
            p._version += 1  # the update wrote in place: values saved for an older backward are stale

    def _build(self, params, has_grad) -> Plan:
        graph, grads, arrays = Graph("optimizer_step"), {}, {}
        for p, name, has in zip(params, self.names, has_grad):
            ttype = TensorType(tuple(p.shape), DType.from_any(p.array.dtype))
            graph.add_state(Value(name, ttype), "param")
            arrays[name] = p.array
            if has:
                grads[name] = graph.add_input(Value(f"grad.{name}", ttype))
        groups = self.optimizer.spec({id(p): name for p, name in zip(params, self.names)})
        add_optimizer_updates(graph, grads, groups, step_per_param=True)  # skipped params keep their count
        device = backend_of(params[0].array).name
        plan = Plan(graph, {**arrays, **self.state}, device=device, kind="training",
                    param_groups=self.optimizer.param_groups)
        new = [k for k in plan.state if k.startswith("optim.") and k not in self.state]
        self.state.update({k: plan.state[k] for k in new})
        for key, _, value in self.optimizer.initial_slots(self.names):  # slots first made here
            if key in new:
                self.state[key][...] = value
        return plan
