"""Learning-rate schedulers with PyTorch 2.13's formulas (the recursive forms ``step()`` uses and
the closed forms ``SequentialLR`` and ``step(epoch)`` use), so lr sequences match PyTorch's to
the last bit. They edit ``optimizer.param_groups[i]["lr"]``, which compiled plans read every
step: no recompiling. Anything with ``param_groups`` works, including a loaded plan.

The basic schedules are here; ``graphc.optim.lr_scheduler_extra`` holds the composite and
metric-driven ones (``SequentialLR``, ``OneCycleLR``, ``CosineAnnealingWarmRestarts``,
``ReduceLROnPlateau``), re-exported below with the table that restores saved schedulers.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from typing import ClassVar

from ..ir.errors import GraphcError


class LRScheduler:
    """Base class. ``state_dict()``/``load_state_dict()`` hold everything but the optimizer, as in
    PyTorch; a training plan saves the state of the schedulers built on its optimizer, and
    ``gc.load`` rebuilds them as ``plan.lr_schedulers``, so a resumed schedule continues.

    A state dict is plain numbers and lists of numbers (what plan files hold): a setting with a
    few named values (``CHOICES``) is saved as the index of its value, a flag as 0 or 1.
    """

    hyper: tuple = ()  # the constructor's settings, saved with the state
    COMMON_STATE = ("base_lrs", "last_epoch", "_step_count", "_last_lr")
    position: tuple = COMMON_STATE  # where the schedule stands, saved after the settings
    GROUP_LISTS: tuple = ("base_lrs", "_last_lr")  # saved lists with one entry per parameter group
    CHOICES: ClassVar[dict] = {}  # setting -> its allowed strings
    FLAGS: tuple = ()  # boolean settings
    _is_initial = False  # True during the step the constructor takes (PyTorch's _initial_mode)

    def __init__(self, optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise GraphcError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                      "scheduler with last_epoch >= 0")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()
        attach(optimizer, self)

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The new learning rate of each group; every scheduler below defines its rule."""
        raise GraphcError(f"{type(self).__name__} must define get_lr()")

    def step(self, epoch=None) -> None:
        """Advance one epoch (or, deprecated in PyTorch, jump to ``epoch`` by the closed form)."""
        self._ready()
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._current()

    def _ready(self) -> None:
        """Raise, before anything changes, if this scheduler cannot step (LambdaLR without functions)."""

    def get_last_lr(self) -> list:
        return list(self._last_lr)

    def state_keys(self) -> tuple:
        return (*self.hyper, *self.position)

    def state_dict(self) -> dict:
        """Plain data: the settings and the schedule's position (no optimizer).

        >>> from graphc import nn, optim
        >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
        >>> optim.lr_scheduler.StepLR(opt, step_size=3).state_dict()["last_epoch"]
        0
        """
        return {key: self._save(key) for key in self.state_keys()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()``; unknown or missing keys are an error, not ignored."""
        expected = set(self.state_keys())
        if not isinstance(state, dict) or set(state) != expected:
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise GraphcError(f"{type(self).__name__}.load_state_dict: expected keys {sorted(expected)}, got {got}")
        for key in self.state_keys():
            self._restore(key, state[key])

    def _save(self, key: str):
        value = getattr(self, key)
        if key in self.CHOICES:
            return self.CHOICES[key].index(value)
        return int(value) if key in self.FLAGS else _plain(value)

    def _restore(self, key: str, value) -> None:
        if key in self.CHOICES or key in self.FLAGS:
            options = self.CHOICES.get(key, (False, True))
            if type(value) is not int or not 0 <= value < len(options):
                raise GraphcError(f"{type(self).__name__} state {key!r} must be an index into {list(options)}, "
                                  f"got {str(value)[:40]}")
            setattr(self, key, options[value])
        else:
            setattr(self, key, _plain(value))

    def check_groups(self, count: int) -> None:
        """Refuse state whose per-group lists do not fit ``count`` parameter groups."""
        for key in self.GROUP_LISTS:
            if len(getattr(self, key)) != count:
                raise GraphcError(f"{type(self).__name__} state has {len(getattr(self, key))} learning rates "
                                  f"({key}) for {count} parameter groups")

    @classmethod
    def blank(cls, optimizer) -> LRScheduler:
        """An instance driving ``optimizer`` with no state yet, for ``load_state_dict`` (restoring)."""
        scheduler = cls.__new__(cls)
        scheduler.optimizer = optimizer
        return scheduler

    def describe(self) -> str:
        """One line for ``graphc inspect``: where the schedule stands."""
        lrs = ", ".join(f"{lr:.6g}" for lr in self._last_lr)
        settings = ", ".join(f"{k.lstrip('_')}={getattr(self, k)}" for k in self.hyper)
        finished = " (schedule finished)" if self.finished() else ""
        return f"{type(self).__name__}({settings}): {self.last_epoch} step(s) taken{finished}, lr {lrs}"

    def finished(self) -> bool:
        """True once a schedule with an end has reached it (further steps restart or hold)."""
        return False

    def _current(self) -> list:
        return [g["lr"] for g in self.optimizer.param_groups]


def attach(owner, scheduler) -> None:
    """Record ``scheduler`` on the optimizer (or plan) it drives, so training plans save it."""
    schedulers = getattr(owner, "lr_schedulers", None)
    if isinstance(schedulers, list):
        schedulers.append(scheduler)


def detach(owner, scheduler) -> None:
    """Forget ``scheduler`` on its optimizer: another scheduler (SequentialLR) drives and saves it."""
    schedulers = getattr(owner, "lr_schedulers", None)
    if isinstance(schedulers, list):
        schedulers[:] = [s for s in schedulers if s is not scheduler]


def _plain(value):
    """Copies lists (so a state_dict never aliases live state) and checks the types are plain."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphcError(f"scheduler state must be numbers or lists of numbers, got {type(value).__name__}")
    return value


def restore(entry, optimizer) -> LRScheduler:
    """Rebuild a scheduler from a saved ``{"type", "state"}`` entry, driving ``optimizer``
    (a loaded plan). Types come from this module's own table, never imported by name."""
    kind = entry.get("type") if isinstance(entry, dict) else None
    cls = SCHEDULERS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise GraphcError(f"unknown learning-rate scheduler type {str(kind)[:80]!r} in the plan file")
    scheduler = cls.blank(optimizer)
    scheduler.load_state_dict(entry.get("state"))
    scheduler.check_groups(len(optimizer.param_groups))
    attach(optimizer, scheduler)
    return scheduler


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``, one function or one per parameter group.

    Its state is saved without the function (plan files hold data, not code): a LambdaLR that
    ``gc.load`` restores keeps its position and lr, and needs ``lr_lambdas`` set again (the
    same functions, one per group) before it can step.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))
    >>> sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        count = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != count:
                raise GraphcError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * count
        super().__init__(optimizer, last_epoch)

    @classmethod
    def blank(cls, optimizer):
        scheduler = super().blank(optimizer)
        scheduler.lr_lambdas = None  # restored from a plan file: the functions were not saved
        return scheduler

    def _ready(self) -> None:
        lambdas = self.lr_lambdas
        if not isinstance(lambdas, list) or len(lambdas) != len(self.base_lrs) or not all(map(callable, lambdas)):
            raise GraphcError("LambdaLR has no lr_lambda functions (a plan file saves the schedule's position, "
                              f"not code): set sched.lr_lambdas to a list of {len(self.base_lrs)} function(s), "
                              "the ones it was built with, before stepping")

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def describe(self) -> str:
        missing = "" if self.lr_lambdas else " [lr_lambda not saved: set .lr_lambdas to continue]"
        return super().describe() + missing


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for _ in range(4): sched.step()
    >>> opt.param_groups[0]["lr"]
    0.25
    """

    hyper = ("step_size", "gamma")

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (a repeated milestone applies
    ``gamma`` once per repetition, as PyTorch's ``Counter`` does).

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 3], gamma=0.5)
    >>> for _ in range(3): sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    hyper = ("milestones", "gamma")

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]

    def _save(self, key):
        return sorted(self.milestones.elements()) if key == "milestones" else super()._save(key)

    def _restore(self, key, value):
        if key != "milestones":
            return super()._restore(key, value)
        if not isinstance(value, list) or not all(type(m) is int for m in value):
            raise GraphcError(f"MultiStepLR state 'milestones' must be a list of integers, got {str(value)[:80]}")
        self.milestones = Counter(value)

    def finished(self) -> bool:
        return self.last_epoch >= max(self.milestones, default=0)


class ConstantLR(LRScheduler):
    """Scale the lr by ``factor`` until epoch ``total_iters``, then restore it.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> lrs = [sched.get_last_lr()[0]] + [sched.step() or sched.get_last_lr()[0] for _ in range(2)]
    >>> lrs
    [0.5, 0.5, 1.0]
    """

    hyper = ("factor", "total_iters")

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise GraphcError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._current()]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [lr * (1.0 / self.factor) for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]

    def finished(self) -> bool:
        return self.last_epoch >= self.total_iters


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> for _ in range(2): sched.step()
    >>> sched.get_last_lr()
    [1.0]
    """

    hyper = ("start_factor", "end_factor", "total_iters")

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise GraphcError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise GraphcError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        slope = self.end_factor - self.start_factor
        ratio = 1.0 + slope / (self.total_iters * self.start_factor + (self.last_epoch - 1) * slope)
        return [lr * ratio for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters) for base in self.base_lrs]

    def finished(self) -> bool:
        return self.last_epoch >= self.total_iters


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch.

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched.step(); sched.get_last_lr()
    [0.5]
    """

    hyper = ("gamma",)

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base lr to ``eta_min`` over ``T_max`` epochs (and back up
    after, following PyTorch's recursion).

    >>> from graphc import nn, optim
    >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    >>> sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> sched.step(); round(sched.get_last_lr()[0], 6)
    0.5
    """

    hyper = ("T_max", "eta_min")

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def finished(self) -> bool:
        return self.last_epoch >= self.T_max

    def get_lr(self):
        current = self._current()
        if self._is_initial:
            return current
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [lr + (base - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for lr, base in zip(current, self.base_lrs)]
        ratio = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / (
            1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
        return [ratio * (lr - self.eta_min) + self.eta_min for lr in current]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


# The composite and metric-driven schedulers build on the classes above.
from .lr_scheduler_extra import (
    CosineAnnealingWarmRestarts,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
)

SCHEDULERS = {cls.__name__: cls for cls in (
    StepLR, ExponentialLR, CosineAnnealingLR, MultiStepLR, ConstantLR, LinearLR, LambdaLR, SequentialLR,
    CosineAnnealingWarmRestarts, OneCycleLR, ReduceLROnPlateau)}
"""Every scheduler a plan file may name (``lr_schedulers[i].type``): ``gc.load`` rebuilds them."""

__all__ = ["ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ExponentialLR", "LRScheduler",
           "LambdaLR", "LinearLR", "MultiStepLR", "OneCycleLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]
