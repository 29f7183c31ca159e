"""More of ``graphc.nn.functional`` (issue #34): shrink and gated activations, randomized leaky
ReLU, distances (cosine similarity, pairwise, pdist), bilinear, channel shuffle, RMS norm, the
alpha and 3-D dropouts and the legacy ``upsample_*``. Composites of graph ops written as ATen
writes them, so gradients come from autodiff and plans keep their batch dim symbolic.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import is_static


def _where(cond, a, b):
    return apply("where", [cond, a, b])


def _check_p(p):
    p = float(p)  # a probability passed to a compiled function: its plan is specialised on it
    if not 0.0 <= p <= 1.0:
        raise GraphcError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def glu(input, dim=-1):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves ``a, b`` of ``dim``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.glu(gc.tensor([1.0, 0.0])).item()
    0.5
    """
    if input.ndim == 0:
        raise ShapeError("glu does not support scalars because halving size must be even")
    size = input.dims[dim]
    if not isinstance(size, int):
        raise ShapeError(f"glu: halving the symbolic dim {size} needs its size")
    if size % 2:
        raise ShapeError(f"glu: halving dimension must be even, but dimension {dim} is size {size}")
    a, b = input.split(size // 2, dim)
    return a * b.sigmoid()


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.hardshrink(gc.tensor([-1.0, 0.2, 0.7])).numpy().tolist()
    [-1.0, 0.0, 0.699999988079071]
    """
    inside = apply("logical_and", [input >= -float(lambd), input <= float(lambd)])
    return _where(inside, 0.0, input)


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.softshrink(gc.tensor([-1.0, 0.2, 1.5])).numpy().tolist()
    [-0.5, 0.0, 1.0]
    """
    lambd = float(lambd)
    if lambd < 0:
        raise GraphcError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}")
    return _where(input > lambd, input - lambd, _where(input < -lambd, input + lambd, 0.0))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: negative inputs times a slope drawn uniformly from
    ``[lower, upper]`` per element when training, times ``(lower + upper) / 2`` otherwise.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.rrelu(gc.tensor([-3.0, 2.0]), 0.25, 0.75).numpy().tolist()
    [-1.5, 2.0]
    """
    from ..ops.creation import rand_like
    if not training:
        slope = (float(lower) + float(upper)) / 2
    else:
        slope = float(lower) + (float(upper) - float(lower)) * rand_like(input).detach()
    return _where(input >= 0.0, input, input * slope)


def _broadcast_dims(a, b):
    """The broadcast shape of two tensors' dims (symbolic dims kept)."""
    da, db = list(a.dims), list(b.dims)
    n = max(len(da), len(db))
    da, db = [1] * (n - len(da)) + da, [1] * (n - len(db)) + db
    return tuple(y if x == 1 else x for x, y in zip(da, db))


def _norm_clamped(x, dim, eps):
    """``max(||x||_2, eps)`` along ``dim`` (keepdim), the clamp not seen by the gradient (PyTorch
    clamps a clone in place under no_grad). The root's gradient at a zero vector is 0."""
    total = (x * x).sum(dim, keepdim=True)
    positive = total > 0.0
    norm = _where(positive, _where(positive, total, 1.0).sqrt(), 0.0)
    return norm + (norm.clamp(min=float(eps)) - norm).detach()


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` along ``dim`` (inputs broadcast).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.cosine_similarity(gc.tensor([[2.0, 0.0], [2.0, 0.0]]), gc.tensor([[5.0, 0.0], [0.0, 3.0]])).numpy().tolist()
    [1.0, 0.0]
    """
    shape = _broadcast_dims(x1, x2)
    x1 = x1.expand(*shape) if tuple(x1.dims) != shape else x1
    x2 = x2.expand(*shape) if tuple(x2.dims) != shape else x2
    return ((x1 / _norm_clamped(x1, dim, eps)) * (x2 / _norm_clamped(x2, dim, eps))).sum(dim)


def _pnorm(x, p, dim, keepdim):
    """The p-norm along ``dim``; p = 2 with a zero-safe root (PyTorch's gradient at 0 is 0)."""
    if p in (2, 2.0):
        total = (x * x).sum(dim, keepdim=keepdim)
        positive = total > 0.0
        return _where(positive, _where(positive, total, 1.0).sqrt(), 0.0)
    return x.norm(p, dim, keepdim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.pairwise_distance(gc.tensor([[0.0, 0.0]]), gc.tensor([[3.0, 4.0]]), eps=0.0).numpy().tolist()
    [5.0]
    """
    ndim = max(x1.ndim, x2.ndim)
    diff = x1 - x2 + float(eps)
    if ndim == 0:
        return diff.abs() if p != 0 else (diff != 0).cast(diff.dtype.name)
    return _pnorm(diff, p, ndim - 1, keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of an (N, M) input, pairs ``i < j`` in row-major order
    (N (N - 1) / 2 values). The pairs are picked by one constant matmul; the output size depends
    on N, so a plan with a symbolic batch dim cannot hold it.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.pdist(gc.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).numpy().tolist()
    [5.0, 1.0, 4.242640495300293]
    """
    if input.ndim != 2:
        raise ShapeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise GraphcError("pdist only supports non-negative p values")
    n = input.dims[0]
    if not is_static(n):
        raise TraceError(f"pdist: its output has N (N - 1) / 2 rows for N = {n}, a size that depends on the "
                         "batch size; compile with a fixed batch")
    i, j = np.triu_indices(n, 1)
    pick = np.zeros((len(i), n), input.dtype.numpy)
    pick[np.arange(len(i)), i] = 1.0
    pick[np.arange(len(i)), j] -= 1.0
    diff = apply("matmul", [_constant(input, pick), input])
    return _pnorm(diff, p, 1, False)


def _constant(like, array):
    from ..executor.backends import backend_of
    if like._tracer is None:
        array = backend_of(like.array).asarray(array)
    return Tensor(array)


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.bilinear(gc.tensor([[1.0, 2.0]]), gc.tensor([[3.0]]), gc.ones(1, 2, 1)).numpy().tolist()
    [[9.0]]
    """
    if weight.ndim != 3:
        raise ShapeError(f"bilinear(): weight must be 3-dimensional, got {tuple(weight.shape)}")
    out, in1, in2 = weight.dims
    if any(is_static(d) and d != w for d, w in ((input1.dims[-1], in1), (input2.dims[-1], in2))):
        raise ShapeError(f"bilinear(): input sizes {tuple(input1.shape)}, {tuple(input2.shape)} do not match "
                         f"weight {tuple(weight.shape)}")
    # (..., 1, 1, in1) @ (out, in1, in2) -> (..., out, 1, in2), then in2 summed against x2
    mixed = apply("matmul", [input1.unsqueeze(-2).unsqueeze(-2), weight]).squeeze(-2)
    y = (mixed * input2.unsqueeze(-2)).sum(-1)
    return y + bias if bias is not None else y


def channel_shuffle(input, groups):
    """Split the channels (dim 1) into ``groups`` and interleave them.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.channel_shuffle(gc.arange(4.0).reshape(1, 4, 1), 2).flatten().numpy().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """
    if input.ndim < 3:
        raise ShapeError(f"channel_shuffle expects input to have at least 3 dimensions, but got {input.ndim}")
    groups = int(groups)
    c = input.dims[1]
    if groups <= 0 or c % groups:
        raise ShapeError(f"channel_shuffle: number of channels ({c}) must be divisible by groups ({groups})")
    rest = tuple(input.shape[2:])
    x = input.reshape(input.shape[0], groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(input.shape[0], c, *rest)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last ``len(normalized_shape)`` dims;
    ``eps`` None is the dtype's machine epsilon, as in PyTorch.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.rms_norm(gc.tensor([[2.0, -2.0]]), [2], eps=0.0).numpy().tolist()
    [[1.0, -1.0]]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    trailing = tuple(input.dims[input.ndim - len(shape):])
    if len(trailing) != len(shape) or any(is_static(d) and d != s for d, s in zip(trailing, shape)):
        raise ShapeError(f"rms_norm: normalized_shape {shape} does not match the input's trailing dims "
                         f"{tuple(input.shape)}")
    eps = float(np.finfo(input.dtype.numpy).eps) if eps is None else float(eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt() if dims else input * (
        (input * input) + eps).rsqrt()
    return out * weight if weight is not None else out


def _keep_mask(input, p, feature):
    """1 (kept, probability 1 - p) or 0, per element or per (sample, channel) when ``feature``."""
    from ..ops.functions_nn import _channel_mask
    if feature:
        return _channel_mask(input, p) * (1.0 - p)
    ones = _where(input > 0, 1.0, 1.0) if input.ndim else input * 0.0 + 1.0
    return apply("dropout", [ones], {"p": p})[0] * (1.0 - p)


def _alpha_dropout(input, p, training, feature):
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    if feature and input.ndim < 2:
        raise ShapeError("feature_alpha_dropout: feature dropout requires at least 2 dimensions in the input")
    alpha = 1.7580993408473766  # SELU's alpha * scale: dropped units go to SELU's negative saturation
    a = 1.0 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    keep = _keep_mask(input, p, feature)
    b = (keep - 1.0) * (alpha * a) + alpha * a * p
    return input * (keep * a) + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's mean and variance: dropped units are set to SELU's negative
    saturation, then an affine map restores the statistics; the identity when not training.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> x = gc.ones(3)
    >>> F.alpha_dropout(x, 0.5) is x
    True
    """
    return _alpha_dropout(input, p, training, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``alpha_dropout`` of whole channels (``input[n, c]``); the identity when not training.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.feature_alpha_dropout(gc.ones(2, 3, 4), 0.5, training=True).shape
    (2, 3, 4)
    """
    return _alpha_dropout(input, p, training, feature=True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability ``p`` and
    scale the rest by 1/(1-p); the identity when not training.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.dropout3d(gc.ones(1, 2, 1, 1, 1), 0.5, training=False).shape
    (1, 2, 1, 1, 1)
    """
    from ..ops.functions_nn import _channel_mask
    p = _check_p(p)
    if input.ndim not in (4, 5):
        raise ShapeError(f"dropout3d: expected a 4-D or 5-D input, got {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    batched = input if input.ndim == 5 else input.unsqueeze(0)
    out = batched * _channel_mask(batched, p)
    return out if input.ndim == 5 else out.squeeze(0)


def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate(..., mode='nearest')`` (PyTorch's deprecated name).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.upsample_nearest(gc.tensor([[[1.0, 2.0]]]), scale_factor=2).numpy().tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    """
    from .functional_resample import interpolate
    return interpolate(input, size, scale_factor, "nearest", None, None, False)


def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate(..., mode='bilinear', align_corners=True)`` (PyTorch's deprecated name).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.upsample_bilinear(gc.tensor([[[[0.0, 1.0]]]]), size=(1, 3)).numpy().tolist()
    [[[[0.0, 0.5, 1.0]]]]
    """
    from .functional_resample import interpolate
    return interpolate(input, size, scale_factor, "bilinear", True, None, False)
