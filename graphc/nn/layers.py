"""Layers with PyTorch's constructor signatures, defaults, parameter names and layouts:
Linear, Conv1d/Conv2d, Embedding, Flatten/Unflatten, Dropout/Dropout2d and pooling.
Activations live in activation.py, normalization layers in normalization.py."""
from __future__ import annotations

import numpy as np

from ..ops.functions_conv import conv_module_pads, padded_conv
from ..ops.functions_nn import check_embedding_options, padding_row
from ..ir.errors import GraphcError
from ..random import generator
from . import functional as F
from . import init
from .module import Module, Parameter


def int_at_least(name: str, value, minimum: int = 1) -> int:
    """Sizes must be ints (bool is not) of at least ``minimum``: a clear error, not numpy's."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GraphcError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _ntuple(value, n: int, name: str, minimum: int) -> tuple:
    """An int or an n-tuple of ints (each at least ``minimum``) as an n-tuple."""
    values = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(values) != n:
        raise GraphcError(f"{name} must be an int or a tuple of {n} ints, got {value!r}")
    for v in values:
        int_at_least(name, v, minimum)
    return values


class Linear(Module):
    """``y = x @ weight.T + bias``; weight is ``(out_features, in_features)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Linear(3, 2).weight.shape
    (2, 3)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features = int_at_least("in_features", in_features)
        self.out_features = int_at_least("out_features", out_features)
        self.weight = Parameter(init.kaiming_uniform((out_features, in_features)))
        self.bias = Parameter(init.bias_uniform((out_features, in_features), out_features)) if bias else None
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _ConvNd(Module):
    """Shared by Conv1d and Conv2d: weight ``(out, in/groups, *kernel)``, kaiming-uniform init."""

    dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise GraphcError(f"{name}: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular'; "
                              f"got {padding_mode!r}")
        for what, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            int_at_least(what, value)
        if in_channels % groups or out_channels % groups:
            raise GraphcError(f"{name}: in_channels {in_channels} and out_channels {out_channels} "
                              f"must be divisible by groups {groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, self.dims, "kernel_size", 1)
        self.stride = _ntuple(stride, self.dims, "stride", 1)
        self.dilation = _ntuple(dilation, self.dims, "dilation", 1)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, self.dims, "padding", 0)
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = conv_module_pads(name, self.padding, self.kernel_size, self.stride,
                                                                 self.dilation)
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(init.kaiming_uniform(shape))
        self.bias = Parameter(init.bias_uniform(shape, out_channels)) if bias else None
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def _conv(self, conv, x):
        """``conv`` (F.conv1d / F.conv2d) with the module's padding: non-zero modes pad first, as PyTorch."""
        return padded_conv(conv, F.pad, x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                           self.groups, self.padding_mode, self._reversed_padding_repeated_twice)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class Conv2d(_ConvNd):
    """2-D convolution over NCHW input; weight ``(out, in/groups, kH, kW)``.

    >>> from graphc import nn
    >>> nn.Conv2d(3, 8, 3, groups=1).weight.shape
    (8, 3, 3, 3)
    >>> import graphc as gc
    >>> nn.Conv2d(3, 8, 4, padding="same", padding_mode="reflect")(gc.ones(1, 3, 6, 6)).shape
    (1, 8, 6, 6)

    ``padding`` is an int, a pair, 'same' (stride 1; an even kernel puts the extra zero on the
    right, as PyTorch) or 'valid'; ``padding_mode`` 'reflect' / 'replicate' / 'circular' pads
    explicitly and then convolves unpadded, as PyTorch does.
    """

    dims = 2

    def forward(self, x):
        return self._conv(F.conv2d, x)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) input; weight ``(out, in/groups, k)``. Runs as conv2d on
    a height-1 image (F.conv1d), so it shares conv2d's kernels and fusions.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> conv = nn.Conv1d(2, 4, 3, padding=1)
    >>> conv.weight.shape, conv(gc.ones(5, 2, 7)).shape
    ((4, 2, 3), (5, 4, 7))
    """

    dims = 1

    def forward(self, x):
        return self._conv(F.conv1d, x)


class Embedding(Module):
    """A lookup table: ``weight[indices]`` for int64 indices; weight ``(num_embeddings,
    embedding_dim)`` initialised N(0, 1) with the ``padding_idx`` row zero (and that row gets no
    gradient). ``max_norm`` (an in-place renormalization) and ``scale_grad_by_freq`` are refused;
    ``sparse=True`` trains with the dense gradient, which holds the same values.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> emb = nn.Embedding(10, 3, padding_idx=0)
    >>> emb.weight.shape, emb(gc.tensor([[0, 4, 9]])).shape, emb.weight.numpy()[0].tolist()
    ((10, 3), (1, 3, 3), [0.0, 0.0, 0.0])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = int_at_least("num_embeddings", num_embeddings)
        self.embedding_dim = int_at_least("embedding_dim", embedding_dim)
        check_embedding_options(max_norm, scale_grad_by_freq)
        self.padding_idx = padding_row(padding_idx, num_embeddings)
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = None, norm_type, False, sparse
        self.weight = Parameter(self._initial_weight(_weight), requires_grad=not _freeze)
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def _initial_weight(self, weight):
        shape = (self.num_embeddings, self.embedding_dim)
        if weight is None:  # PyTorch: normal_(weight), then the padding row zeroed
            weight = generator().standard_normal(shape).astype(np.float32)
            if self.padding_idx is not None:
                weight[self.padding_idx] = 0.0
            return weight
        weight = weight.numpy() if hasattr(weight, "numpy") else np.asarray(weight)
        if weight.shape != shape:
            raise GraphcError(f"Embedding: _weight has shape {weight.shape}, expected {shape}")
        return weight.copy()

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
        """An Embedding holding a copy of the 2-D ``embeddings`` (frozen unless ``freeze=False``).

        >>> import numpy as np
        >>> from graphc import nn
        >>> emb = nn.Embedding.from_pretrained(np.eye(3, dtype=np.float32))
        >>> emb.weight.shape, emb.weight.requires_grad
        ((3, 3), False)
        """
        shape = np.shape(embeddings.numpy() if hasattr(embeddings, "numpy") else embeddings)
        if len(shape) != 2:
            raise GraphcError(f"Embedding.from_pretrained needs 2-D embeddings, got shape {tuple(shape)}")
        rows, dim = shape
        return cls(rows, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, None, self.norm_type, False, self.sparse)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}" + (
            f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` into one.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Flatten()(gc.zeros(2, 3, 4)).shape
    (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return F.flatten(x, self.start_dim, self.end_dim)


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1): Flatten's inverse.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Unflatten(1, (2, -1))(gc.zeros(5, 12)).shape
    (5, 2, 6)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if isinstance(unflattened_size, int) or not all(isinstance(d, int) for d in unflattened_size):
            raise GraphcError(f"Unflatten: unflattened_size must be a tuple or list of ints, got {unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        shape = list(x.shape)  # the batch dim stays symbolic through reshape
        dim = self.dim % max(len(shape), 1)
        return x.reshape(shape[:dim] + list(self.unflattened_size) + shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training (scaled by 1/(1-p)); identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise GraphcError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class Dropout2d(Dropout):
    """Zeroes whole channels (``x[n, c]``) with probability ``p`` in training, scaling the rest
    by 1/(1-p) as PyTorch does; identity in eval. A 3-D input is read as (N, C, L), like PyTorch.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> out = nn.Dropout2d(0.5)(gc.ones(4, 8, 3, 3)).numpy()
    >>> sorted(set(out.reshape(32, 9).std(axis=1).tolist())), sorted(set(out.ravel().tolist()))
    ([0.0], [0.0, 2.0])
    """

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training)
