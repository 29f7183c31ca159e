"""The scheduler base class: PyTorch's ``LRScheduler`` protocol (``step``, ``get_last_lr``,
``state_dict``/``load_state_dict``) and the registration of schedulers on the optimizer or plan
they drive, so training plans save them, and the table of types plan files may name."""
from __future__ import annotations

from typing import ClassVar

from ..ir.errors import GraphcError
from ..core.tracer import current_trace


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

    def step(self, *args, **kwargs) -> None:
        """Advance one epoch (or, deprecated in PyTorch, jump to ``epoch`` by the closed form).
        Not inside a compiled function: the trace refuses it (it would change the learning rate
        once, while tracing). Each scheduler's own rule is its ``advance``."""
        current_trace().scheduler_step(self, *args, **kwargs)

    def advance(self, epoch=None) -> None:
        """What ``step`` does, run now (the eager trace's action)."""
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
        return int(value) if key in self.FLAGS else plain(value)

    def _restore(self, key: str, value) -> None:
        if key in self.CHOICES or key in self.FLAGS:
            options = self.CHOICES.get(key, (False, True))
            if type(value) is not int or not 0 <= value < len(options):
                raise GraphcError(f"{type(self).__name__} state {key!r} must be an index into {list(options)}, "
                                  f"got {str(value)[:40]}")
            setattr(self, key, options[value])
        else:
            setattr(self, key, plain(value))

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


SCHEDULERS: dict[str, type] = {}
"""Every scheduler a plan file may name (``lr_schedulers[i].type``, a SequentialLR's children):
``gc.load`` rebuilds them from this table, never by importing a name. Each graphc scheduler adds
itself with :func:`restorable` where it is defined, so the modules that look types up
(``lr_scheduler.restore``, ``SequentialLR``) need no module that imports all the classes."""


def restorable(cls: type) -> type:
    """Class decorator: ``cls`` may be named in a plan file. Only graphc's own schedulers use it
    (a subclass a user writes is not restorable by name: a plan file holds data, not code)."""
    SCHEDULERS[cls.__name__] = cls
    return cls


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


def plain(value):
    """Copies lists (so a state_dict never aliases live state) and checks the types are plain."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphcError(f"scheduler state must be numbers or lists of numbers, got {type(value).__name__}")
    return value
