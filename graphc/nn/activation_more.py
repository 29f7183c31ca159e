"""Modules over graphc/nn/functional_more.py with PyTorch's signatures, parameter names and
init: Hardshrink, Softshrink, GLU, RReLU, ChannelShuffle, RMSNorm, Bilinear, CosineSimilarity
and PairwiseDistance.

>>> import graphc as gc
>>> from graphc import nn
>>> nn.Hardshrink(0.5)(gc.tensor([0.2, -1.0])).numpy().tolist()
[0.0, -1.0]
"""
from __future__ import annotations

import math

import numpy as np

from . import functional as F
from . import init
from .layers import int_at_least
from .module import Module, Parameter


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Hardshrink(0.5)(gc.tensor([0.2, -1.0])).numpy().tolist()
    [0.0, -1.0]
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return F.hardshrink(x, self.lambd)


class Softshrink(Module):
    """``x`` moved ``lambd`` towards 0, 0 inside ``[-lambd, lambd]``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softshrink(0.5)(gc.tensor([1.5, 0.2])).numpy().tolist()
    [1.0, 0.0]
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return F.softshrink(x, self.lambd)


class GLU(Module):
    """Gated linear unit over ``dim`` (default -1).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.GLU()(gc.tensor([1.0, 0.0])).item()
    0.5
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.glu(x, self.dim)


class RReLU(Module):
    """Randomized leaky ReLU: random slopes in ``[lower, upper]`` when training, their mean in eval.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.RReLU(0.25, 0.75).eval()(gc.tensor([-2.0])).item()
    -1.0
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x):
        return F.rrelu(x, self.lower, self.upper, self.training)


class ChannelShuffle(Module):
    """Interleave the channels (dim 1) of ``groups`` groups.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ChannelShuffle(2)(gc.arange(4.0).reshape(1, 4, 1)).flatten().numpy().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        return F.channel_shuffle(x, self.groups)


class RMSNorm(Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last ``len(normalized_shape)`` dims; weight
    (ones) when ``elementwise_affine``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.RMSNorm(2, eps=0.0)(gc.tensor([[2.0, -2.0]])).numpy().tolist()
    [[1.0, -1.0]]
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = Parameter(np.ones(shape, np.float32)) if elementwise_affine else None
        self.to(device=device, dtype=dtype)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Bilinear(Module):
    """``y = x1^T W x2 + b``; weight ``(out, in1, in2)`` and bias uniform in +-1/sqrt(in1), as PyTorch.

    >>> from graphc import nn
    >>> nn.Bilinear(3, 2, 5).weight.shape
    (5, 3, 2)
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        for name, v in (("in1_features", in1_features), ("in2_features", in2_features),
                        ("out_features", out_features)):
            int_at_least(name, v)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1.0 / math.sqrt(in1_features)
        self.weight = Parameter(init.uniform((out_features, in1_features, in2_features), bound))
        self.bias = Parameter(init.uniform((out_features,), bound)) if bias else None
        self.to(device=device, dtype=dtype)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)


class CosineSimilarity(Module):
    """``F.cosine_similarity`` along ``dim``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.CosineSimilarity()(gc.tensor([[2.0, 0.0]]), gc.tensor([[0.0, 3.0]])).numpy().tolist()
    [0.0]
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance``: ``||x1 - x2 + eps||_p`` over the last dim.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.PairwiseDistance(eps=0.0)(gc.tensor([[0.0, 0.0]]), gc.tensor([[3.0, 4.0]])).numpy().tolist()
    [5.0]
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
