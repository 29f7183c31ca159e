"""``nn.SyncBatchNorm``: batch norm whose training statistics cover the global batch of a
data-parallel job (graphc.distributed), as PyTorch's."""
from __future__ import annotations

import math

from ..core.grad_mode import no_grad
from ..core.dispatch import apply
from . import functional as F
from .normalization import _BatchNorm


def sync_batch_norm(x, running_mean, running_var, weight, bias, momentum: float, eps: float):
    """Normalize ``x`` with the mean and variance of every process's batch together: each
    process sums its per-channel ``x`` and ``x*x`` and counts its elements, and one
    ``allreduce`` (one message) adds them up. Autodiff gives the backward: the allreduce's
    gradient is an allreduce of the cotangents, which is how PyTorch's SyncBatchNorm reduces
    its ``sum_dy`` terms. In a single process the allreduce is the identity, so this is batch norm.

    The variance is E[x^2] - mean^2 over the global batch (one message instead of two); in
    float32 that is exact to about 1e-7 of E[x^2], fine for activations of moderate mean.
    """
    dims = [0] + list(range(2, x.ndim))
    per_channel = [1, x.dims[1]] + [1] * (x.ndim - 2)
    # the local element count as a tensor (the batch dim may be symbolic): N entries of H*W each
    per_sample = F._constant_block(x, [x.dims[0]], float(math.prod(x.dims[2:])))
    total, total_sq, count = apply("allreduce", [x.sum(dims), (x * x).sum(dims), per_sample.sum()], {"op": "sum"})
    mean = total / count
    var = total_sq / count - mean * mean
    scale = (var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    out = (x - mean.reshape(per_channel)) * scale.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    if running_mean is not None:
        with no_grad():  # PyTorch's running variance is the unbiased one
            F.assign(running_mean, running_mean * (1 - momentum) + mean * momentum)
            F.assign(running_var, running_var * (1 - momentum) + var * (count / (count - 1)) * momentum)
    return out


class SyncBatchNorm(_BatchNorm):
    """Batch norm over the global batch of a data-parallel job: 2 processes x batch 16 train
    as 1 process x batch 32. In eval mode (or without a process group) it is batch norm.

    >>> from graphc import nn
    >>> model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)))
    >>> type(model[1]).__name__, list(model[1].state_dict())[:2]
    ('SyncBatchNorm', ['weight', 'bias'])
    """
    _ranks = (2, 3, 4)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias)

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        self._check_input(x)
        if self.track_running_stats:
            F.assign(self.num_batches_tracked, self.num_batches_tracked + 1)
        return sync_batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.momentum, self.eps)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm1d/2d replaced by a SyncBatchNorm holding the same
        parameters and buffers (the same tensors), as PyTorch's."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            sync = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats)
            for name in ("weight", "bias"):
                setattr(sync, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                if getattr(module, name) is not None:
                    sync.register_buffer(name, getattr(module, name))
            sync.train(module.training)
            return sync
        for name, child in list(module.named_children()):
            setattr(module, name, cls.convert_sync_batchnorm(child, process_group))
        return module
