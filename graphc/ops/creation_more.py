"""More of PyTorch's creation functions and whole-tensor writes: ``fill`` (out of place),
``gc.zero_``, ``full_like``, the ``empty*`` family (``empty_like``, ``empty_strided``,
``empty_permuted``, ``Tensor.new_empty``, ``Tensor.new_empty_strided``), ``scalar_tensor`` and
``Tensor.resize_`` / ``resize_as_``.

graphc never hands out uninitialised memory: every ``empty*`` is zeros (strides and physical
layouts are accepted and checked; graphc arrays are always row-major).
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.inplace import _check_writable, _eager, _tracer_for
from ..core.symint import shape_args
from ..core.tensor import Tensor
from ..executor.backends import backend_of
from ..ir.errors import GraphcError, ShapeError, TraceError
from .creation import _filled_like, tensor, zeros
from .shaping_views import fixed_shape
from .surface import torchsymbol

_TOP_ONLY = dict(method=False, functional=False)
_METHOD_AND_TOP = dict(functional=False)
_METHOD_ONLY = dict(top=False, functional=False)


@torchsymbol(**_TOP_ONLY)
def fill(input, value):
    """A tensor like ``input`` holding ``value`` everywhere (``fill_`` out of place); ``value`` a
    number or a 0-d tensor, whose gradient is the sum of the result's (``input`` gets none).

    >>> import graphc as gc
    >>> gc.fill(gc.zeros(2), 1.5).numpy().tolist()
    [1.5, 1.5]
    """
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions")
    return apply("where", [True, value, input]).cast(input.dtype)


@torchsymbol(**_TOP_ONLY)
def zero_(input):
    """``input.zero_()``: every element set to 0 in place; returns ``input``.

    >>> import graphc as gc
    >>> gc.zero_(gc.ones(2)).numpy().tolist()
    [0.0, 0.0]
    """
    return input.zero_()


@torchsymbol(**_TOP_ONLY)
def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):
    """A tensor of ``input``'s shape (and dtype, unless given) filled with ``fill_value``; of a
    traced tensor, a ``full`` node that keeps a symbolic batch dim.

    >>> import graphc as gc
    >>> gc.full_like(gc.zeros(2, dtype=gc.int64), 7).numpy().tolist()
    [7, 7]
    """
    out = _filled_like(input, float(fill_value) if input._tracer is not None else fill_value, dtype, device)
    return out.requires_grad_() if requires_grad else out


@torchsymbol(**_TOP_ONLY)
def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
               pin_memory=False):
    """``zeros_like`` (graphc never hands out uninitialised memory).

    >>> import graphc as gc
    >>> gc.empty_like(gc.ones(2, 3)).shape
    (2, 3)
    """
    out = _filled_like(input, 0.0, dtype, device)
    return out.requires_grad_() if requires_grad else out


def _check_strides(size, stride, what):
    size, stride = tuple(shape_args(tuple(size))), tuple(stride)
    if len(size) != len(stride):
        raise ShapeError(f"{what}: mismatch in length of strides and shape ({len(stride)} and {len(size)})")
    if any(int(s) < 0 for s in (*size, *stride)):
        raise ShapeError(f"{what}: sizes and strides must be non-negative, got {size} and {stride}")
    return size


@torchsymbol(**_TOP_ONLY)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Zeros of ``size`` (graphc arrays are row-major: ``stride`` is checked, not kept).

    >>> import graphc as gc
    >>> gc.empty_strided((2, 3), (1, 2)).shape
    (2, 3)
    """
    size = _check_strides(size, stride, "empty_strided")
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


@torchsymbol(**_TOP_ONLY)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """Zeros of ``size`` (``physical_layout``, a permutation of the dims, is checked, not kept).

    >>> import graphc as gc
    >>> gc.empty_permuted((2, 3), (1, 0)).shape
    (2, 3)
    """
    size = tuple(shape_args(tuple(size)))
    if sorted(int(p) for p in physical_layout) != list(range(len(size))):
        raise ShapeError(f"empty_permuted: physical_layout {tuple(physical_layout)} is not a permutation of "
                         f"{len(size)} dims")
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


@torchsymbol(**_METHOD_ONLY)
def new_empty(self, *size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """``new_zeros`` (graphc never hands out uninitialised memory).

    >>> import graphc as gc
    >>> gc.ones(2, dtype=gc.float64).new_empty((3,)).dtype
    <DType.float64: 'f64'>
    """
    return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


@torchsymbol(**_METHOD_ONLY)
def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False):
    """``new_zeros(size)`` (``stride`` is checked, not kept)."""
    size = _check_strides(size, stride, "new_empty_strided")
    return self.new_zeros(size, dtype=dtype, device=device, requires_grad=requires_grad)


@torchsymbol(**_TOP_ONLY)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding ``s``: float32 unless ``dtype`` (bools and ints too, as PyTorch).

    >>> import graphc as gc
    >>> gc.scalar_tensor(3).dtype
    <DType.float32: 'f32'>
    """
    return tensor(s, dtype=dtype or "float32", device=device, requires_grad=requires_grad)


@torchsymbol(**_METHOD_ONLY)
def resize_(input, *sizes, memory_format=None):
    """Give the tensor the shape ``sizes``, keeping its elements in row-major order: new
    elements are 0 (PyTorch leaves them uninitialised), surplus ones are dropped. Inside a
    trace the number of elements must stay the same. PyTorch refuses tensors that require grad.

    >>> import graphc as gc
    >>> gc.arange(4).resize_(2, 2).numpy().tolist()
    [[0, 1], [2, 3]]
    """
    shape = tuple(int(s) for s in shape_args(sizes))
    if any(s < 0 for s in shape):
        raise ShapeError(f"resize_: negative size in {shape}")
    if input.requires_grad:
        raise GraphcError("cannot resize variables that require grad")
    tracer = _tracer_for(input, (), "resize_")
    if tracer is None:
        _eager(input, "resize_")
        return _resize_array(input, shape)
    _check_writable(tracer, input, "resize_")
    if input._tracer is None or tracer.state_name(input) is not None:
        raise TraceError("resize_ of a model's parameter or buffer cannot be compiled: a plan keeps every state "
                         "tensor's shape", tracer.user_location())
    have = int(np.prod(fixed_shape(input, "resize_"), dtype=np.int64))
    if have != int(np.prod(shape, dtype=np.int64)):
        raise TraceError(f"resize_ from {have} to {int(np.prod(shape))} elements cannot be compiled (graphc has no "
                         "storage to grow or shrink in a plan); reshape instead", tracer.user_location())
    input._value = apply("reshape", [input], {"shape": list(shape)})._value
    return input


def _resize_array(input, shape):
    xp = backend_of(input.array).xp
    flat = input.array.reshape(-1)
    want = int(np.prod(shape, dtype=np.int64))
    if want > flat.size:
        flat = xp.concatenate([flat, xp.zeros(want - flat.size, dtype=flat.dtype)])
    input.array = flat[:want].reshape(shape)
    input._version += 1
    return input


@torchsymbol(**_METHOD_AND_TOP)
def resize_as_(input, the_template, *, memory_format=None):
    """``resize_(the_template.shape)``.

    >>> import graphc as gc
    >>> gc.arange(4).resize_as_(gc.zeros(2, 2)).shape
    (2, 2)
    """
    return resize_(input, *the_template.shape)
