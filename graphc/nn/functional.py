"""``graphc.nn.functional``: the ops behind the modules, with PyTorch's signatures.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> F.relu(gc.tensor([-1.0, 2.0])).numpy()
array([0., 2.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..dispatch import apply
from ..ir.errors import GraphcError, ShapeError
from ..tensor import Tensor


def _pair(v, what="argument") -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(i, int) for i in v):
        raise GraphcError(f"{what} must be an int or a pair of ints, got {v!r}")
    return v


def linear(input, weight, bias=None):
    return apply("linear", [input, weight] + ([bias] if bias is not None else []))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        padding = _string_padding(padding, kernel, _pair(stride, "stride"), _pair(dilation, "dilation"))
    attrs = {"stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
             "dilation": _pair(dilation, "dilation"), "groups": groups}
    return apply("conv2d", [input, weight] + ([bias] if bias is not None else []), attrs)


def _string_padding(mode, kernel, stride, dilation):
    if mode == "valid":
        return (0, 0)
    if mode != "same":
        raise GraphcError(f"padding must be an int, a pair, 'same' or 'valid'; got {mode!r}")
    if stride != (1, 1):
        raise GraphcError("padding='same' needs stride 1 (as in PyTorch)")
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    if any(t % 2 for t in total):
        raise GraphcError(f"padding='same' with kernel {kernel} needs uneven padding, which graphc does not support")
    return tuple(t // 2 for t in total)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return apply("leaky_relu", [input], {"negative_slope": float(negative_slope)})


def _implicit_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1  # PyTorch's legacy choice when dim is None


def softmax(input, dim=None):
    return apply("softmax", [input], {"dim": _implicit_dim(input.ndim) if dim is None else dim})


def log_softmax(input, dim=None):
    return apply("log_softmax", [input], {"dim": _implicit_dim(input.ndim) if dim is None else dim})


def _no_ceil(ceil_mode, what):
    if ceil_mode:
        raise GraphcError(f"{what}(ceil_mode=True) is not supported")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    _no_ceil(ceil_mode, "max_pool2d")
    if return_indices:
        raise GraphcError("max_pool2d(return_indices=True) is not supported")
    kernel = _pair(kernel_size, "kernel_size")
    attrs = {"kernel_size": kernel, "stride": _pair(stride if stride is not None else kernel, "stride"),
             "padding": _pair(padding, "padding"), "dilation": _pair(dilation, "dilation")}
    return apply("max_pool2d", [input], attrs)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _no_ceil(ceil_mode, "avg_pool2d")
    if divisor_override is not None:
        raise GraphcError("avg_pool2d(divisor_override=...) is not supported")
    kernel = _pair(kernel_size, "kernel_size")
    attrs = {"kernel_size": kernel, "stride": _pair(stride if stride is not None else kernel, "stride"),
             "padding": _pair(padding, "padding"), "count_include_pad": bool(count_include_pad)}
    return apply("avg_pool2d", [input], attrs)


def adaptive_avg_pool2d(input, output_size):
    size = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    size = tuple(int(input.shape[2 + i]) if s is None else s for i, s in enumerate(size))
    return apply("adaptive_avg_pool2d", [input], {"output_size": size})


def dropout(input, p=0.5, training=True, inplace=False):
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
        np.copyto(target.data, new.data if isinstance(new, Tensor) else new, casting="unsafe")


def one_hot(tensor, num_classes: int, dtype="float32"):
    return apply("one_hot", [tensor], {"num_classes": int(num_classes), "dtype": dtype})


from .losses_functional import binary_cross_entropy_with_logits, cross_entropy, mse_loss  # noqa: E402,F401

# relu, sigmoid, tanh, flatten, clamp, ...: declared once in graphc/functions.py for Tensor.x, gc.x and F.x;
# gelu, silu, layer_norm, embedding, conv1d, dropout2d, ... in graphc/functions_nn.py
from .. import functions as _functions  # noqa: E402,F401  (declares them)
from .. import functions_nn as _functions_nn  # noqa: E402,F401  (gelu, layer_norm, embedding, conv1d, ...)
from ..surface import FUNCTIONAL as _FUNCTIONAL  # noqa: E402

globals().update({name: fn for name, fn in _FUNCTIONAL.items() if name not in globals()})
