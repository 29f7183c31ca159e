"""Learning-rate schedulers with PyTorch 2.13's formulas (the recursive forms ``step()`` uses and
the closed forms ``SequentialLR`` and ``step(epoch)`` use), so lr sequences match PyTorch's to
the last bit. They edit ``optimizer.param_groups[i]["lr"]``, which compiled plans read every
step: no recompiling. Anything with ``param_groups`` works, including a loaded plan.

The base class is in ``scheduler_base``; the basic schedules are here; ``scheduler_sequential``
(``SequentialLR``), ``scheduler_cyclic`` (``CosineAnnealingWarmRestarts``, ``OneCycleLR``) and
``scheduler_plateau`` (``ReduceLROnPlateau``) hold the rest, re-exported below with the table
that restores saved schedulers (filled in scheduler_base as each class is defined).
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter

from ..ir.errors import GraphcError
from .scheduler_base import SCHEDULERS, LRScheduler, attach, detach, plain, restorable  # noqa: F401  (re-exported)


@restorable
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


@restorable
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


@restorable
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


@restorable
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


@restorable
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


@restorable
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


@restorable
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
from .scheduler_cyclic import CosineAnnealingWarmRestarts, OneCycleLR  # noqa: E402
from .scheduler_plateau import ReduceLROnPlateau  # noqa: E402
from .scheduler_sequential import SequentialLR  # noqa: E402

# SCHEDULERS (re-exported from scheduler_base): every class above and these three, added by @restorable.


def restore(entry, optimizer) -> LRScheduler:
    """Rebuild a scheduler from a saved ``{"type", "state"}`` entry, driving ``optimizer``
    (a loaded plan). Types come from the ``SCHEDULERS`` table, never imported by name."""
    kind = entry.get("type") if isinstance(entry, dict) else None
    cls = SCHEDULERS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise GraphcError(f"unknown learning-rate scheduler type {str(kind)[:80]!r} in the plan file")
    scheduler = cls.blank(optimizer)
    scheduler.load_state_dict(entry.get("state"))
    scheduler.check_groups(len(optimizer.param_groups))
    attach(optimizer, scheduler)
    return scheduler


__all__ = ["ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ExponentialLR", "LRScheduler",
           "LambdaLR", "LinearLR", "MultiStepLR", "OneCycleLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]
