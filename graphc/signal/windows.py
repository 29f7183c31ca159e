"""``torch.signal.windows``: the window functions of spectral analysis and filter design, with
PyTorch's signatures, checks and formulas (``sym=False`` gives the periodic window).

A window is made from Python numbers, so it is computed in float64 with numpy (``numpy.i0`` for
Kaiser's Bessel function) and returned as a constant tensor of ``dtype`` (float32 unless given;
float32 or float64 only, as PyTorch).

>>> import graphc as gc
>>> [round(v, 3) for v in gc.signal.windows.hann(5).tolist()]
[0.0, 0.5, 1.0, 0.5, 0.0]
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..ir.errors import GraphcError
from ..ir.types import DType
from ..ops.creation import tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checks(name: str, M, dtype, layout) -> DType:
    """PyTorch's common checks; the dtype the window is made in."""
    if M < 0:
        raise GraphcError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise GraphcError(f"{name} is implemented for strided tensors only, got: {layout}")
    dtype = DType.float32 if dtype is None else DType.from_any(dtype)
    if dtype not in (DType.float32, DType.float64):
        raise GraphcError(f"{name} expects float32 or float64 dtypes, got: {dtype.name}")
    return dtype


def _out(values, dtype, device, requires_grad):
    return tensor(np.asarray(values, dtype=np.float64).reshape(-1), dtype=dtype, device=device,
                  requires_grad=requires_grad)


def _line(start, step, M):
    """PyTorch's ``linspace(start, start + (M - 1) * step, M)``."""
    return start + step * np.arange(M, dtype=np.float64)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``exp(-|n - center| / tau)``; ``center`` defaults to the middle (only for ``sym=False``).

    >>> import graphc as gc
    >>> [round(v, 3) for v in gc.signal.windows.exponential(3, tau=1.0).tolist()]
    [0.368, 1.0, 0.368]
    """
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise GraphcError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise GraphcError("Center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    return _out(np.exp(-np.abs(_line(-center / tau, 1 / tau, M))), dtype, device, requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sin(pi * (n + 0.5) / M)`` (``M + 1`` in place of ``M`` for the periodic window).

    >>> import graphc as gc
    >>> [round(v, 3) for v in gc.signal.windows.cosine(2).tolist()]
    [0.707, 0.707]
    """
    dtype = _checks("cosine", M, dtype, layout)
    step = math.pi / (M + 1 if not sym and M > 1 else M) if M else 0.0
    return _out(np.sin(_line(0.5 * step, step, M)), dtype, device, requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``exp(-((n - (M - 1) / 2) / std)**2 / 2)``.

    >>> import graphc as gc
    >>> [round(v, 3) for v in gc.signal.windows.gaussian(3).tolist()]
    [0.607, 1.0, 0.607]
    """
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise GraphcError(f"Standard deviation must be positive, got: {std} instead.")
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    return _out(np.exp(-_line(start * constant, constant, M) ** 2), dtype, device, requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``I0(beta * sqrt(1 - (2n / (M - 1) - 1)**2)) / I0(beta)`` (``numpy.i0``).

    >>> import graphc as gc
    >>> gc.signal.windows.kaiser(3, beta=0.0).numpy().tolist()
    [1.0, 1.0, 1.0]
    """
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise GraphcError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _out(np.ones(M), dtype, device, requires_grad)
    beta = float(beta)
    step = 2.0 * beta / (M if not sym else M - 1)
    k = np.minimum(_line(-beta, step, M), beta)
    return _out(np.i0(np.sqrt(np.maximum(beta * beta - k ** 2, 0.0))) / np.i0(beta), dtype, device, requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window ``1 - |2n / (M - 1) - 1|``.

    >>> import graphc as gc
    >>> gc.signal.windows.bartlett(5).numpy().tolist()
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    dtype = _checks("bartlett", M, dtype, layout)
    if M <= 1:
        return _out(np.ones(M), dtype, device, requires_grad)
    return _out(1 - np.abs(_line(-1.0, 2 / (M if not sym else M - 1), M)), dtype, device, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sum_i (-1)**i * a[i] * cos(2 pi i n / (M - 1))`` (``M`` for the periodic window).

    >>> import graphc as gc
    >>> gc.signal.windows.general_cosine(3, a=[0.5, 0.5]).numpy().tolist()
    [0.0, 1.0, 0.0]
    """
    dtype = _checks("general_cosine", M, dtype, layout)
    if M <= 1:
        return _out(np.ones(M), dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise GraphcError("Coefficients must be a list/tuple")
    a = [float(w) for w in a]
    if not a:
        raise GraphcError("Coefficients cannot be empty")
    k = _line(0.0, 2 * math.pi / (M if not sym else M - 1), M)
    terms = [(-1) ** i * w * np.cos(i * k) for i, w in enumerate(a)]
    return _out(np.sum(terms, axis=0), dtype, device, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_cosine`` with ``a = [alpha, 1 - alpha]``.

    >>> import graphc as gc
    >>> gc.signal.windows.general_hamming(3, alpha=0.5).numpy().tolist()
    [0.0, 1.0, 0.0]
    """
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_hamming`` with ``alpha=0.54``."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_hamming`` with ``alpha=0.5`` (the raised cosine)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_cosine`` with ``a = [0.42, 0.5, 0.08]``."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_cosine`` with Nuttall's four coefficients (minimum 4-term Blackman-Harris)."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)
