"""Normalization layers: BatchNorm1d/2d, LayerNorm, GroupNorm, InstanceNorm1d/2d/3d and
LocalResponseNorm, with PyTorch's parameter and buffer names, shapes and initial values
(weight 1, bias 0)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError, ShapeError
from . import functional as F
from .layers import int_at_least
from .module import Module, Parameter


def _affine_params(module, shape, weight: bool, bias: bool) -> None:
    module.weight = Parameter(np.ones(shape, np.float32)) if weight else None
    module.bias = Parameter(np.zeros(shape, np.float32)) if weight and bias else None


def _norm_base(module, num_features, eps, momentum, affine, track_running_stats, bias, device, dtype) -> None:
    """What batch and instance norms share (PyTorch's ``_NormBase``): the hyper-parameters, the
    affine parameters, the running statistics when tracked, then placement and dtype."""
    int_at_least("num_features", num_features)
    module.num_features, module.eps, module.momentum = num_features, eps, momentum
    module.affine, module.track_running_stats = affine, track_running_stats
    _affine_params(module, num_features, affine, bias)
    if track_running_stats:
        module.register_buffer("running_mean", np.zeros(num_features, np.float32))
        module.register_buffer("running_var", np.ones(num_features, np.float32))
        module.register_buffer("num_batches_tracked", np.array(0, np.int64))
    else:
        module.running_mean = module.running_var = module.num_batches_tracked = None
    module.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built


class _BatchNorm(Module):
    _ranks: tuple = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, bias=True):
        super().__init__()
        if momentum is None:
            raise GraphcError(f"{type(self).__name__}(momentum=None) is not supported; pass a float")
        _norm_base(self, num_features, eps, momentum, affine, track_running_stats, bias, device, dtype)

    def _check_input(self, x) -> None:
        if x.ndim not in self._ranks:
            raise ShapeError(f"{type(self).__name__} expects a {' or '.join(f'{r}-D' for r in self._ranks)} "
                             f"input, got {x.ndim}-D {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}({self.num_features}) got {x.shape[1]} channels")

    def forward(self, x):
        self._check_input(x)
        use_batch_stats = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            F.assign(self.num_batches_tracked, self.num_batches_tracked + 1)
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_batch_stats, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input.

    >>> from graphc import nn
    >>> list(nn.BatchNorm1d(3).state_dict())
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input.

    >>> from graphc import nn
    >>> nn.BatchNorm2d(4).running_var.shape
    (4,)
    """
    _ranks = (4,)


class LayerNorm(Module):
    """Normalize each sample over its last dims (``normalized_shape``: an int or a tuple), then
    ``* weight + bias`` of that shape. Train and eval compute the same (no running stats).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> ln = nn.LayerNorm(4)
    >>> [k for k in ln.state_dict()], ln.weight.shape
    (['weight', 'bias'], (4,))
    >>> ln(gc.tensor([[1.0, 1.0, 3.0, 3.0]])).numpy().round(3).tolist()
    [[-1.0, -1.0, 1.0, 1.0]]
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        for d in shape:
            int_at_least("normalized_shape entries", d)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        _affine_params(self, shape, elementwise_affine, bias)
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalize each sample's channels in ``num_groups`` groups, then ``* weight + bias`` per
    channel (``affine``). Train and eval compute the same (no running stats).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> gn = nn.GroupNorm(2, 4)
    >>> gn(gc.tensor([[1.0, 3.0, 5.0, 9.0]])).numpy().round(3).tolist()
    [[-1.0, 1.0, -1.0, 1.0]]
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, bias: bool = True):
        super().__init__()
        int_at_least("num_groups", num_groups)
        int_at_least("num_channels", num_channels)
        if num_channels % num_groups:
            raise GraphcError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                              f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_params(self, num_channels, affine, bias)
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm({self.num_groups}, {self.num_channels}) expects (N, {self.num_channels}, *) "
                             f"input, got {tuple(x.shape)}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    _rank: int = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, bias: bool = True):
        super().__init__()
        _norm_base(self, num_features, eps, momentum, affine, track_running_stats, bias, device, dtype)

    def forward(self, x):
        name = type(self).__name__
        if x.ndim not in (self._rank, self._rank + 1):
            raise ShapeError(f"{name}: expected {self._rank}D or {self._rank + 1}D input, got {x.ndim}D "
                             f"{tuple(x.shape)}")
        unbatched = x.ndim == self._rank
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features and (self.affine or self.track_running_stats):
            raise ShapeError(f"{name}({self.num_features}) expected input's size at dim 1 to match num_features "
                             f"({self.num_features}), but got {x.shape[1]}")
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)  # (PyTorch's None)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or (C, L): each sample's channel normalized over L.
    ``affine`` and ``track_running_stats`` default to False, as in PyTorch.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.InstanceNorm1d(2)(gc.tensor([[[1.0, 3.0], [2.0, 6.0]]])).numpy().round(3).tolist()
    [[[-1.0, 1.0], [-1.0, 1.0]]]
    """
    _rank = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) or (C, H, W).

    >>> from graphc import nn
    >>> list(nn.InstanceNorm2d(3, affine=True, track_running_stats=True).state_dict())
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """
    _rank = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or (C, D, H, W).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.InstanceNorm3d(2)(gc.randn(1, 2, 2, 2, 2)).shape
    (1, 2, 2, 2, 2)
    """
    _rank = 4


class LocalResponseNorm(Module):
    """Divide each value by ``(k + alpha / size * sum of squares over size neighbouring channels)
    ** beta`` (AlexNet's normalization).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.LocalResponseNorm(2, alpha=1.0, beta=1.0, k=0.0)(gc.ones(1, 3, 1, 1)).numpy().ravel().tolist()
    [2.0, 1.0, 1.0]
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
