"""``graphc.nn.functional``: the ops behind the modules, with PyTorch's signatures.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> F.relu(gc.tensor([-1.0, 2.0])).numpy()
array([0., 2.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..core.tensor import Tensor


def linear(input, weight, bias=None):
    return apply("linear", [input, weight] + ([bias] if bias is not None else []))


# conv2d is declared in graphc/ops/functions_nn.py (F.conv2d below), where conv1d, written on it, lives


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return apply("leaky_relu", [input], {"negative_slope": float(negative_slope)})


def adaptive_avg_pool2d(input, output_size):
    if input.ndim == 3:  # unbatched (C, H, W), as PyTorch accepts
        return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0)
    size = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    size = tuple(int(input.shape[2 + i]) if s is None else s for i, s in enumerate(size))
    return apply("adaptive_avg_pool2d", [input], {"output_size": size})


def dropout(input, p=0.5, training=True, inplace=False):
    p = float(p)  # a probability passed to a compiled function: its plan is specialised on it
    if not 0.0 <= p <= 1.0:
        raise GraphcError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return apply("dropout", [input], {"p": float(p)})[0]


def _channel_constant(input, value):
    c = input.shape[1]
    return Tensor(np.full((int(c),), value, dtype=input.dtype.numpy))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise over all dims but dim 1. In training, batch statistics are used and the
    running stats (when given) are updated in place, as in PyTorch."""
    if input.ndim not in (2, 3, 4):
        raise ShapeError(f"batch_norm expects a 2-D, 3-D or 4-D input, got {input.ndim}-D {tuple(input.shape)}")
    weight = weight if weight is not None else _channel_constant(input, 1.0)
    bias = bias if bias is not None else _channel_constant(input, 0.0)
    if not training:
        if running_mean is None or running_var is None:
            raise GraphcError("batch_norm in eval mode needs running_mean and running_var")
        return apply("batch_norm", [input, weight, bias, running_mean, running_var], {"eps": float(eps)})
    if momentum is None:
        raise GraphcError("batch_norm momentum=None (cumulative average) is not supported; pass a float")
    mean = running_mean if running_mean is not None else _channel_constant(input, 0.0)
    var = running_var if running_var is not None else _channel_constant(input, 1.0)
    out, _, _, new_mean, new_var = apply("batch_norm_train", [input, weight, bias, mean, var],
                                         {"eps": float(eps), "momentum": float(momentum)})
    if running_mean is not None:
        assign(running_mean, new_mean)
    if running_var is not None:
        assign(running_var, new_var)
    return out


def assign(target: Tensor, new: Tensor) -> None:
    """``target <- new`` for a buffer: in place when eager, a graph update when traced."""
    if new._tracer is not None:
        new._tracer.assign(target, new)
    elif target._tracer is not None:
        target._tracer.assign(target, new)
    else:
        np.copyto(target.array, new.array if isinstance(new, Tensor) else new, casting="unsafe")


def one_hot(tensor, num_classes: int, dtype="float32"):
    return apply("one_hot", [tensor], {"num_classes": int(num_classes), "dtype": dtype})


def _constant_block(like, dims, value):
    """``dims`` filled with ``value`` in ``like``'s dtype, recorded in ``like``'s trace when it is
    traced (``dims`` may hold the batch symbol), else on ``like``'s device."""
    attrs = {"shape": list(dims), "value": float(value), "dtype": like.dtype.name}
    if like._tracer is not None:
        return like._tracer.record("full", [], attrs)
    block = apply("full", [], attrs)
    return block if str(like.device) == "cpu" else block.to(str(like.device))


def _pad_dim(input, dim: int, before: int, after: int, value):
    """Pad (or, for negative amounts, crop) one dim: a slice, then one concat with constant blocks."""
    size = input.dims[dim]
    if not isinstance(size, int):
        raise GraphcError(f"F.pad cannot pad the batch dim {size!r} of a compiled graph (its size would "
                          "depend on the batch size)")
    if size + min(before, 0) + min(after, 0) < 0:
        raise ShapeError(f"F.pad: padding ({before}, {after}) of dim {dim} (size {size}) gives a negative size")
    if before < 0 or after < 0:
        index = [slice(None)] * input.ndim
        index[dim] = slice(max(-before, 0), size - max(-after, 0))
        input = input[tuple(index)]
    parts = []
    for amount in (before, after):
        dims = list(input.dims)
        dims[dim] = amount
        parts.append(_constant_block(input, dims, value) if amount > 0 else None)
    pieces = [p for p in (parts[0], input, parts[1]) if p is not None]
    return pieces[0] if len(pieces) == 1 else apply("concat", pieces, {"dim": dim})


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)`` starting
    from the last dim, as in PyTorch; negative amounts crop. ``mode='constant'`` (any ``value``,
    default 0) pads any number of dims; ``'reflect'`` (mirror without the edge), ``'replicate'``
    (repeat the edge) and ``'circular'`` (wrap around) pad the last 1, 2 or 3 dims of a
    batched or unbatched input, with PyTorch's checks and messages. Composites of slices
    (reversed for reflect), broadcasts and concats, so the gradient comes from autodiff.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.pad(gc.tensor([[1.0, 2.0]]), (1, 2), value=-1.0).numpy()
    array([[-1.,  1.,  2., -1., -1.]], dtype=float32)
    >>> F.pad(gc.tensor([[[1.0, 2.0, 3.0]]]), (1, 2), mode="circular").numpy()
    array([[[3., 1., 2., 3., 1., 2.]]], dtype=float32)
    """
    from .functional_resample import check_pad_mode, pad_nonconstant
    pad = tuple(pad)
    if not all(isinstance(p, (int, np.integer)) for p in pad):
        raise GraphcError(f"F.pad: padding must be ints, two per padded dim; got {pad!r}")
    check_pad_mode(mode, input.ndim, pad, value)
    if mode != "constant":
        return pad_nonconstant(input, pad, mode)
    value = 0.0 if value is None else value
    out = input
    for i in range(len(pad) // 2):  # pad[0:2] is the last dim
        out = _pad_dim(out, input.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]), value)
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) input, as
    PyTorch's ``F.interpolate``: ``mode`` 'nearest', 'nearest-exact', 'linear', 'bilinear',
    'bicubic', 'trilinear' or 'area'; ``size`` or ``scale_factor`` (fractional too),
    ``align_corners``, ``recompute_scale_factor``. Written in graphc/nn/functional_resample.py
    (one constant matmul per spatial dim).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.interpolate(gc.tensor([[[1.0, 2.0]]]), scale_factor=2).numpy()
    array([[[1., 1., 2., 2.]]], dtype=float32)
    """
    from .functional_resample import interpolate as resample
    return resample(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)


from .functional_resample import pixel_shuffle, pixel_unshuffle  # noqa: E402,F401
from .functional_grid import affine_grid, grid_sample  # noqa: E402,F401


def _vector_norm(input, p, dim):
    """``||x||_p`` over ``dim`` (keepdim). The root is taken of ``where(s > 0, s, 1)`` and masked
    back to 0: its gradient at an all-zero vector is then 0, as PyTorch's norm backward gives,
    where ``sqrt``'s would be 0 / 0 = NaN."""
    size = input.abs()
    if p == float("inf"):
        return apply("max", [size], {"dims": [dim], "keepdim": True})
    if p == 1:
        return size.sum(dim=dim, keepdim=True)
    total = (input * input if p == 2 else size ** float(p)).sum(dim=dim, keepdim=True)
    positive = total > 0.0
    safe = apply("where", [positive, total, 1.0])
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return apply("where", [positive, root, 0.0])


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim`` (PyTorch's ``F.normalize``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.normalize(gc.tensor([[3.0, 4.0], [0.0, 0.0]])).numpy()
    array([[0.6, 0.8],
           [0. , 0. ]], dtype=float32)
    """
    if out is not None:
        raise GraphcError("F.normalize(out=...) is not supported: graphc never writes into tensors")
    if not p > 0:
        raise GraphcError(f"F.normalize supports p > 0 (or inf), got {p}")
    norm = _vector_norm(input, p, dim)
    return input / apply("where", [norm < eps, eps, norm])


from .losses_functional import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: E402,F401
                                cross_entropy, huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from .losses_more import (cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss,  # noqa: E402,F401
                          linear_cross_entropy, margin_ranking_loss, multi_margin_loss, multilabel_margin_loss,
                          multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
                          triplet_margin_with_distance_loss)
from .functional_more import (alpha_dropout, bilinear, channel_shuffle, cosine_similarity,  # noqa: E402,F401
                              dropout3d, feature_alpha_dropout, glu, hardshrink, pairwise_distance, pdist, rms_norm,
                              rrelu, softshrink, upsample_bilinear, upsample_nearest)
from .functional_embedding import embedding_bag  # noqa: E402,F401

# relu, sigmoid, tanh, flatten, clamp, ...: declared once in graphc/ops/functions.py for Tensor.x, gc.x and F.x;
# gelu, silu, layer_norm, embedding, conv1d, conv2d, softmax, ... in graphc/ops/functions_nn.py
from ..ops import functions as _functions  # noqa: E402,F401  (declares them)
from ..ops import functions_nn as _functions_nn  # noqa: E402,F401  (gelu, layer_norm, embedding, conv1d, ...)
from ..ops.surface import FUNCTIONAL as _FUNCTIONAL  # noqa: E402
from . import functional_pool as _functional_pool  # noqa: E402,F401  (max_pool1d/2d, avg_pool1d/2d, lp_pool, ...)
from . import functional_pool3d as _functional_pool3d  # noqa: E402,F401  (avg/max/adaptive/unpool 3-D)
from . import functional_fractional as _functional_fractional  # noqa: E402,F401  (fractional_max_pool2d/3d)

globals().update({name: fn for name, fn in _FUNCTIONAL.items() if name not in globals()})


def __getattr__(name: str):
    """``F.x`` for functions declared after this module was imported (``scaled_dot_product_attention``,
    declared by graphc/nn/attention.py, which imports this module)."""
    if name in _FUNCTIONAL:
        return _FUNCTIONAL[name]
    raise AttributeError(f"module 'graphc.nn.functional' has no attribute {name!r}")
