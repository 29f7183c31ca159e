"""``graphc.ops.aten``: the ATen operators PyTorch's op database calls as ``torch.ops.aten.x``
(and the ``native_*`` normalizations it calls at the top, ``torch.native_layer_norm``), each a
composite with ATen's signature and outputs. As ``torch.ops.aten.x.default`` is the overload of
``torch.ops.aten.x``, each function here has itself as ``.default``.

The statistics outputs of the ``native_*`` norms (means, inverse standard deviations) carry no
gradient, as in PyTorch, whose backward of these ops reads only the normalized output's. The
running statistics are updated in place (eager), or as a buffer update when they are a traced
module's buffers; a compiled function cannot update a plain input tensor (TraceError).

>>> import graphc as gc
>>> gc.ops.aten.slice(gc.arange(6.0), 0, 1, 5, 2).numpy().tolist()
[1.0, 3.0]
"""
from __future__ import annotations

import builtins

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError
from .surface import torchsymbol

_TOP_ONLY = dict(method=False, functional=False)


def _overload(fn):
    fn.default = fn  # torch.ops.aten.x.default
    return fn


def _empty(like, dtype=None):
    """An empty (0,) tensor: ATen's placeholder for a statistic it does not compute."""
    return Tensor(np.zeros((0,), like.dtype.numpy if dtype is None else np.dtype(dtype)))


@_overload
def slice(input, dim=0, start=None, end=None, step=1):  # noqa: A001 - ATen's name
    """``input[..., start:end:step, ...]`` along ``dim`` (``aten.slice.Tensor``).

    >>> import graphc as gc
    >>> gc.ops.aten.slice(gc.arange(4.0), 0, 1).numpy().tolist()
    [1.0, 2.0, 3.0]
    """
    if step is None or step < 1:
        raise GraphcError(f"slice step must be positive, got {step}")
    index = [builtins.slice(None)] * input.ndim
    index[dim] = builtins.slice(start, end, step)
    return input[tuple(index)]


@_overload
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    """The gradient of ``softmax`` given its ``output``: ``output * (g - sum(g * output, dim))``.

    >>> import graphc as gc
    >>> y = gc.tensor([0.5, 0.5])
    >>> gc.ops.aten._softmax_backward_data(gc.tensor([1.0, 0.0]), y, 0, gc.float32).numpy().tolist()
    [0.25, -0.25]
    """
    return output * (grad_output - (grad_output * output).sum(dim, keepdim=True))


@_overload
def _safe_softmax(input, dim, dtype=None):
    """``softmax`` with 0 (not NaN) on slices that are all -inf (fully masked attention rows).

    >>> import graphc as gc
    >>> inf = float("inf")
    >>> gc.ops.aten._safe_softmax(gc.tensor([[-inf, -inf], [0.0, 0.0]]), 1).numpy().tolist()
    [[0.0, 0.0], [0.5, 0.5]]
    """
    masked = (input == float("-inf")).all(dim, keepdim=True) if input.ndim else input == float("-inf")
    # those slices are replaced before the softmax too, so that its gradient there is 0, not NaN
    out = apply("where", [masked, 0.0, input]).softmax(dim, dtype=dtype)
    return apply("where", [masked, 0.0, out])


@_overload
def native_dropout_backward(grad_output, mask, scale):
    """The gradient of ``native_dropout``: ``grad_output * mask * scale``.

    >>> import graphc as gc
    >>> gc.ops.aten.native_dropout_backward(gc.tensor([1.0, 1.0]), gc.tensor([True, False]), 2.0).numpy().tolist()
    [2.0, 0.0]
    """
    return grad_output * mask.cast(grad_output.dtype.name) * float(scale)


@_overload
def _upsample_bilinear2d_aa(input, output_size, align_corners, scale_factors=None):
    """Antialiased bilinear resize to ``output_size`` (or by ``scale_factors``), as
    ``F.interpolate(mode='bilinear', antialias=True)``.

    >>> import graphc as gc
    >>> gc.ops.aten._upsample_bilinear2d_aa(gc.ones(1, 1, 4, 4), (2, 2), False).numpy().tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    from ..nn.functional import interpolate
    if output_size is not None:
        return interpolate(input, size=tuple(output_size), mode="bilinear", align_corners=align_corners,
                           antialias=True)
    return interpolate(input, scale_factor=tuple(scale_factors), mode="bilinear", align_corners=align_corners,
                       antialias=True)


# ---- native normalizations -------------------------------------------------------------------
def _channel_constant(input, value):
    return Tensor(np.full((int(input.shape[1]),), value, dtype=input.dtype.numpy))


def _batch_norm_stats(input, weight, bias, running_mean, running_var, momentum, eps):
    """Training batch norm: (out, mean, invstd), the running stats (when given) updated."""
    from ..nn.functional import assign
    if input.ndim < 2:
        raise ShapeError(f"batch_norm expects an input of shape (N, C, *), got {tuple(input.shape)}")
    weight = weight if weight is not None else _channel_constant(input, 1.0)
    bias = bias if bias is not None else _channel_constant(input, 0.0)
    mean = running_mean if running_mean is not None else _channel_constant(input, 0.0)
    var = running_var if running_var is not None else _channel_constant(input, 1.0)
    out, save_mean, invstd, new_mean, new_var = apply(
        "batch_norm_train", [input, weight, bias, mean, var], {"eps": float(eps), "momentum": float(momentum)})
    if running_mean is not None:
        assign(running_mean, new_mean)
    if running_var is not None:
        assign(running_var, new_var)
    return out, save_mean.detach(), invstd.detach()


@torchsymbol(**_TOP_ONLY)
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm with ATen's outputs ``(out, save_mean, save_invstd)``: the batch's mean and
    ``1 / sqrt(var + eps)`` when ``training`` (the running stats updated), empty ones in eval.

    >>> import graphc as gc
    >>> out, mean, invstd = gc.native_batch_norm(gc.tensor([[1.0], [3.0]]), None, None, None, None, True, 0.1, 1e-5)
    >>> out.double().numpy().round(3).tolist(), mean.numpy().tolist(), invstd.double().numpy().round(3).tolist()
    ([[-1.0], [1.0]], [2.0], [1.0])
    """
    if training:
        return _batch_norm_stats(input, weight, bias, running_mean, running_var, momentum, eps)
    from ..nn.functional import batch_norm
    out = batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    return out, _empty(input), _empty(input)


@torchsymbol(**_TOP_ONLY)
def _native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``native_batch_norm`` (ATen's functional form of it, same outputs).

    >>> import graphc as gc
    >>> gc._native_batch_norm_legit(gc.tensor([[1.0], [3.0]]), None, None, None, None, True, 0.1, 1e-5)[1].tolist()
    [2.0]
    """
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@_overload
def _batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    """Training batch norm updating the running stats: ``(out, save_mean, save_invstd, reserve)``,
    ``reserve`` an empty uint8 tensor (cuDNN's workspace in PyTorch).

    >>> import graphc as gc
    >>> rm, rv = gc.zeros(1), gc.ones(1)
    >>> out = gc.ops.aten._batch_norm_with_update(gc.tensor([[1.0], [3.0]]), None, None, rm, rv, 0.5, 1e-5)
    >>> rm.numpy().tolist(), rv.numpy().tolist()
    ([1.0], [1.5])
    """
    out, mean, invstd = _batch_norm_stats(input, weight, bias, running_mean, running_var, momentum, eps)
    return out, mean, invstd, _empty(input, "uint8")


@torchsymbol(**_TOP_ONLY)
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """Layer norm with ATen's outputs ``(out, mean, rstd)``, the statistics shaped as the input
    with the normalized dims kept as 1.

    >>> import graphc as gc
    >>> out, mean, rstd = gc.native_layer_norm(gc.tensor([[1.0, 3.0]]), [2], None, None, 0.0)
    >>> out.numpy().tolist(), mean.numpy().tolist(), rstd.numpy().tolist()
    ([[-1.0, 1.0]], [[2.0]], [[1.0]])
    """
    shape = tuple(normalized_shape)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean = input.mean(dims, keepdim=True) if dims else input
    centred = input - mean
    rstd = ((centred * centred).mean(dims, keepdim=True) + float(eps)).rsqrt() if dims else (
        centred * centred + float(eps)).rsqrt()
    out = centred * rstd
    out = out * weight if weight is not None else out
    out = out + bias if bias is not None else out
    return out, mean.detach(), rstd.detach()


@torchsymbol(**_TOP_ONLY)
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """Group norm with ATen's outputs ``(out, mean, rstd)``, the statistics shaped (N, group).

    >>> import graphc as gc
    >>> out, mean, rstd = gc.native_group_norm(gc.tensor([[[1.0], [3.0]]]), None, None, 1, 2, 1, 1, 0.0)
    >>> out.numpy().tolist(), mean.numpy().tolist(), rstd.numpy().tolist()
    ([[[-1.0], [1.0]]], [[2.0]], [[1.0]])
    """
    if C % group:
        raise ShapeError(f"native_group_norm: {C} channels are not divisible into {group} groups")
    grouped = input.reshape(input.shape[0], group, -1)
    mean = grouped.mean(2, keepdim=True)
    centred = grouped - mean
    rstd = ((centred * centred).mean(2, keepdim=True) + float(eps)).rsqrt()
    out = (centred * rstd).reshape(*input.shape)
    per_channel = (1, -1) + (1,) * (input.ndim - 2)
    out = out * weight.reshape(*per_channel) if weight is not None else out
    out = out + bias.reshape(*per_channel) if bias is not None else out
    return out, mean.squeeze(2), rstd.squeeze(2)


@torchsymbol(**_TOP_ONLY)
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """``F.grid_sample`` with ATen's integer codes: ``interpolation_mode`` 0 bilinear, 1 nearest
    (2, bicubic, is refused); ``padding_mode`` 0 zeros, 1 border, 2 reflection.

    >>> import graphc as gc
    >>> image = gc.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    >>> gc.grid_sampler_2d(image, gc.tensor([[[[0.0, 0.0]]]]), 0, 0, True).numpy().tolist()
    [[[[1.5]]]]
    """
    from ..nn.functional import grid_sample
    modes, paddings = ("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection")
    if interpolation_mode not in range(3) or padding_mode not in range(3):
        raise GraphcError(f"grid_sampler_2d: interpolation_mode must be 0, 1 or 2 and padding_mode 0, 1 or 2, got "
                          f"{interpolation_mode} and {padding_mode}")
    return grid_sample(input, grid, modes[interpolation_mode], paddings[padding_mode], bool(align_corners))


@_overload
def max_pool2d_with_indices_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    """The gradient of ``max_pool2d`` given its indices: each window's gradient added at the
    flat ``h * W + w`` position its maximum came from (a sum-scatter: overlapping windows add).

    >>> import graphc as gc
    >>> x = gc.arange(4.0).reshape(1, 1, 2, 2)
    >>> g = gc.ops.aten.max_pool2d_with_indices_backward(gc.ones(1, 1, 1, 1), x, [2, 2], [2, 2], [0, 0], [1, 1],
    ...                                                  False, gc.tensor([[[[3]]]]))
    >>> g.numpy().ravel().tolist()
    [0.0, 0.0, 0.0, 1.0]
    """
    lead = list(input.shape[:-2])
    rows = input.reshape(*lead, -1)
    # zeros that stay connected to input with a zero gradient, as PyTorch's derivative for self
    # (x < -inf is False everywhere, NaN too, where x * 0 would give NaN at an inf)
    flat = apply("where", [apply("lt", [rows, -np.inf]), rows, 0.0]).cast(grad_output.dtype.name)
    out = apply("scatter", [flat, indices.reshape(*lead, -1), grad_output.reshape(*lead, -1)],
                {"dim": -1, "reduce": "sum"})
    return out.reshape(*input.shape)
