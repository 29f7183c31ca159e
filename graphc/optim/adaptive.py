"""Adadelta, RMSprop and Adagrad: per-parameter adaptive step sizes, with PyTorch's
constructor checks, defaults and param_group keys. Their update rules are graph ops
(``graphc.passes.optimizers``); state slots carry PyTorch's names (``square_avg``,
``acc_delta``, ``grad_avg``, ``momentum_buffer``, ``sum``), so ``state_dict()`` has its layout.

``foreach``, ``capturable`` and ``fused`` choose between PyTorch kernels that compute the same
update; a plan has one implementation, so they are accepted and kept in ``param_groups``.
``maximize`` works; ``differentiable=True`` (autograd through the step) is refused.
"""
from __future__ import annotations

from ..ir.errors import GraphcError
from .optimizer import Optimizer


def _check_non_negative(group: dict, *keys: str) -> None:
    """PyTorch's ``if not 0.0 <= value: raise ValueError`` (NaN fails too)."""
    for key in keys:
        if not 0.0 <= group[key]:
            raise GraphcError(f"Invalid {key} value: {group[key]}")


def _refuse_differentiable(name: str, differentiable: bool) -> None:
    if differentiable:
        raise GraphcError(f"{name}(differentiable=True) is not supported: graphc runs the update inside the "
                          "compiled plan and does not differentiate through it")


class Adadelta(Optimizer):
    """Adadelta: steps scaled by ``sqrt(acc_delta + eps) / sqrt(square_avg + eps)``.

    >>> from graphc import nn, optim
    >>> opt = optim.Adadelta(nn.Linear(2, 2).parameters(), rho=0.95)
    >>> opt.param_groups[0]["lr"], opt.param_groups[0]["rho"]
    (1.0, 0.95)
    """

    kind = "adadelta"

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _refuse_differentiable("Adadelta", differentiable)
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                                  "maximize": maximize, "capturable": capturable, "foreach": foreach,
                                  "differentiable": differentiable})

    def _check(self, group):
        super()._check(group)
        if not 0.0 <= group["rho"] <= 1.0:
            raise GraphcError(f"Invalid rho value: {group['rho']}")
        _check_non_negative(group, "eps", "weight_decay")


class RMSprop(Optimizer):
    """RMSprop: steps divided by ``sqrt(square_avg) + eps`` (``centered`` subtracts the squared
    mean gradient first); optional momentum.

    >>> from graphc import nn, optim
    >>> opt = optim.RMSprop(nn.Linear(2, 2).parameters(), lr=0.01, momentum=0.9, centered=True)
    >>> opt.param_groups[0]["alpha"], opt.param_groups[0]["centered"]
    (0.99, True)
    """

    kind = "rmsprop"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _refuse_differentiable("RMSprop", differentiable)
        super().__init__(params, {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                                  "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable})

    def _check(self, group):
        super()._check(group)
        _check_non_negative(group, "eps", "momentum", "weight_decay", "alpha")


class Adagrad(Optimizer):
    """Adagrad: steps divided by ``sqrt(sum of squared gradients) + eps``; the learning rate
    decays as ``lr / (1 + (step - 1) * lr_decay)``. ``sum`` starts at ``initial_accumulator_value``.

    >>> from graphc import nn, optim
    >>> opt = optim.Adagrad(nn.Linear(2, 2).parameters(), lr=0.1, initial_accumulator_value=0.1)
    >>> opt.param_groups[0]["eps"]
    1e-10
    """

    kind = "adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _refuse_differentiable("Adagrad", differentiable)
        if fused and foreach:  # PyTorch's RuntimeError
            raise GraphcError("Adagrad: `fused` and `foreach` cannot be `True` together.")
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable, "fused": fused})

    def _check(self, group):
        super()._check(group)
        _check_non_negative(group, "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def initial_state(self, group):
        return {"sum": group["initial_accumulator_value"]}
