"""Neural-network functions declared once (graphc.ops.surface) on the surfaces PyTorch has them on:
activations (``F.gelu``, ``F.silu``, ...), ``layer_norm``/``group_norm``, ``conv1d``,
``dropout2d``, ``embedding``, and ``erf``.

Composites are written in existing ops, so autodiff derives their gradient; ``erf``,
``embedding`` and ``hardtanh`` (relu6: one clip pass, not four) are primitives (registry ops
with their own vjp). ``inplace=`` is accepted where
PyTorch has it and ignored: graphc never mutates a tensor, so the result is the same value.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> F.relu6(gc.tensor([-1.0, 3.0, 8.0])).numpy().tolist()
[0.0, 3.0, 6.0]
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from .functions import clamp, exp, log1p, rsqrt, sigmoid, tanh, where
from ..ir.errors import GraphcError, ShapeError
from .surface import torchsymbol
from ..core.tensor import Tensor

_F_ONLY = {"method": False, "top": False}  # torch.nn.functional.x only
_F_AND_TOP = {"method": False}  # torch.x and torch.nn.functional.x


# ---- primitives -----------------------------------------------------------------------------
@torchsymbol(functional=False)
def erf(input):
    """The error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x (a primitive:
    numpy has no erf, so the kernel evaluates Cody's rational approximations in float64).

    >>> import graphc as gc
    >>> round(gc.erf(gc.tensor([0.5])).item(), 6)
    0.5205
    """
    return apply("erf", [input])


@torchsymbol(**_F_ONLY)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` (num_embeddings, dim) picked by the int64 ``input``: shape
    ``input.shape + (dim,)``. The ``padding_idx`` row gets no gradient. ``sparse=True`` is
    accepted and gives the dense gradient (the same values); ``max_norm`` (which rewrites the
    weight in place) and ``scale_grad_by_freq`` are refused. Not ``gc.embedding``: PyTorch's
    ``torch.embedding`` takes ``(weight, input)``, the other order.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> w = gc.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> F.embedding(gc.tensor([[2, 1]]), w).numpy().tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    check_embedding_options(max_norm, scale_grad_by_freq)
    return apply("embedding", [input, weight], {"padding_idx": padding_row(padding_idx, weight.shape[0])})


def check_embedding_options(max_norm, scale_grad_by_freq) -> None:
    """Refuse the embedding options graphc does not implement (F.embedding and nn.Embedding)."""
    if max_norm is not None:
        raise GraphcError("embedding(max_norm=...) renormalizes the weight in place; graphc never mutates "
                          "tensors, so it is not supported")
    if scale_grad_by_freq:
        raise GraphcError("embedding(scale_grad_by_freq=True) is not supported")


def padding_row(padding_idx, num_embeddings: int):
    """PyTorch's ``padding_idx`` as a row number (negative counts from the end), or None."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or \
            not -num_embeddings <= padding_idx < num_embeddings:
        raise GraphcError(f"padding_idx must be an int within num_embeddings ({num_embeddings}), got {padding_idx!r}")
    return padding_idx % num_embeddings


# ---- activations ----------------------------------------------------------------------------
@torchsymbol(**_F_ONLY)
def gelu(input, approximate="none"):
    """x * Phi(x) with Phi the standard normal CDF: ``0.5 x (1 + erf(x / sqrt 2))``, or with
    ``approximate='tanh'`` ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.gelu(gc.tensor([1.0])).item(), 4), round(F.gelu(gc.tensor([1.0]), approximate="tanh").item(), 4)
    (0.8413, 0.8412)
    """
    if approximate == "none":
        return 0.5 * input * (1.0 + erf(input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = (input + 0.044715 * (input * input * input)) * math.sqrt(2.0 / math.pi)
        return 0.5 * input * (1.0 + tanh(inner))
    raise GraphcError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@torchsymbol(**_F_ONLY)
def silu(input, inplace=False):
    """x * sigmoid(x) (also called swish).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.silu(gc.tensor([1.0])).item(), 4)
    0.7311
    """
    return input * sigmoid(input)


@torchsymbol(**_F_ONLY)
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x limited to [min_val, max_val]. Unlike ``clamp``, the gradient is zero at the bounds
    themselves (PyTorch's hardtanh backward passes it on the open interval only).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.hardtanh(gc.tensor([-3.0, 0.5, 2.0])).numpy().tolist()
    [-1.0, 0.5, 1.0]
    """
    if min_val > max_val:
        raise GraphcError(f"hardtanh: min_val {min_val} is greater than max_val {max_val}")
    return apply("hardtanh", [input], {"min_val": float(min_val), "max_val": float(max_val)})


@torchsymbol(**_F_ONLY)
def relu6(input, inplace=False):
    """min(max(x, 0), 6): ``hardtanh(x, 0, 6)``, so the gradient at 0 is 0 as for relu.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.relu6(gc.tensor([-1.0, 7.0])).numpy().tolist()
    [0.0, 6.0]
    """
    return hardtanh(input, 0.0, 6.0)


@torchsymbol(**_F_ONLY)
def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x) - 1) otherwise. exp sees min(x, 0): the branch not taken
    must stay finite, or its zero gradient times exp's inf would be NaN.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> [round(v, 4) for v in F.elu(gc.tensor([-1.0, 2.0])).numpy().tolist()]
    [-0.6321, 2.0]
    """
    return where(input > 0, input, alpha * (exp(clamp(input, max=0.0)) - 1.0))


@torchsymbol(**_F_ONLY)
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's switch
    to the linear function for numerical stability). exp sees beta x capped at the
    threshold, so the branch not taken stays finite (and so does its gradient).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> [round(v, 4) for v in F.softplus(gc.tensor([0.0, 30.0])).numpy().tolist()]
    [0.6931, 30.0]
    """
    scaled = input * beta
    smooth = log1p(exp(clamp(scaled, max=threshold))) / beta
    return where(scaled > threshold, input, smooth)


@torchsymbol(**_F_ONLY)
def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6. Through ``hardtanh``, so the gradient switches as PyTorch's does:
    0 up to x = -3, (2x + 3) / 6 strictly between -3 and 3, and 1 from x = 3 on.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.hardswish(gc.tensor([-4.0, 0.0, 4.0])).numpy().tolist()
    [-0.0, 0.0, 4.0]
    """
    return input * hardtanh(input + 3.0, 0.0, 6.0) / 6.0


# ---- normalization --------------------------------------------------------------------------
def _normalize(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over ``dims`` (biased variance, as PyTorch normalizes)."""
    centered = x - x.mean(dims, keepdim=True)
    var = (centered * centered).mean(dims, keepdim=True)
    return centered * rsqrt(var + eps)


def _affine(x, weight, bias):
    if weight is not None:
        x = x * weight
    return x + bias if bias is not None else x


@torchsymbol(**_F_AND_TOP)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last ``len(normalized_shape)`` dims, then ``* weight + bias``
    (both of ``normalized_shape``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.layer_norm(gc.tensor([[1.0, 3.0]]), (2,)).numpy().round(4).tolist()
    [[-1.0, 1.0]]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or len(shape) > input.ndim or list(input.shape[-len(shape):]) != list(shape):
        raise ShapeError(f"layer_norm: normalized_shape {shape} does not match the trailing dims of an input "
                         f"of shape {tuple(input.shape)}")
    return _affine(_normalize(input, tuple(range(-len(shape), 0)), eps), weight, bias)


@torchsymbol(**_F_AND_TOP)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Split the channels of (N, C, *) into ``num_groups`` groups and normalize each group of
    each sample, then ``* weight + bias`` per channel.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.group_norm(gc.tensor([[1.0, 3.0, 5.0, 9.0]]), 2).numpy().round(4).tolist()
    [[-1.0, 1.0, -1.0, 1.0]]
    """
    if input.ndim < 2:
        raise ShapeError(f"group_norm expects an input of shape (N, C, *), got {tuple(input.shape)}")
    channels = input.shape[1]
    if num_groups < 1 or channels % num_groups:
        raise GraphcError(f"group_norm: {channels} channels cannot be split into {num_groups} groups")
    grouped = input.reshape(input.shape[0], num_groups, -1)  # the batch dim stays symbolic
    out = _normalize(grouped, (2,), eps).reshape(input.shape)
    per_channel = [channels] + [1] * (input.ndim - 2)
    return _affine(out, None if weight is None else weight.reshape(per_channel),
                   None if bias is None else bias.reshape(per_channel))


# ---- convolution and dropout ----------------------------------------------------------------
def _implicit_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1  # PyTorch's legacy choice when dim is None


@torchsymbol()
def softmax(input, dim=None, dtype=None):
    """Softmax over ``dim`` (``F.softmax``'s legacy implicit dim when None); ``dtype`` casts the
    input first, as PyTorch's.

    >>> import graphc as gc
    >>> gc.tensor([[0.0, 0.0]]).softmax(-1).numpy().tolist()
    [[0.5, 0.5]]
    """
    input = input if dtype is None else input.cast(dtype)
    return apply("softmax", [input], {"dim": _implicit_dim(input.ndim) if dim is None else dim})


@torchsymbol()
def log_softmax(input, dim=None, dtype=None):
    """``log(softmax(x))`` computed stably, over ``dim`` as :func:`softmax`."""
    input = input if dtype is None else input.cast(dtype)
    return apply("log_softmax", [input], {"dim": _implicit_dim(input.ndim) if dim is None else dim})


def _pair(v, what="argument") -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(i, int) for i in v):
        raise GraphcError(f"{what} must be an int or a pair of ints, got {v!r}")
    return v


@torchsymbol(**_F_ONLY)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) with weight (out, C/groups, kh, kw), the ``conv2d``
    primitive. Declared here rather than in graphc.nn.functional so that ``conv1d`` below can
    call it without this module importing graphc.nn (which imports this module).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv2d(gc.ones(1, 2, 5, 5), gc.ones(3, 2, 3, 3), padding="same").shape
    (1, 3, 5, 5)
    """
    if input.ndim == 3:  # unbatched (C, H, W), as PyTorch accepts
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    kernel = tuple(weight.shape[2:])
    uneven = ()
    if isinstance(padding, str):
        padding, uneven = _string_padding(padding, kernel, _pair(stride, "stride"), _pair(dilation, "dilation"))
    attrs = {"stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
             "dilation": _pair(dilation, "dilation"), "groups": groups}
    out = apply("conv2d", [input, weight] + ([bias] if bias is not None else []), attrs)
    for dim in uneven:  # 'same' with an odd total: the larger side on both ends, its first row dropped
        out = out[(slice(None),) * dim + (slice(1, None),)]
    return out


def _string_padding(mode, kernel, stride, dilation):
    """``(padding, dims whose first output row to drop)``: PyTorch's 'same' puts the extra
    zero of an odd total on the right; padding both ends with the larger side and dropping
    the first row gives the same result with one conv."""
    if mode == "valid":
        return (0, 0), ()
    if mode != "same":
        raise GraphcError(f"padding must be an int, a pair, 'same' or 'valid'; got {mode!r}")
    if stride != (1, 1):
        raise GraphcError("padding='same' needs stride 1 (as in PyTorch)")
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    return tuple((t + 1) // 2 for t in total), tuple(2 + i for i, t in enumerate(total) if t % 2)


def _single(value, what):
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise GraphcError(f"conv1d: {what} must be an int or a 1-tuple, got {value!r}")
        return value[0]
    return value


@torchsymbol(**_F_AND_TOP)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) (or unbatched (C, L)) with weight (out, C/groups, k):
    ``conv2d`` on a height-1 image, so it shares conv2d's kernels and gradient.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.conv1d(gc.ones(1, 2, 5), gc.ones(3, 2, 3), padding=1).shape
    (1, 3, 5)
    """
    if input.ndim == 2:  # unbatched, as PyTorch allows
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if input.ndim != 3 or weight.ndim != 3:
        raise ShapeError(f"conv1d expects a (N, C, L) input and a (out, C/groups, k) weight, got "
                         f"{tuple(input.shape)} and {tuple(weight.shape)}")
    padding = padding if isinstance(padding, str) else (0, _single(padding, "padding"))
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, _single(stride, "stride")), padding,
                 (1, _single(dilation, "dilation")), groups)
    return out.squeeze(2)


@torchsymbol(**_F_ONLY)
def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels (``input[n, c]``) with probability ``p`` and scale the rest by
    1/(1-p); the identity when not training. Like PyTorch, a 3-D input is read as (N, C, L).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> x = gc.ones(2, 3, 4, 4)
    >>> F.dropout2d(x, 0.5, training=False) is x
    True
    """
    p = float(p)  # a probability passed to a compiled function: its plan is specialised on it
    if not 0.0 <= p <= 1.0:
        raise GraphcError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim < 2:
        raise ShapeError(f"dropout2d expects an input of shape (N, C, *), got {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return input * _channel_mask(input, float(p))


def _channel_mask(input, p):
    """0 or 1/(1-p) per (sample, channel), shaped (N, C, 1, ...), drawn by the ``dropout`` op
    (a fresh mask every step of a plan). Its input, ones of that shape, is made from a slice
    of ``input`` so that it is traced with the input's symbolic batch dim; ``where`` with one
    on both branches gives ones whatever the condition (and the values, NaN included)."""
    corner = input[(slice(None), slice(None)) + (slice(0, 1),) * (input.ndim - 2)]
    one = Tensor(np.ones((), input.dtype.numpy))
    ones = where(corner > 0, one, one)
    return apply("dropout", [ones], {"p": p})[0]
