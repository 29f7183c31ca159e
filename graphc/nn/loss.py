"""Loss modules: MSELoss, CrossEntropyLoss, BCEWithLogitsLoss."""
from __future__ import annotations

from . import functional as F
from .module import Module


class MSELoss(Module):
    """Mean squared error.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> float(nn.MSELoss()(gc.tensor([1.0, 3.0]), gc.tensor([1.0, 1.0])))
    2.0
    """

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    """Softmax cross-entropy with integer class targets (or class probabilities)."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__()
        self.weight, self.ignore_index = weight, ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class BCEWithLogitsLoss(Module):
    """Sigmoid + binary cross-entropy in one numerically stable expression."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__()
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)
