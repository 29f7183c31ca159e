"""Comparisons of whole tensors and of values against sets, as composites: ``isclose``
(PyTorch's formula, step for step), ``allclose`` and ``equal`` (Python bools, so eager
only) and ``isin``.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from ._pinning import pin_broadcast
from .functions_math_more import _float
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


@torchsymbol(**_METHOD_AND_TOP)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|input - other| <= atol + rtol * |other|`` elementwise (equal infinities are close;
    NaN is close to NaN only with ``equal_nan``), computed as PyTorch's.

    >>> import graphc as gc
    >>> gc.isclose(gc.tensor([1.0, 1.0]), gc.tensor([1.0 + 1e-9, 1.1])).numpy().tolist()
    [True, False]
    """
    if rtol < 0 or atol < 0:
        raise ShapeError(f"isclose: rtol and atol must be >= 0, got {rtol} and {atol}")
    pin_broadcast(input, other)
    close = apply("eq", [input, other])
    if equal_nan and input.dtype.is_float:
        close = apply("logical_or", [close, apply("logical_and", [apply("isnan", [input]), apply("isnan", [other])])])
    if rtol == 0 and atol == 0:
        return close
    a, b = _float(input), _float(other)
    allowed = apply("add", [apply("abs", [apply("mul", [b, float(rtol)])]), float(atol)])
    actual = apply("abs", [apply("sub", [a, b])])
    finite = apply("logical_not", [apply("logical_or", [apply("isnan", [actual]), apply("isinf", [actual])])])
    return apply("logical_or", [close, apply("logical_and", [finite, apply("le", [actual, allowed])])])


@torchsymbol(**_METHOD_AND_TOP)
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is ``isclose`` (a Python bool, so not inside a compiled function).

    >>> import graphc as gc
    >>> gc.allclose(gc.tensor([1.0]), gc.tensor([1.0 + 1e-9]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


@torchsymbol(**_METHOD_AND_TOP)
def equal(input, other):
    """Same shape and same elements (a Python bool; NaN is never equal).

    >>> import graphc as gc
    >>> gc.equal(gc.tensor([1, 2]), gc.tensor([1, 2])), gc.equal(gc.tensor([1]), gc.tensor([1, 1]))
    (True, False)
    """
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(apply("eq", [input, other]).all().item())


@torchsymbol(method=False, functional=False)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of ``elements`` is among ``test_elements`` (either may be a
    number); compares every pair, so memory grows with the product of the sizes.

    >>> import graphc as gc
    >>> gc.isin(gc.tensor([1, 2, 3]), gc.tensor([2, 5])).numpy().tolist()
    [False, True, False]
    """
    if not isinstance(elements, Tensor):
        elements = Tensor(np.asarray(elements))
    if not isinstance(test_elements, Tensor):
        hits = apply("eq", [elements, test_elements])
    else:
        flat = apply("reshape", [test_elements], {"shape": [-1]})
        pairs = apply("eq", [elements.unsqueeze(-1), flat])
        hits = apply("gt", [apply("sum", [pairs], {"dims": (-1,), "keepdim": False}), 0])
    return apply("logical_not", [hits]) if invert else hits

