"""Composite, cyclic and metric-driven schedulers with PyTorch 2.13's formulas: ``SequentialLR``,
``OneCycleLR``, ``CosineAnnealingWarmRestarts``, ``ReduceLROnPlateau``. Use them from
``graphc.optim.lr_scheduler`` (this module is its second half)."""
from __future__ import annotations

import math
from bisect import bisect_right
from typing import ClassVar

from ..ir.errors import GraphcError
from .lr_scheduler import LRScheduler, _plain, attach, detach

# A SequentialLR saves each child's type as its index here (plan files hold numbers only).
# Append only: saved files refer to these positions.
CHILD_TYPES = ("StepLR", "ExponentialLR", "CosineAnnealingLR", "MultiStepLR", "ConstantLR", "LinearLR", "LambdaLR",
               "CosineAnnealingWarmRestarts", "OneCycleLR")


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at the ``milestones`` epochs.

    The children are driven (and saved) by the SequentialLR: their state is kept in its
    ``state_dict()`` under ``"<i>.<key>"``, with their types in ``"_schedulers"``.

    >>> from graphc import nn, optim
    >>> from graphc.optim import lr_scheduler as S
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> warmup = S.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> sched = S.SequentialLR(opt, [warmup, S.ExponentialLR(opt, gamma=0.5)], milestones=[2])
    >>> [sched.step() or sched.get_last_lr()[0] for _ in range(3)]
    [0.75, 1.0, 0.5]
    """

    hyper = ("_milestones",)
    position = ("last_epoch", "_last_lr")
    GROUP_LISTS = ("_last_lr",)

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        schedulers = list(schedulers)
        _check_children(type(self).__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise GraphcError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                              f"number of milestone points, but got number of schedulers {len(schedulers)} and "
                              f"the number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = schedulers, list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self.recursive_undo()  # the children's constructors each took a step: take it back
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()
        for child in schedulers:
            detach(optimizer, child)  # saved inside this scheduler's state, not on their own
        attach(optimizer, self)

    @classmethod
    def blank(cls, optimizer):
        scheduler = super().blank(optimizer)
        scheduler._schedulers = None  # built from the saved types by load_state_dict
        return scheduler

    def recursive_undo(self, sched=None) -> None:
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self) -> None:
        idx = bisect_right(self._milestones, self.last_epoch + 1)
        scheduler = self._schedulers[idx]
        scheduler._ready()  # a restored LambdaLR without its function: refuse before changing anything
        self.last_epoch += 1
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)  # a child starts at its epoch 0, by its closed form where it has one
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["_schedulers"] = [_child_code(s) for s in self._schedulers]
        for i, child in enumerate(self._schedulers):
            state.update({f"{i}.{key}": value for key, value in child.state_dict().items()})
        return state

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise GraphcError(f"SequentialLR.load_state_dict: expected a dict, got {type(state).__name__}")
        own = {k: v for k, v in state.items() if "." not in k}
        codes = own.pop("_schedulers", None)
        if not isinstance(codes, list) or not all(type(c) is int and 0 <= c < len(CHILD_TYPES) for c in codes):
            raise GraphcError(f"SequentialLR state '_schedulers' must list scheduler type numbers "
                              f"(0 to {len(CHILD_TYPES) - 1}), got {str(codes)[:80]}")
        super().load_state_dict(own)
        if len(self._milestones) != len(codes) - 1:
            raise GraphcError(f"SequentialLR state has {len(codes)} schedulers for {len(self._milestones)} milestones")
        parts = _split_children(state, len(codes))
        self._schedulers = [self._child(i, code, part) for i, (code, part) in enumerate(zip(codes, parts))]

    def _child(self, index: int, code: int, state: dict) -> LRScheduler:
        """The live child ``index`` when it has the saved type (in-memory load), else a new one."""
        from .lr_scheduler import SCHEDULERS

        cls = SCHEDULERS[CHILD_TYPES[code]]
        children = self._schedulers or []
        child = children[index] if index < len(children) and type(children[index]) is cls else cls.blank(self.optimizer)
        child.load_state_dict(state)
        return child

    def check_groups(self, count: int) -> None:
        super().check_groups(count)
        for child in self._schedulers:
            child.check_groups(count)

    def describe(self) -> str:
        return super().describe() + " [" + "; ".join(child.describe() for child in self._schedulers) + "]"

    def finished(self) -> bool:
        return self.last_epoch >= (self._milestones or [0])[-1] and self._schedulers[-1].finished()


def _check_children(name: str, optimizer, schedulers: list) -> None:
    if not schedulers:
        raise GraphcError(f"{name} expects at least one scheduler, but got no scheduler.")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise GraphcError(f"{name} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise GraphcError(f"{name} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                              f"kwargs to be specified when calling `step`, but got one at index {i} in the given "
                              "schedulers sequence.")
        if isinstance(scheduler, SequentialLR):  # PyTorch accepts it, then fails at the inner one's milestone
            raise GraphcError(f"{name} does not support a SequentialLR inside it (index {i}): list its "
                              "schedulers and milestones in one SequentialLR instead")
        if scheduler.optimizer is not optimizer:
            raise GraphcError(f"{name} expects all schedulers to belong to the same optimizer, but got scheduler "
                              f"{type(scheduler).__name__} at index {i} with another optimizer.")


def _child_code(scheduler) -> int:
    name = type(scheduler).__name__
    if name not in CHILD_TYPES:
        raise GraphcError(f"SequentialLR cannot save a child {name}: only graphc's own schedulers "
                          f"({', '.join(CHILD_TYPES)}) can be saved")
    return CHILD_TYPES.index(name)


def _split_children(state: dict, count: int) -> list:
    """``{"<i>.<key>": value}`` entries grouped by child: ``[{key: value}, ...]``."""
    parts = [{} for _ in range(count)]
    for key, value in state.items():
        index, dot, rest = key.partition(".")
        if not dot:
            continue
        if not index.isdigit() or int(index) >= count:
            raise GraphcError(f"SequentialLR state has a key {key[:80]!r} for no child scheduler")
        parts[int(index)][rest] = value
    return parts


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, ``T_i`` starting at ``T_0`` and
    multiplied by ``T_mult`` at each restart. ``step(epoch)`` takes fractional epochs too.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> [sched.step() or round(sched.get_last_lr()[0], 6) for _ in range(3)]
    [0.5, 1.0, 0.5]
    """

    hyper = ("T_0", "T_mult", "eta_min")
    position = ("T_i", "T_cur", *LRScheduler.COMMON_STATE)

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise GraphcError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise GraphcError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise GraphcError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            self._jump(epoch)
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = self._current()

    def _jump(self, epoch) -> None:
        """``T_cur``/``T_i`` at an explicit (possibly fractional) epoch."""
        if epoch < 0:
            raise GraphcError(f"Expected non-negative epoch, but got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr from ``max_lr / div_factor`` up to ``max_lr`` over ``pct_start`` of
    ``total_steps``, then down to ``initial_lr / final_div_factor`` (cosine or linear); call
    ``step()`` after every batch.

    ``cycle_momentum=True`` (PyTorch's default) is refused: it changes momentum or beta1 every
    step, and those are compiled into the plan (only the learning rate is a plan input). Pass
    ``cycle_momentum=False``.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    >>> sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
    >>> [round(lr, 6) for lr in sched.get_last_lr()]
    [0.04]
    >>> for _ in range(2): sched.step()
    >>> sched.get_last_lr()
    [1.0]
    """

    hyper = ("total_steps", "pct_start", "anneal_strategy", "three_phase", "max_lrs", "min_lrs")
    GROUP_LISTS = ("base_lrs", "_last_lr", "max_lrs", "min_lrs")
    CHOICES: ClassVar[dict] = {"anneal_strategy": ("cos", "linear")}
    FLAGS = ("three_phase",)

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if cycle_momentum:
            raise GraphcError("OneCycleLR(cycle_momentum=True) is not supported: it changes momentum/beta1 every "
                              "step, and graphc compiles those into the plan (only the learning rate is a plan "
                              "input); pass cycle_momentum=False")
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise GraphcError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in self.CHOICES["anneal_strategy"]:
            raise GraphcError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.pct_start, self.anneal_strategy, self.three_phase = pct_start, anneal_strategy, bool(three_phase)
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, top in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        super().__init__(optimizer, last_epoch)

    @property
    def max_lrs(self) -> list:
        return [g["max_lr"] for g in self.optimizer.param_groups]

    @max_lrs.setter
    def max_lrs(self, values) -> None:
        self._set_groups("max_lr", values)

    @property
    def min_lrs(self) -> list:
        return [g["min_lr"] for g in self.optimizer.param_groups]

    @min_lrs.setter
    def min_lrs(self, values) -> None:
        self._set_groups("min_lr", values)

    def _set_groups(self, key: str, values) -> None:
        """Restoring: OneCycleLR keeps its peak and floor in the param groups, as PyTorch does."""
        values, groups = _plain(values), self.optimizer.param_groups
        if not isinstance(values, list) or len(values) != len(groups):
            raise GraphcError(f"OneCycleLR state has {str(values)[:60]} as {key}s for {len(groups)} parameter groups")
        for group, value in zip(groups, values):
            group[key] = value

    def _phases(self) -> list:
        """``(end_step, start key, end key)`` per phase, the keys naming param-group values."""
        if self.three_phase:
            return [(float(self.pct_start * self.total_steps) - 1, "initial_lr", "max_lr"),
                    (float(2 * self.pct_start * self.total_steps) - 2, "max_lr", "initial_lr"),
                    (self.total_steps - 1, "initial_lr", "min_lr")]
        return [(float(self.pct_start * self.total_steps) - 1, "initial_lr", "max_lr"),
                (self.total_steps - 1, "max_lr", "min_lr")]

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise GraphcError(f"Tried to step {step_num} times. The specified number of total steps is "
                              f"{self.total_steps}")
        phases, lrs = self._phases(), []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, start_key, end_key) in enumerate(phases):
                if step_num <= end_step or i == len(phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[start_key], group[end_key], pct))
                    break
                start_step = end_step
        return lrs

    def finished(self) -> bool:
        return self.last_epoch >= self.total_steps - 1


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise GraphcError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is not None and steps_per_epoch is not None:
        if not isinstance(epochs, int) or epochs <= 0:
            raise GraphcError(f"Expected positive integer epochs, but got {epochs}")
        if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
            raise GraphcError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
        return epochs * steps_per_epoch
    raise GraphcError("You must define either total_steps OR (epochs AND steps_per_epoch)")


def _per_group(name: str, optimizer, value) -> list:
    """One value per parameter group (PyTorch's ``_format_param``)."""
    count = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise GraphcError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                              f"{len(value)} values, param_groups has {count}.")
        return list(value)
    return [value] * count


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once ``metrics`` (passed to ``step``) has not improved for
    ``patience`` epochs; then wait ``cooldown`` epochs before counting again.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0]: sched.step(loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    hyper = ("mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lrs", "eps")
    position = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch", "_last_lr")
    GROUP_LISTS = ("min_lrs", "_last_lr")
    CHOICES: ClassVar[dict] = {"mode": ("min", "max"), "threshold_mode": ("rel", "abs")}

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise GraphcError("Factor should be < 1.0.")
        if mode not in self.CHOICES["mode"]:
            raise GraphcError(f"mode {mode} is unknown!")
        if threshold_mode not in self.CHOICES["threshold_mode"]:
            raise GraphcError(f"threshold mode {threshold_mode} is unknown!")
        self.optimizer = optimizer
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        self.last_epoch = 0
        self._last_lr = self._current()
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0
        attach(optimizer, self)

    @property
    def mode_worse(self) -> float:
        return math.inf if self.mode == "min" else -math.inf

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def step(self, metrics, epoch=None) -> None:
        """One epoch with validation metric ``metrics`` (a number, 0-d array or tensor)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._current()

    def _reduce_lr(self) -> None:
        for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def describe(self) -> str:
        return f"{super().describe()}, best {self.best:.6g}, {self.num_bad_epochs} bad epoch(s)"
