"""``SequentialLR`` with PyTorch 2.13's formulas: child schedulers one after another, switching
at milestones; saved with its children nested in its own state."""
from __future__ import annotations

from bisect import bisect_right

from ..ir.errors import GraphcError
from .scheduler_base import SCHEDULERS, LRScheduler, attach, detach, restorable
from .scheduler_plateau import ReduceLROnPlateau

# A SequentialLR saves each child's type as its index here (plan files hold numbers only).
# Append only: saved files refer to these positions.
CHILD_TYPES = ("StepLR", "ExponentialLR", "CosineAnnealingLR", "MultiStepLR", "ConstantLR", "LinearLR", "LambdaLR",
               "CosineAnnealingWarmRestarts", "OneCycleLR")


@restorable
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

    def advance(self) -> None:
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
        cls = SCHEDULERS[CHILD_TYPES[code]]  # every graphc scheduler is in it once graphc.optim is imported
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
