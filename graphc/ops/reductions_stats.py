"""``cov`` and ``corrcoef`` (rows are variables, columns observations, as ``torch.cov``):
composites of mean, sum and matmul, with numpy's weighted formula for ``fweights`` and
``aweights``.
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import ShapeError
from ..ir.types import is_static
from .functions import clamp
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _observations(x):
    """The number of observations (columns) as a number, or a tensor when symbolic."""
    n = x.dims[1]
    if is_static(n):
        return int(n)
    ones = apply("add", [apply("mul", [x.detach(), 0.0]), 1.0])
    return apply("sum", [ones], {"dims": (1,), "keepdim": False})[0]


def _weights(fweights, aweights):
    w = None
    if fweights is not None:
        if fweights.dtype.is_float:
            raise ShapeError("cov: fweights must be integers (as PyTorch)")
        w = fweights
    if aweights is not None:
        if not aweights.dtype.is_float:
            raise ShapeError("cov: aweights must be floating-point (as PyTorch)")
        w = aweights if w is None else apply("mul", [w, aweights])
    return w


def _cov(input, correction, fweights, aweights):
    """(the covariance matrix, the variances: its diagonal, without ``diagonal``, which a
    symbolic number of variables refuses)."""
    if input.ndim > 2:
        raise ShapeError(f"cov takes a 1-d or 2-d tensor, got {input.ndim}-d")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_float:
        x = x.cast("float32")
    w = _weights(fweights, aweights)
    if w is None:
        avg = apply("mean", [x], {"dims": (1,), "keepdim": True})
        norm = _observations(x) - correction
    else:
        w = w.cast(x.dtype)
        w_sum = apply("sum", [w], {"dims": None, "keepdim": False})
        avg = apply("div", [apply("sum", [apply("mul", [x, w])], {"dims": (1,), "keepdim": True}), w_sum])
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = apply("sub", [w_sum, float(correction)])
        else:
            spread = apply("sum", [apply("mul", [w, aweights.cast(x.dtype)])], {"dims": None, "keepdim": False})
            norm = apply("sub", [w_sum, apply("div", [apply("mul", [spread, float(correction)]), w_sum])])
    norm = clamp(norm, min=0) if not isinstance(norm, (int, float)) else max(norm, 0)
    centred = apply("sub", [x, avg])
    weighted = centred if w is None else apply("mul", [centred, w])
    c = apply("div", [apply("matmul", [weighted, centred.transpose(0, 1)]), norm])
    variances = apply("div", [apply("sum", [apply("mul", [weighted, centred])], {"dims": (1,), "keepdim": False}), norm])
    return c, variances


@torchsymbol(**_METHOD_AND_TOP)
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (one variable, a 1-d
    input or one row, gives a 0-d result), with ``correction`` (1: Bessel's) and optional
    frequency (``fweights``, integers) and reliability (``aweights``) weights of the
    observations. A non-positive normaliser gives inf/NaN, as PyTorch (which warns).

    >>> import graphc as gc
    >>> gc.cov(gc.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).numpy().tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    c, _ = _cov(input, correction, fweights, aweights)
    return _squeezed(input, c)


def _squeezed(input, c):
    """One variable's 1x1 as 0-d (PyTorch squeezes): the result's rank depends on the number
    of variables, so a symbolic one is read as a number (``int`` pins it, graphc/tracing.py)."""
    if input.ndim < 2 or int(input.shape[0]) == 1:
        return c.reshape(())
    return c


@torchsymbol(**_METHOD_AND_TOP)
def corrcoef(input):
    """Pearson's correlation coefficients of the rows' variables (``cov`` over the outer
    product of the standard deviations, clipped to [-1, 1]; a 1-d input gives ``c / c``).

    >>> import graphc as gc
    >>> gc.corrcoef(gc.tensor([[0.0, 1.0, 2.0], [4.0, 2.0, 0.0]])).numpy().tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    c, variances = _cov(input, 1, None, None)
    if input.ndim < 2 or int(input.shape[0]) == 1:
        c = _squeezed(input, c)
        return apply("div", [c, c])
    std = apply("sqrt", [variances])
    c = apply("div", [apply("div", [c, std.unsqueeze(1)]), std.unsqueeze(0)])
    return clamp(c, -1.0, 1.0)
