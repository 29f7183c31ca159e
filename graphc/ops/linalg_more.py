"""``gc.linalg``'s composites over the LAPACK ops (graphc/ops/linalg_core.py) and ordinary
ops, so autodiff gives their gradients: norms, cond, matrix_rank, pinv, lstsq,
matrix_power, multi_dot, tensorinv/tensorsolve, vander, vecdot, cross, diagonal and
householder_product.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from ..core.dispatch import apply
from ..ir.errors import ShapeError
from . import linalg_core as core
from .linalg_core import takes_out
from .reductions import amax
from .reductions_more import amin, norm as _vector_norm
from .shaping_more import diagonal as _diagonal, movedim

LstsqResult = collections.namedtuple("lstsq", "solution residuals rank singular_values")


def _dims(dim, rank):
    return tuple(d % rank for d in ((dim,) if isinstance(dim, int) else dim))


@takes_out
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm over ``dim`` (all elements when None). At zero the gradient is
    PyTorch's subgradient 0 (powers are masked there, not 0 * inf).

    >>> import graphc as gc
    >>> gc.linalg.vector_norm(gc.tensor([3.0, -4.0]), 1).item()
    7.0
    """
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_float:
        raise ShapeError(f"linalg.vector_norm: expected a floating-point input, got {x.dtype.name}")
    if isinstance(ord, str):
        raise ShapeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return _vector_norm(x, ord, dim, keepdim)


def _to_last(A, dim):
    d0, d1 = _dims(dim, A.ndim)
    if d0 == d1:
        raise ShapeError(f"linalg.matrix_norm: dims must be different, got {tuple(dim)}")
    return movedim(A, (d0, d1), (-2, -1)), (d0, d1)


def _restore(out, dims, keepdim):
    if keepdim:
        for d in sorted(dims):
            out = out.unsqueeze(d)
    return out


@takes_out
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims ``dim``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2.

    >>> import graphc as gc
    >>> gc.linalg.matrix_norm(gc.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).item()
    6.0
    """
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: expected a tensor with 2 or more dims, got shape {tuple(A.shape)}")
    d0, d1 = _dims(dim, A.ndim)
    if ord == "fro":
        return _vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved, dims = _to_last(A, dim)
        s = core.svdvals(moved)
        res = s.sum(-1) if ord == "nuc" else amax(s, -1) if ord == 2 else amin(s, -1)
        return _restore(res, dims, keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = A.abs().sum(inner, keepdim=True)
        pick = amax if ord > 0 else amin
        res = pick(sums, outer, keepdim=True)
        return res if keepdim else res.squeeze((d0, d1))
    raise ShapeError(f"linalg.matrix_norm: order {ord!r} is not supported ('fro', 'nuc', inf, -inf, 1, -1, 2, -2)")


@takes_out
def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``vector_norm`` or ``matrix_norm`` as PyTorch chooses: a matrix norm for a string
    ``ord``, a 2-tuple ``dim``, or a 2-D input with ``ord`` given and ``dim`` None.

    >>> import graphc as gc
    >>> gc.linalg.norm(gc.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    if dim is not None and not isinstance(dim, int) and len(dim) == 2 or \
            dim is None and ord is not None and A.ndim == 2 or isinstance(ord, str):
        if dim is None and A.ndim != 2:
            raise ShapeError(f"linalg.norm: a matrix norm (ord={ord!r}) of a {A.ndim}-D input needs dim")
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise ShapeError(f"linalg.norm: ord={ord!r} of a {A.ndim}-D input needs dim (or a 1-D/2-D input)")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


@takes_out
def cond(A, p=None):
    """The condition number in norm ``p`` (None/2: s_max / s_min).

    >>> import graphc as gc
    >>> gc.linalg.cond(gc.tensor([[1.0, 0.0], [0.0, 4.0]])).item()
    4.0
    """
    if p in (None, 2, -2):
        s = core.svdvals(A)
        big, small = amax(s, -1), amin(s, -1)
        return big / small if p != -2 else small / big
    core.matrix_dims(A, "linalg.cond", square=True)
    return matrix_norm(A, p) * matrix_norm(core.inv(A), p)


def _tolerance(s_max, atol, rtol, eps_size):
    """PyTorch's rule: rtol defaults to eps * max(m, n) when atol is not given (else 0)."""
    if rtol is None:
        rtol = eps_size if atol is None or (not hasattr(atol, "ndim") and atol <= 0) else 0.0
    tol = s_max * rtol if not hasattr(rtol, "ndim") else s_max * rtol
    if atol is not None:
        tol = apply("maximum", [tol, atol]) if hasattr(atol, "ndim") or hasattr(tol, "ndim") else max(tol, atol)
    return tol


def _spectrum(A, hermitian, op):
    m, n = core.matrix_dims(A, op, square=hermitian)
    eps = float(np.finfo(A.dtype.numpy).eps) * max(m, n)
    if hermitian:
        lam, q = core.eigh(A)
        return lam, q, eps
    u, s, vh = core.svd(A, full_matrices=False)
    return s, (u, vh), eps


@takes_out
def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """The number of singular values above max(atol, rtol * s_max) (int64).

    >>> import graphc as gc
    >>> gc.linalg.matrix_rank(gc.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
    1
    """
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = core.matrix_dims(A, "linalg.matrix_rank", square=hermitian)
    s = core.eigvalsh(A).abs() if hermitian else core.svdvals(A)
    s = s.detach()
    eps = float(np.finfo(A.dtype.numpy).eps) * max(m, n)
    if min(m, n) == 0:
        return apply("sum", [apply("gt", [s, 0.0])], {"dims": [s.ndim - 1]})
    tol = _tolerance(amax(s, -1, keepdim=True), atol, rtol, eps)
    return apply("sum", [apply("gt", [s, tol])], {"dims": [s.ndim - 1]})


@takes_out
def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, dropping singular values <= max(atol, rtol * s_max).
    The gradient is PyTorch's pinv_backward (the differential of a constant-rank pseudo-inverse),
    not the SVD's: a value computed without a graph plus a linear term whose derivative it is.

    >>> import graphc as gc
    >>> gc.linalg.pinv(gc.tensor([[2.0, 0.0], [0.0, 0.0]])).numpy().tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    a0 = A.detach()
    s, vecs, eps = _spectrum(a0, hermitian, "linalg.pinv")
    if s.shape[-1] == 0:
        return A.mT * 0.0
    mag = s.abs() if hermitian else s
    rtol = rtol.detach() if hasattr(rtol, "detach") else rtol
    atol = atol.detach() if hasattr(atol, "detach") else atol
    tol = _tolerance(amax(mag, -1, keepdim=True), atol, rtol, eps)
    keep = apply("gt", [mag, tol])
    s_inv = apply("where", [keep, 1.0 / apply("where", [keep, s, 1.0]), 0.0])
    if hermitian:
        p = (vecs * s_inv.unsqueeze(-2)) @ vecs.mT
    else:
        u, vh = vecs
        p = (vh.mT * s_inv.unsqueeze(-2)) @ u.mT
    if not A.requires_grad and not A.is_symbolic:
        return p
    # dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P, linear in dA:
    ap, pa = a0 @ p, p @ a0
    linear = -(p @ A @ p) + (p @ p.mT) @ (A.mT - A.mT @ ap) + (A.mT - pa @ A.mT) @ (p.mT @ p)
    return p + (linear - linear.detach())


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solutions of A X = B (full-rank A; QR for 'gels'/'gelsy', the SVD for
    'gelsd'/'gelss') as ``(solution, residuals, rank, singular_values)`` shaped as PyTorch's.

    >>> import graphc as gc
    >>> gc.linalg.lstsq(gc.tensor([[1.0], [1.0]]), gc.tensor([[1.0], [3.0]])).solution.numpy().tolist()
    [[2.0]]
    """
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ShapeError(f"linalg.lstsq: driver must be gels, gelsy, gelsd or gelss, got {driver!r}")
    m, n = core.matrix_dims(A, "linalg.lstsq")
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    empty = A.new_zeros(0)
    batch = tuple(A.shape[:-2])
    if driver in ("gelsd", "gelss"):
        u, s, vh = core.svd(A, full_matrices=False)
        eps = float(np.finfo(A.dtype.numpy).eps) * max(m, n)
        rtol = eps if rcond is None or rcond < 0 else rcond
        keep = apply("gt", [s, amax(s, -1, keepdim=True).detach() * rtol])
        s_inv = apply("where", [keep, 1.0 / apply("where", [keep, s, 1.0]), 0.0])
        x = (vh.mT * s_inv.unsqueeze(-2)) @ (u.mT @ rhs)
        rank, values = apply("sum", [keep], {"dims": [keep.ndim - 1]}), s.detach()  # (no gradient, as PyTorch)
    else:
        x = _qr_solve(A, rhs, m, n)
        rank = empty.long() if driver == "gels" else core_rank(A, m, n, batch)
        values = empty
    residuals = empty
    if m > n and driver != "gelsy":
        residuals = ((A @ x - rhs) ** 2).sum(-2)
    return LstsqResult(x.squeeze(-1) if vector else x, residuals, rank, values)


def core_rank(A, m, n, batch):
    return matrix_rank(A) if min(m, n) else A.new_zeros(batch).long()


def _qr_solve(A, rhs, m, n):
    if m >= n:
        q, r = core.qr(A)
        return core.solve_triangular(r, q.mT @ rhs, upper=True)
    q, r = core.qr(A.mT)
    return q @ core.solve_triangular(r.mT, rhs, upper=False)
