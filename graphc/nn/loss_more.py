"""The loss modules of graphc/nn/losses_more.py with PyTorch's constructor signatures and
defaults: CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss,
MultiMarginLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, PoissonNLLLoss,
SoftMarginLoss, TripletMarginLoss and TripletMarginWithDistanceLoss (``weight`` is a buffer,
as in PyTorch).

>>> import graphc as gc
>>> from graphc import nn
>>> nn.SoftMarginLoss(reduction="sum")(gc.tensor([0.0, 0.0]), gc.tensor([1.0, -1.0])).item() == 2 * 0.6931471824645996
True
"""
from __future__ import annotations

from . import losses_more as L
from .loss import _Loss, _WeightedLoss


class CosineEmbeddingLoss(_Loss):
    """``F.cosine_embedding_loss`` (``forward(input1, input2, target)``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> x = gc.tensor([[1.0, 0.0]])
    >>> nn.CosineEmbeddingLoss()(x, x, gc.tensor([1.0])).item()
    0.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return L.cosine_embedding_loss(input1, input2, target, self.margin, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``F.gaussian_nll_loss`` (``forward(input, target, var)``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.GaussianNLLLoss()(gc.tensor([1.0]), gc.tensor([3.0]), gc.tensor([2.0])).item(), 4)
    1.3466
    """

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return L.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``F.hinge_embedding_loss``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.HingeEmbeddingLoss()(gc.tensor([2.0]), gc.tensor([-1.0])).item()
    0.0
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return L.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``F.margin_ranking_loss`` (``forward(input1, input2, target)``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.MarginRankingLoss()(gc.tensor([1.0]), gc.tensor([2.0]), gc.tensor([1.0])).item()
    1.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return L.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """``F.multi_margin_loss`` with ``p``, ``margin`` and a per-class ``weight`` buffer.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.MultiMarginLoss()(gc.tensor([[0.1, 0.2, 0.4, 0.8]]), gc.tensor([3])).item(), 4)
    0.325
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return L.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """``F.multilabel_margin_loss``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.MultiLabelMarginLoss()(gc.tensor([[0.1, 0.2, 0.4, 0.8]]), gc.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """

    def forward(self, input, target):
        return L.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``F.multilabel_soft_margin_loss`` with a per-class ``weight`` buffer.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.MultiLabelSoftMarginLoss()(gc.tensor([[0.0, 0.0]]), gc.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return L.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """``F.poisson_nll_loss``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.PoissonNLLLoss()(gc.tensor([0.0]), gc.tensor([2.0])).item()
    1.0
    """

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return L.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``F.soft_margin_loss``: ``log(1 + exp(-target * input))``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.SoftMarginLoss()(gc.tensor([0.0]), gc.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return L.soft_margin_loss(input, target, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``F.triplet_margin_loss`` (``forward(anchor, positive, negative)``).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> a = gc.tensor([[0.0, 0.0]])
    >>> nn.TripletMarginLoss(eps=0.0)(a, gc.tensor([[1.0, 0.0]]), gc.tensor([[3.0, 0.0]])).item()
    0.0
    """

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``F.triplet_margin_with_distance_loss`` with any ``distance_function`` (default pairwise).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> a = gc.tensor([[0.0, 0.0]])
    >>> nn.TripletMarginWithDistanceLoss()(a, a, a).item()
    1.0
    """

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(None, None, reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)
