"""Loss modules with PyTorch's constructor signatures, defaults and buffers (``weight`` and
``pos_weight`` are buffers, so they appear in ``state_dict`` as in PyTorch). Each forwards to
the function of the same name in ``graphc.nn.functional``."""
from __future__ import annotations

from . import losses_functional as L
from .module import Module


class _Loss(Module):
    """Holds ``reduction``; the deprecated ``size_average`` / ``reduce`` map onto it as in PyTorch."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = L._legacy_reduction(size_average, reduce, reduction)

    def __call__(self, input, target, *args, **kwargs):
        # numpy inputs and targets too, as every module takes them
        return super().__call__(L.as_loss_tensor(input), L.as_loss_tensor(target), *args, **kwargs)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.MSELoss()(gc.tensor([1.0, 3.0]), gc.tensor([1.0, 1.0])))
    2.0
    """

    def forward(self, input, target):
        return L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.L1Loss(reduction="sum")(gc.tensor([1.0, 3.0]), gc.tensor([2.0, 1.0])))
    3.0
    """

    def forward(self, input, target):
        return L.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta`` in |input - target|, linear above (``F.smooth_l1_loss``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.SmoothL1Loss(beta=0.5)(gc.tensor([0.25, 2.0]), gc.tensor([0.0, 0.0])))
    0.90625
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return L.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta`` in |input - target|, ``delta``-scaled linear above (``F.huber_loss``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.HuberLoss(delta=2.0)(gc.tensor([1.0, 4.0]), gc.tensor([0.0, 0.0])))
    3.25
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return L.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of integer class targets, for ``log_softmax`` outputs.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.NLLLoss()(gc.tensor([[-0.5, -1.0], [-2.0, -0.25]]), gc.tensor([0, 1])))
    0.375
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return L.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy with integer class targets (or class probabilities); per-class
    ``weight``, ``ignore_index`` and ``label_smoothing`` as in PyTorch.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> loss = nn.CrossEntropyLoss(weight=gc.tensor([1.0, 3.0]))
    >>> round(float(loss(gc.tensor([[2.0, 0.0], [0.0, 2.0]]), gc.tensor([0, 1]))), 4)
    0.1269
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return L.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities in [0, 1] (logs clamped to >= -100, as in PyTorch).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(float(nn.BCELoss()(gc.tensor([0.5, 1.0]), gc.tensor([1.0, 1.0]))), 4)
    0.3466
    """

    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross-entropy in one numerically stable expression; ``pos_weight``
    scales the positive term per class.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(float(nn.BCEWithLogitsLoss(pos_weight=gc.tensor([2.0]))(gc.tensor([0.0]), gc.tensor([1.0]))), 4)
    1.3863
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return L.binary_cross_entropy_with_logits(input, target, weight=self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probability ``input`` from ``target``; use
    ``reduction='batchmean'`` for the mathematical KL divergence.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> p = gc.tensor([[0.25, 0.75]])
    >>> round(float(nn.KLDivLoss(reduction="batchmean")(gc.tensor([[0.5, 0.5]]).log(), p)), 4)
    0.1308
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return L.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
