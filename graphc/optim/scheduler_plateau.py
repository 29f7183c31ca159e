"""``ReduceLROnPlateau`` with PyTorch 2.13's rules: lower the learning rate when a metric
stops improving (``step(metric)``)."""
from __future__ import annotations

import math
from typing import ClassVar

from ..ir.errors import GraphcError
from .scheduler_base import LRScheduler, attach, restorable
from .scheduler_cyclic import per_group

@restorable
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
        self.min_lrs = per_group("min_lr", optimizer, min_lr)
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

    def advance(self, metrics, epoch=None) -> None:
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
