"""PyTorch's ``out=`` on the top-level functions (``gc.add(a, b, out=c)``): the result is
written into ``out`` (resized when its shape differs, as PyTorch resizes an out tensor) and
``out`` is returned. One wrapper serves every ``gc.x`` declared with ``torchsymbol``; a
function that takes ``out`` itself keeps its own handling.

>>> import graphc as gc
>>> c = gc.zeros(2)
>>> gc.add(gc.ones(2), gc.ones(2), out=c) is c, c.numpy().tolist()
(True, [2.0, 2.0])
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from ..ir.errors import GraphcError
from .inplace import copy_, fits_in_place
from .tensor import Tensor


def with_out(fn):
    """``fn`` taking ``out=`` too (``fn`` itself when it already has an ``out`` parameter)."""
    try:
        if "out" in inspect.signature(fn).parameters:
            return fn
    except (TypeError, ValueError):  # no signature to read: leave it as it is
        return fn

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        return result if out is None else write_out(result, out, fn.__name__)
    return call


def write_out(result, out, what: str):
    """Copy ``result`` (a tensor or a tuple of them) into ``out``; return ``out``."""
    if isinstance(out, (tuple, list)):
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(out):
            raise GraphcError(f"{what}: out= has {len(out)} tensors for {len(results)} results")
        return tuple(write_out(r, o, what) for r, o in zip(results, out))
    if not isinstance(out, Tensor) or not isinstance(result, Tensor):
        raise GraphcError(f"{what}: out= takes a Tensor for each tensor result, got {type(out).__name__}")
    if not fits_in_place(result.dtype, out.dtype):
        raise GraphcError(f"{what}: the result's dtype {result.dtype.name} can't be cast to out's "
                          f"{out.dtype.name}, as PyTorch refuses")
    if tuple(out.dims) != tuple(result.dims):  # dims: a symbolic batch stays a symbol
        if out._tracer is not None:
            raise GraphcError(f"{what}: out= of shape {tuple(out.dims)} inside a compiled function must "
                              f"already have the result's shape {tuple(result.dims)}")
        # PyTorch resizes an out tensor of another shape; here it gets a new array (cupy too,
        # through numpy's dispatch)
        out.array = np.empty_like(out.array, shape=tuple(result.shape))
    return copy_(out, result)
