"""Learning-rate schedulers with PyTorch's (recursive) formulas. They edit
``optimizer.param_groups[i]["lr"]``, which compiled plans read every step: no recompiling.
Anything with ``param_groups`` works, including a loaded plan."""
from __future__ import annotations

import math

from ..ir.errors import GraphcError


class LRScheduler:
    """Base class. ``state_dict()``/``load_state_dict()`` hold everything but the optimizer, as in
    PyTorch; a training plan saves the state of the schedulers built on its optimizer, and
    ``gc.load`` rebuilds them as ``plan.lr_schedulers``, so a resumed schedule continues."""

    hyper: tuple = ()  # the constructor's settings, saved with the state (besides COMMON_STATE)
    COMMON_STATE = ("base_lrs", "last_epoch", "_step_count", "_last_lr")

    def __init__(self, optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()
        attach(optimizer, self)

    def get_lr(self) -> list:
        """The new learning rate of each group; every scheduler below defines its rule."""
        raise GraphcError(f"{type(self).__name__} must define get_lr()")

    def step(self) -> None:
        self._step_count += 1
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        """Plain data: the settings and the schedule's position (no optimizer).

        >>> from graphc import nn, optim
        >>> opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
        >>> optim.lr_scheduler.StepLR(opt, step_size=3).state_dict()["last_epoch"]
        0
        """
        return {key: _plain(getattr(self, key)) for key in (*self.hyper, *self.COMMON_STATE)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()``; unknown or missing keys are an error, not ignored."""
        expected = {*self.hyper, *self.COMMON_STATE}
        if not isinstance(state, dict) or set(state) != expected:
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise GraphcError(f"{type(self).__name__}.load_state_dict: expected keys {sorted(expected)}, got {got}")
        for key in expected:
            setattr(self, key, _plain(state[key]))

    def describe(self) -> str:
        """One line for ``graphc inspect``: where the schedule stands."""
        lrs = ", ".join(f"{lr:.6g}" for lr in self._last_lr)
        settings = ", ".join(f"{k}={getattr(self, k)}" for k in self.hyper)
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


def _plain(value):
    """Copies lists (so a state_dict never aliases live state) and checks the types are plain."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphcError(f"scheduler state must be numbers or lists of numbers, got {type(value).__name__}")
    return value


def restore(entry, optimizer) -> "LRScheduler":
    """Rebuild a scheduler from a saved ``{"type", "state"}`` entry, driving ``optimizer``
    (a loaded plan). Types come from this module's own table, never imported by name."""
    kind = entry.get("type") if isinstance(entry, dict) else None
    cls = SCHEDULERS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise GraphcError(f"unknown learning-rate scheduler type {str(kind)[:80]!r} in the plan file")
    scheduler = cls.__new__(cls)
    scheduler.optimizer = optimizer
    scheduler.load_state_dict(entry.get("state"))
    if len(scheduler.base_lrs) != len(optimizer.param_groups):
        raise GraphcError(f"{kind} state has {len(scheduler.base_lrs)} learning rates for "
                          f"{len(optimizer.param_groups)} parameter groups")
    attach(optimizer, scheduler)
    return scheduler


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


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    hyper = ("gamma",)

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base lr to ``eta_min`` over ``T_max`` epochs."""

    hyper = ("T_max", "eta_min")

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def finished(self) -> bool:
        return self.last_epoch >= self.T_max

    def get_lr(self):
        current = self._current()
        if self.last_epoch == 0:
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


SCHEDULERS = {cls.__name__: cls for cls in (StepLR, ExponentialLR, CosineAnnealingLR)}
