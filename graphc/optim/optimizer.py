"""Optimizers: ``param_groups`` and one set of update rules (``graphc.passes.optimizers``), run
three ways: appended to a plan by ``gc.compile(model, loss_fn=, optimizer=)``, recorded by a
traced ``optimizer.step()`` inside a compiled step function, or eagerly by ``step()`` on the
parameters' ``.grad`` (graphc/optim/eager.py)."""
from __future__ import annotations

from ..ir.errors import GraphcError
from ..core.tensor import Tensor
from ..core.tracer import current_trace, note_gradient_reset
from ..core.source import user_source

# Group keys that are not compiled into the plan: the learning rate (a plan input) and the
# values schedulers keep beside it (OneCycleLR's max_lr and min_lr).
NOT_COMPILED = ("params", "lr", "initial_lr", "max_lr", "min_lr")


class Optimizer:
    """Base class: ``param_groups`` as in PyTorch (a list of dicts with ``params`` and hyper-parameters).

    A compiled training plan reads each group's ``lr`` every step, so schedulers (and direct
    edits of ``param_groups[i]["lr"]``) take effect without recompiling. Other
    hyper-parameters are baked into the plan when it is compiled.
    """

    kind = ""

    def __init__(self, params, defaults: dict):
        self._gc_source = user_source()  # update nodes in plans point at the line that built the optimizer
        self.lr_schedulers: list = []  # schedulers built on this optimizer (their state is saved with plans)
        self._plan = None  # the training plan compiled with this optimizer: it holds the optimizer state
        self._param_names: list = []  # state name of each parameter, in param_groups order
        self._eager = None  # the EagerUpdate of eager step() calls: their state and update plans
        self.defaults = dict(defaults)
        params = list(params)
        if not params:
            raise GraphcError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for group in groups:
            group = {**self.defaults, **group, "params": list(group["params"])}
            for p in group["params"]:
                if not isinstance(p, Tensor) or p.is_symbolic:
                    raise GraphcError(f"{type(self).__name__} expects Parameters, got {type(p).__name__}")
            self._check(group)
            self.param_groups.append(group)

    def _check(self, group: dict) -> None:
        if not group["lr"] >= 0.0:
            raise GraphcError(f"invalid learning rate: {group['lr']}")

    def hyper(self, group: dict) -> dict:
        return {k: v for k, v in group.items() if k not in NOT_COMPILED}

    def initial_state(self, group: dict) -> dict:
        """``{slot: value}`` for optimizer state that does not start at zero (Adagrad's ``sum``)."""
        return {}

    def initial_slots(self, names: list):
        """``(state key, parameter, value)`` for every slot that does not start at zero (Adagrad's
        ``sum``); ``names`` gives each parameter's state name, in ``param_groups`` order."""
        params = iter(zip(self.params(), names))
        for group in self.param_groups:
            fills = self.initial_state(group)
            for p, name in [next(params) for _ in group["params"]]:
                for slot, value in fills.items():
                    yield f"optim.{name}.{slot}", p, value

    def spec(self, names: dict) -> list:
        """The groups as plain data for the optimizer pass (``names``: id(param) -> state name)."""
        out = []
        for group in self.param_groups:
            missing = [p for p in group["params"] if id(p) not in names]
            if missing:
                shapes = ", ".join(str(tuple(p.data.shape)) for p in missing[:5])
                raise GraphcError(f"{type(self).__name__} holds {len(missing)} parameter(s) that are not in the "
                                  f"model (shapes {shapes}): pass model.parameters() of the model being compiled")
            out.append({"kind": self.kind, "params": [names[id(p)] for p in group["params"]], "hyper": self.hyper(group),
                        "source": self._gc_source})
        return out

    def params(self) -> list:
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: ``.grad = None`` (or zeros with ``set_to_none=False``), eagerly
        or inside a compiled step function."""
        zero_grads(self.params(), set_to_none)

    def step(self, closure=None):
        """Update every parameter that has a ``.grad``, with PyTorch's formulas. Eagerly it runs
        now; inside a function being compiled it records the update into the plan. ``closure``
        (re-evaluating the loss) is called first and its result returned, as in PyTorch.

        >>> import graphc as gc
        >>> from graphc import nn, optim
        >>> layer = nn.Linear(2, 1)
        >>> opt = optim.SGD(layer.parameters(), lr=0.5)
        >>> _ = layer.bias.data.fill_(0.0)
        >>> layer(gc.ones(1, 2)).sum().backward()
        >>> opt.step()
        >>> layer.bias.numpy().tolist()
        [-0.5]
        """
        from ..core.grad_mode import enable_grad

        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        current_trace().optimizer_step(self)  # now, or as update ops of the function being traced
        return loss

    def eager_update(self):
        from .eager import EagerUpdate

        if self._eager is None:
            if self._plan is not None:  # compiled before: eager steps continue the plan's optimizer state
                arrays = self._plan.state
                state = {k: v for k, v in arrays.items() if k.startswith("optim.") and k != "optim.step"}
                plan_step = arrays.get("optim.step")
                if plan_step is not None:  # per-parameter counts start from the plan's one count
                    state.update({f"optim.{name}.step": plan_step.copy() for name in self._param_names
                                  if any(k.startswith(f"optim.{name}.") for k in state)})
                self._eager = EagerUpdate(self, self._param_names, state, plan_step)
            else:
                self._eager = EagerUpdate(self, [f"param{i}" for i in range(len(self.params()))])
                self._eager.make_initial_state()
        return self._eager

    def attach_plan(self, plan, param_names: list) -> None:
        """Called by ``gc.compile``: the plan holds this optimizer's state from now on. A second
        plan of the same optimizer (a step compiled again at another shape) shares the first's
        state arrays, so a step in either moves the one optimizer state."""
        carried = self._plan_state() if self._eager is not None or self._plan is not None else {}
        previous = self._plan
        self._plan, self._param_names = plan, list(param_names)
        plan.lr_schedulers = self.lr_schedulers  # shared: schedulers built later are saved too
        for key, _, value in self.initial_slots(self._param_names):
            if key in plan.state:  # absent for unused parameters
                plan.state[key][...] = value
        self._eager = None  # eager steps from now on share the plan's state
        if carried:  # state of earlier eager steps (or an earlier plan) carries over
            self._load_plan_state(carried, missing_ok=True)
        if previous is not None and previous is not plan:
            _share_state(previous.state, plan.state)

    def state_dict(self) -> dict:
        """PyTorch's layout: ``{"state": {index: {slot: array}}, "param_groups": [...]}`` with
        parameters as indices. The state (momentum buffers, Adam moments, ``step``) is read
        from the compiled training plan; before compiling it is empty, as in PyTorch.

        >>> from graphc import nn, optim
        >>> optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1).state_dict()["param_groups"][0]["params"]
        [0, 1]
        """
        groups, index = [], 0
        for group in self.param_groups:
            count = len(group["params"])
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": list(range(index, index + count))})
            index += count
        return {"state": self._plan_state(), "param_groups": groups}

    def _state_arrays(self) -> tuple:
        """``(arrays by state name, parameter names)`` of wherever the optimizer state lives."""
        if self._plan is not None:
            return self._plan.state, self._param_names
        if self._eager is not None:
            return self._eager.state, self._eager.names
        return {}, []

    def _plan_state(self) -> dict:
        arrays, names = self._state_arrays()
        state = {}
        step = arrays.get("optim.step")
        for i, name in enumerate(names):
            prefix = f"optim.{name}."
            slots = {k[len(prefix):]: v.copy() for k, v in arrays.items() if k.startswith(prefix)}
            if "step" in slots:  # eager steps count per parameter; PyTorch's layout has a float
                slots["step"] = float(slots["step"])
            if slots or step is not None:
                state[i] = {**slots, **({"step": float(step)} if step is not None and "step" not in slots else {})}
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore learning rates (and, once compiled, the optimizer state) from ``state_dict()``.
        Other hyper-parameters are compiled into the plan: changing them there is an error."""
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise GraphcError(f"{type(self).__name__}.load_state_dict: expected {len(self.param_groups)} "
                              "param_groups in the state dict")
        for mine, saved in zip(self.param_groups, groups):
            if len(saved.get("params", ())) != len(mine["params"]):
                raise GraphcError("load_state_dict: a parameter group has a different number of parameters")
            changed = [k for k in self.hyper(mine) if k in saved and saved[k] != mine[k]]
            if changed and self._plan is not None:
                raise GraphcError(f"load_state_dict: {changed} differ from the compiled plan's; "
                                  "only the learning rate can change after gc.compile")
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self._load_plan_state(state_dict.get("state") or {})

    def _load_plan_state(self, state: dict, missing_ok: bool = False) -> None:
        if not state:
            return
        if self._plan is None:
            return self._load_eager_state(state)
        arrays = self._plan.state
        for i, slots in state.items():
            name = self._param_names[int(i)]
            for slot, value in slots.items():
                key = "optim.step" if slot == "step" else f"optim.{name}.{slot}"
                if key not in arrays:
                    if missing_ok:  # a parameter the plan does not update has no state there
                        continue
                    raise GraphcError(f"load_state_dict: the plan has no optimizer state {key!r}")
                arrays[key][...] = value

    def _load_eager_state(self, state: dict) -> None:
        """Before any compiled plan, the state goes to the eager steps' arrays (made here)."""
        import numpy as np

        from ..executor.backends import backend_of

        eager, params = self.eager_update(), self.params()
        for i, slots in state.items():
            index = int(i)
            if not 0 <= index < len(params):
                raise GraphcError(f"load_state_dict: state for parameter {index}, the optimizer has {len(params)}")
            backend = backend_of(params[index].array)
            for slot, value in slots.items():
                if slot == "step":
                    eager.state[f"optim.{eager.names[index]}.step"] = np.asarray(int(value), np.int64)
                    continue
                array = np.asarray(value, params[index].array.dtype)
                if array.shape != tuple(params[index].shape):
                    raise GraphcError(f"load_state_dict: {slot} of parameter {index} has shape {array.shape}, the "
                                      f"parameter {tuple(params[index].shape)}")
                eager.state[f"optim.{eager.names[index]}.{slot}"] = backend.asarray(array.copy())
        eager._plans.clear()  # plans built before hold the old arrays

    def zero_gradient_keeps(self, group) -> bool:
        """Whether a zero gradient leaves a parameter of ``group`` where it was, as PyTorch leaves
        one with no gradient (a compiled branch gives zeros to the parameters of the side not
        taken). Not for optimizers with running state (momentum, Adam's moments)."""
        return False

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}: " + ", ".join(f"{k}: {v}" for k, v in g.items() if k != "params"))
        return "\n".join(lines) + "\n)"


def _share_state(old: dict, new: dict) -> None:
    """The new plan's optimizer arrays become the old plan's (same name, shape, dtype and
    device), before the new plan builds a program over them."""
    for key, array in old.items():
        mine = new.get(key)
        if (key.startswith("optim.") and mine is not None and type(mine) is type(array)
                and mine.shape == array.shape and mine.dtype == array.dtype):
            new[key] = array


def zero_grads(params, set_to_none: bool = True) -> None:
    """``.grad = None`` for each parameter, or zeros in place (symbolic zeros while tracing)."""
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None  # (inside a trace it also records that the step starts the gradient afresh)
        else:
            p.grad.zero_()  # inside a trace, the traced gradient becomes zeros
            note_gradient_reset(p)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay and Nesterov.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    >>> opt.param_groups[0]["momentum"]
    0.9
    """

    kind = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov))

    def zero_gradient_keeps(self, group) -> bool:
        """Plain SGD leaves a parameter whose gradient is zero where it was, as PyTorch leaves
        one without a gradient (momentum or weight decay would move it)."""
        return group["momentum"] == 0 and group["weight_decay"] == 0

    def _check(self, group):
        super()._check(group)
        if group["momentum"] < 0 or group["weight_decay"] < 0:
            raise GraphcError("SGD momentum and weight_decay must be >= 0")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise GraphcError("Nesterov momentum requires a momentum and zero dampening")


class Adam(Optimizer):
    """Adam (weight decay added to the gradient, as PyTorch's Adam)."""

    kind = "adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        if amsgrad:
            raise GraphcError("Adam(amsgrad=True) is not supported")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _check(self, group):
        super()._check(group)
        b1, b2 = group["betas"]
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0 and group["eps"] >= 0.0):
            raise GraphcError(f"invalid Adam betas {group['betas']} or eps {group['eps']}")


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the step)."""

    kind = "adamw"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)
