"""``F.`` activations and normalizations for vision models, all composites of existing ops (their
gradients come from autodiff): ``selu``, ``celu``, ``mish``, ``softsign``, ``tanhshrink``,
``threshold``, ``hardsigmoid``, ``logsigmoid``, ``softmin``, ``prelu``, ``instance_norm`` and
``local_response_norm``. Declared once (graphc.ops.surface) so that ``F.x`` (and ``gc.x`` where
PyTorch has ``torch.x``) share one definition. ``inplace=`` is accepted where PyTorch has it and
changes nothing: graphc never mutates a tensor.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> F.softsign(gc.tensor([-1.0, 3.0])).numpy().tolist()
[-0.5, 0.75]
"""
from __future__ import annotations

from ..ir.errors import GraphcError, ShapeError
from ..ops.functions import abs as _abs, clamp, exp, rsqrt, tanh, where
from ..ops.functions_nn import elu, hardtanh, softmax, softplus
from ..ops.surface import torchsymbol
from .functional import assign, pad

_F_ONLY = {"method": False, "top": False}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@torchsymbol(**_F_ONLY)
def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with PyTorch's self-normalizing constants.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.selu(gc.tensor([1.0])).item(), 4)
    1.0507
    """
    return elu(input, SELU_ALPHA) * SELU_SCALE


@torchsymbol(**_F_ONLY)
def celu(input, alpha=1.0, inplace=False):
    """x for x > 0, ``alpha * (exp(x / alpha) - 1)`` otherwise (exp sees min(x, 0)).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> [round(v, 4) for v in F.celu(gc.tensor([-1.0, 2.0]), alpha=2.0).numpy().tolist()]
    [-0.7869, 2.0]
    """
    if alpha == 0:
        raise GraphcError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return where(input > 0, input, (exp(clamp(input, max=0.0) * (1.0 / alpha)) - 1.0) * alpha)


@torchsymbol(**_F_ONLY)
def mish(input, inplace=False):
    """``x * tanh(softplus(x))``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.mish(gc.tensor([1.0])).item(), 4)
    0.8651
    """
    return input * tanh(softplus(input))


@torchsymbol(**_F_ONLY)
def softsign(input):
    """``x / (1 + |x|)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.softsign(gc.tensor([1.0])).item()
    0.5
    """
    return input / (_abs(input) + 1.0)


@torchsymbol(**_F_ONLY)
def tanhshrink(input):
    """``x - tanh(x)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.tanhshrink(gc.tensor([0.0])).item()
    0.0
    """
    return input - tanh(input)


@torchsymbol(**_F_ONLY)
def threshold(input, threshold, value, inplace=False):
    """x where ``x > threshold``, else ``value``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.threshold(gc.tensor([0.5, 2.0]), 1.0, -3.0).numpy().tolist()
    [-3.0, 2.0]
    """
    return where(input > threshold, input, float(value))


@torchsymbol(**_F_ONLY)
def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``: 0 up to -3, 1 from 3 on; gradient 1/6 strictly between (as PyTorch's).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.hardsigmoid(gc.tensor([-4.0, 0.0, 4.0])).numpy().tolist()
    [0.0, 0.5, 1.0]
    """
    return hardtanh(input + 3.0, 0.0, 6.0) * (1.0 / 6.0)


@torchsymbol(**_F_ONLY)
def logsigmoid(input):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for both signs.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> round(F.logsigmoid(gc.tensor([0.0])).item(), 4)
    -0.6931
    """
    return -softplus(-input)


@torchsymbol(**_F_ONLY)
def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x, dim)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.softmin(gc.tensor([[0.0, 0.0]]), dim=1).numpy().tolist()
    [[0.5, 0.5]]
    """
    input = input if dtype is None else input.cast(dtype)
    return softmax(-input, dim)


def _per_channel(t, ndim):
    """A (C,) tensor shaped (C, 1, ...) to broadcast over dim 1 of an ``ndim``-D input."""
    return t.reshape([t.shape[0]] + [1] * (ndim - 2)) if ndim > 2 else t


@torchsymbol(**_F_ONLY)
def prelu(input, weight):
    """x for x > 0, ``weight * x`` otherwise; ``weight`` has one entry, or one per channel (dim 1).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.prelu(gc.tensor([[-2.0, 2.0]]), gc.tensor([0.25])).numpy().tolist()
    [[-0.5, 2.0]]
    """
    if weight.ndim == 0:  # one slope as a scalar tensor (PyTorch accepts it)
        return where(input > 0, input, weight * input)
    if weight.ndim != 1:
        raise ShapeError(f"prelu: weight must be 0-D or 1-D, got shape {tuple(weight.shape)}")
    n = weight.shape[0]
    if n != 1:
        if input.ndim < 2 or input.shape[1] != n:
            raise ShapeError(f"prelu: {n} parameters do not match the channels (dim 1) of an input of shape "
                             f"{tuple(input.shape)}")
        weight = _per_channel(weight, input.ndim)
    return where(input > 0, input, weight * input)


def _channel_affine(x, weight, bias):
    if weight is not None:
        x = x * _per_channel(weight, x.ndim)
    return x + _per_channel(bias, x.ndim) if bias is not None else x


@torchsymbol(**_F_ONLY)
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) plane of (N, C, *) over its spatial dims, then
    ``* weight + bias`` per channel. With ``use_input_stats`` and running stats given, they are
    updated as PyTorch does (the batch's per-instance means and unbiased variances, averaged over
    the batch, blended in with ``momentum``); without ``use_input_stats`` the running stats
    normalize (eval with ``track_running_stats``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.instance_norm(gc.tensor([[[1.0, 3.0], [2.0, 6.0]]])).numpy().round(3).tolist()
    [[[-1.0, 1.0], [-1.0, 1.0]]]
    """
    if input.ndim < 3:
        raise ShapeError(f"instance_norm expects an input of shape (N, C, *spatial), got {tuple(input.shape)}")
    ndim, dims = input.ndim, tuple(range(2, input.ndim))
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise GraphcError("instance_norm: Expected running_mean and running_var to be defined when "
                              "use_input_stats is false")
        out = (input - _per_channel(running_mean, ndim)) * _per_channel(rsqrt(running_var + eps), ndim)
        return _channel_affine(out, weight, bias)
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = _channel_affine(centered * rsqrt(var + eps), weight, bias)
    if running_mean is not None or running_var is not None:
        count = 1
        for d in input.shape[2:]:
            count *= int(d)
        if momentum is None:
            raise GraphcError("instance_norm momentum=None (cumulative average) is not supported; pass a float")
        channels = [input.shape[1]]
        if running_mean is not None:
            batch_mean = mean.mean(0).reshape(channels)
            assign(running_mean, running_mean * (1.0 - momentum) + batch_mean * momentum)
        if running_var is not None:
            unbiased = var.mean(0).reshape(channels) * (count / max(count - 1, 1))
            assign(running_var, running_var * (1.0 - momentum) + unbiased * momentum)
    return out


@torchsymbol(**_F_ONLY)
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha / size * sum of x^2 over the ``size`` neighbouring channels) ** beta``,
    the window zero-padded ``size // 2`` before and ``(size - 1) // 2`` after (PyTorch's).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.local_response_norm(gc.ones(1, 3, 1, 1), 2, alpha=1.0, beta=1.0, k=0.0).numpy().ravel().tolist()
    [2.0, 1.0, 1.0]
    """
    if input.ndim < 3:
        raise ShapeError(f"local_response_norm expects an input of 3 or more dims, got {input.ndim}-D")
    channels = int(input.shape[1])
    square = input * input
    widths = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = pad(square, tuple(widths))
    total = None
    for i in range(size):  # one slice per window offset, never per pixel
        part = padded[:, i:i + channels]
        total = part if total is None else total + part
    return input / (total * (alpha / size) + k) ** beta
