"""``nn.init`` with PyTorch's signatures, gains and fan computations, drawn from graphc's
seeded generator (``gc.manual_seed``): the same seed gives the same weights, though not the
same numbers as PyTorch's generator. Each ``*_`` function fills a tensor (a Parameter, or
``p.data``) in place and returns it; they are eager only.

The array helpers at the top (``kaiming_uniform``, ``bias_uniform``) are the layers'
default initialisation (PyTorch's ``reset_parameters``).

>>> import graphc as gc
>>> from graphc import nn
>>> layer = nn.Linear(256, 128)
>>> _ = nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
>>> _ = nn.init.zeros_(layer.bias)
>>> round(float(layer.weight.numpy().std()) / (2 / 128) ** 0.5, 1)
1.0
"""
from __future__ import annotations

import math

import numpy as np

from .. import random as _random
from ..ir.errors import GraphcError

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


# ---- layer defaults (arrays) ---------------------------------------------------------------------
def uniform(shape, bound: float, dtype=np.float32) -> np.ndarray:
    return _random.generator().uniform(-bound, bound, size=shape).astype(dtype)


def fan_in(shape) -> int:
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive


def kaiming_uniform(shape, a: float = math.sqrt(5)) -> np.ndarray:
    """``kaiming_uniform_(w, a=sqrt(5))`` as Linear and Conv2d use: bound = 1/sqrt(fan_in)."""
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in(shape)) if fan_in(shape) else 0.0
    return uniform(shape, bound)


def bias_uniform(weight_shape, size: int) -> np.ndarray:
    fan = fan_in(weight_shape)
    return uniform((size,), 1 / math.sqrt(fan) if fan > 0 else 0.0)


# ---- gains and fans ------------------------------------------------------------------------------
def calculate_gain(nonlinearity: str, param=None) -> float:
    """PyTorch's recommended gain for a nonlinearity.

    >>> from graphc.nn import init
    >>> init.calculate_gain("relu") == 2 ** 0.5, init.calculate_gain("tanh"), init.calculate_gain("selu")
    (True, 1.6666666666666667, 0.75)
    >>> round(init.calculate_gain("leaky_relu", 0.2), 6)
    1.38675
    """
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise GraphcError(f"negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4  # PyTorch's value: keeps self-normalisation stable, not variance-preserving
    raise GraphcError(f"unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)``: dims 1 and 0 times the receptive field (the product of the rest).

    >>> import graphc as gc
    >>> _calculate_fan_in_and_fan_out(gc.zeros(16, 3, 5, 5))
    (75, 400)
    """
    shape = tuple(int(d) for d in tensor.shape)
    if len(shape) < 2:
        raise GraphcError(f"fan in and fan out cannot be computed for a tensor with fewer than 2 dimensions "
                          f"(shape {shape})")
    receptive = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise GraphcError(f"mode {mode!r} is not supported, use 'fan_in' or 'fan_out'")
    fan_in_, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in_ if mode == "fan_in" else fan_out


def _empty(tensor) -> bool:
    return 0 in tuple(int(d) for d in tensor.shape)  # PyTorch skips zero-element tensors (with a warning)


# ---- the in-place initialisers ---------------------------------------------------------------------
def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):  # noqa: A002 - PyTorch's signature
    """Fill with U(a, b)."""
    _no_generator(generator)
    return tensor.uniform_(a, b)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std**2)."""
    _no_generator(generator)
    return tensor.normal_(mean, std)


def constant_(tensor, val: float):
    """Fill with ``val``."""
    return tensor.fill_(val)


def ones_(tensor):
    """Fill with 1."""
    return tensor.fill_(1)


def zeros_(tensor):
    """Fill with 0."""
    return tensor.zero_()


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    if _empty(tensor):
        return tensor
    fan_in_, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in_ + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Glorot: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    if _empty(tensor):
        return tensor
    fan_in_, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in_ + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity) -> float:
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """He: U(-bound, bound) with bound = gain * sqrt(3 / fan), fan from ``mode``.

    >>> import graphc as gc
    >>> from graphc.nn import init
    >>> w = init.kaiming_uniform_(gc.zeros(64, 32), nonlinearity="relu")
    >>> bool(abs(w.numpy()).max() <= (6 / 32) ** 0.5)
    True
    """
    if _empty(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """He: N(0, std**2) with std = gain / sqrt(fan), fan from ``mode``."""
    if _empty(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """N(mean, std**2) truncated to [a, b] (absolute bounds, as PyTorch), by PyTorch's method:
    uniform samples between the bounds' CDF values mapped through the inverse normal CDF.

    >>> import graphc as gc
    >>> from graphc.nn import init
    >>> w = init.trunc_normal_(gc.zeros(1000), std=0.02, a=-0.04, b=0.04)
    >>> bool((abs(w.numpy()) <= 0.04).all())
    True
    """
    _no_generator(generator)
    if not tensor.dtype.is_float:
        raise GraphcError(f"trunc_normal_ needs a floating-point tensor, got {tensor.dtype.name}")
    if not std > 0 or not a < b:
        raise GraphcError(f"trunc_normal_ needs std > 0 and a < b, got std={std}, a={a}, b={b}")
    lo, hi = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    u = _random.generator().uniform(lo, hi, size=tuple(int(d) for d in tensor.shape))  # float64
    return tensor.copy_(np.clip(mean + std * _normal_ppf(u), a, b))


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix over dims ``(size(0), rest)``, times ``gain``: the Q of a QR
    of a Gaussian matrix with R's diagonal made positive, as PyTorch.

    >>> import numpy as np, graphc as gc
    >>> from graphc.nn import init
    >>> w = init.orthogonal_(gc.zeros(3, 5)).numpy()
    >>> bool(np.allclose(w @ w.T, np.eye(3), atol=1e-6))
    True
    """
    _no_generator(generator)
    shape = tuple(int(d) for d in tensor.shape)
    if len(shape) < 2:
        raise GraphcError(f"orthogonal_ needs a tensor with at least 2 dimensions, got shape {shape}")
    if _empty(tensor):
        return tensor
    rows, cols = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    flat = _random.generator().standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))  # a unique Q: uniform over the orthogonal group
    if rows < cols:
        q = q.T
    return tensor.copy_((gain * q).reshape(shape))


def _normal_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _normal_ppf(p: np.ndarray) -> np.ndarray:
    """The inverse normal CDF (Acklam's rational approximation, relative error < 1.2e-9:
    numpy has no erfinv, and float32 weights need 6e-8)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    p = np.clip(p, 1e-300, 1 - 1e-16)
    low = 0.02425

    def tail(q):
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)

    q = p - 0.5
    r = q * q
    out = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    lower, upper = p < low, p > 1 - low
    out[lower] = tail(np.sqrt(-2 * np.log(p[lower])))
    out[upper] = -tail(np.sqrt(-2 * np.log(1 - p[upper])))
    return out


def _no_generator(generator) -> None:
    if generator is not None:
        raise GraphcError("graphc's initialisers draw from gc.manual_seed's generator; generator= is not supported")
