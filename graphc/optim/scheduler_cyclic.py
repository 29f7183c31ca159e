"""Cyclic schedules with PyTorch 2.13's formulas: ``CosineAnnealingWarmRestarts`` and
``OneCycleLR``."""
from __future__ import annotations

import math
from typing import ClassVar

from ..ir.errors import GraphcError
from .scheduler_base import LRScheduler, plain, restorable

@restorable
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

    def advance(self, epoch=None) -> None:
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


@restorable
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
        max_lrs = per_group("max_lr", optimizer, max_lr)
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
        values, groups = plain(values), self.optimizer.param_groups
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


def per_group(name: str, optimizer, value) -> list:
    """One value per parameter group (PyTorch's ``_format_param``)."""
    count = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise GraphcError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                              f"{len(value)} values, param_groups has {count}.")
        return list(value)
    return [value] * count
