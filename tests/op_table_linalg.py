"""The op table's entries for the LAPACK ops (ir/ops/linalg_lapack.py). References are numpy
in float64: ``np.linalg`` for inverse, determinants, solves and Cholesky, loops written from
the definitions for LU (partial pivoting), the triangular solve and the matrix exponential
(its Taylor series); QR, SVD and eigh are checked by their defining properties
(reconstruction, orthonormal factors, numpy's singular values/eigenvalues), since a factor's
signs are the LAPACK build's choice. PyTorch parity runs where the factors are unique (QR's
Householder convention, LU's pivots) and on samples whose signs every LAPACK fixes the same way
(diagonal inputs). Inputs come from their own generator, so the other rows keep theirs.

Gradients: cholesky and eigh take PyTorch's gradients on symmetric matrices (symmetrised, not
the derivative of reading one triangle), which finite differences over all entries do not
measure: tests/test_linalg.py checks them against torch.autograd instead.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(20261129)
_SIGNS = "the factors' signs are the LAPACK build's choice (MKL's in PyTorch, OpenBLAS's in numpy)"


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _well(*shape, dtype=F32):
    """Well-conditioned square matrices: noise plus n on the diagonal."""
    n = shape[-1]
    return (_RNG.standard_normal(shape) + n * np.eye(n)).astype(dtype)


def _spd(*shape, dtype=F32):
    a = _RNG.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _f64(fn, *args, **kw):
    def ref(ins, attrs):
        outs = fn(*[a.astype(F64) for a in ins], attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return [np.asarray(o).astype(ins[0].dtype) for o in outs]
    return ref


def _tri_solve(a, b, attrs):
    n = a.shape[-1]
    tri = np.triu(a) if attrs.get("upper") else np.tril(a)
    if attrs.get("unitriangular"):
        tri = tri - tri * np.eye(n) + np.eye(n)
    a_full = np.broadcast_to(tri, np.broadcast_shapes(tri.shape[:-2], b.shape[:-2]) + (n, n))
    return np.linalg.solve(a_full, np.broadcast_to(b, a_full.shape[:-2] + b.shape[-2:]))


def _lu_one(a):
    m, n = a.shape
    k = min(m, n)
    u, perm = a.copy(), list(range(m))
    low = np.zeros((m, k))
    for j in range(k):
        p = j + int(np.argmax(np.abs(u[j:, j])))
        u[[j, p]], low[[j, p]] = u[[p, j]], low[[p, j]]
        perm[j], perm[p] = perm[p], perm[j]
        if u[j, j] != 0:
            low[j + 1:, j] = u[j + 1:, j] / u[j, j]
            u[j + 1:] -= np.outer(low[j + 1:, j], u[j])
    low[:k, :k] += np.eye(k)
    p_mat = np.zeros((m, m))
    p_mat[perm, range(m)] = 1.0
    return p_mat, low, np.triu(u[:k])


def _lu(a, attrs):
    flat = a.reshape((-1,) + a.shape[-2:])
    parts = [_lu_one(x) for x in flat]
    return tuple(np.stack([p[i] for p in parts]).reshape(a.shape[:-2] + parts[0][i].shape) for i in range(3))


def _expm(a, attrs):
    """Taylor series, scaled by 2^-8 and squared back (inputs here have norm < 10)."""
    x = a / 256.0
    term, total = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy(), np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy()
    for k in range(1, 30):
        term = term @ x / k
        total = total + term
    for _ in range(8):
        total = total @ total
    return total


def _qr_check(ins, attrs, outs):
    a = ins[0].astype(F64)
    q, r = (o.astype(F64) for o in outs)
    tol = 1e-4 if ins[0].dtype == F32 else 1e-10
    assert np.allclose(np.triu(r), r, atol=tol)
    if attrs["mode"] == "r":
        assert q.shape == (0,)
        np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a, mode="r")), atol=tol * 10)
        return
    np.testing.assert_allclose(q @ r, a, atol=tol * 10)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2), atol=tol * 10)


def _svd_check(ins, attrs, outs):
    a = ins[0].astype(F64)
    u, s, vh = (o.astype(F64) for o in outs)
    tol = 1e-4 if ins[0].dtype == F32 else 1e-10
    k = s.shape[-1]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol * 10)
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=tol * 10)
    for f in (u, np.swapaxes(vh, -1, -2)):
        np.testing.assert_allclose(np.swapaxes(f, -1, -2) @ f, np.broadcast_to(np.eye(f.shape[-1]), f.shape[:-2] + (f.shape[-1],) * 2), atol=tol * 10)


def _eigh_check(ins, attrs, outs):
    a = ins[0].astype(F64)
    sym = np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2) if attrs.get("upper") else np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    w, v = (o.astype(F64) for o in outs)
    tol = 1e-4 if ins[0].dtype == F32 else 1e-10
    np.testing.assert_allclose(w, np.linalg.eigvalsh(sym), atol=tol * 10)
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], atol=tol * 10)


def _diag(*shape, dtype=F32):
    """Diagonal matrices with distinct positive entries: every LAPACK returns the same signed factors."""
    n = shape[-1]
    return (np.eye(n) * np.arange(n, 0, -1) * 1.5 + np.zeros(shape)).astype(dtype)


def linalg_table() -> list[OpInfo]:
    t = T
    inv = _f64(lambda a, at: np.linalg.inv(a))
    det = _f64(lambda a, at: np.linalg.det(a))
    slog = _f64(lambda a, at: tuple(np.linalg.slogdet(a)))
    solve = _f64(lambda a, b, at: np.linalg.solve(np.broadcast_to(a, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + a.shape[-2:]),
                                                  np.broadcast_to(b, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:])))
    tri = _f64(_tri_solve)
    chol = _f64(lambda a, at: np.swapaxes(np.linalg.cholesky(a), -1, -2) if at.get("upper") else np.linalg.cholesky(a))
    lu, expm = _f64(_lu), _f64(_expm)
    return [
        OpInfo("linalg_inv", torch=lambda ts, a: t().linalg.inv(ts[0]), samples=[
            S([_well(3, 4, 4)], inv, "batch"), S([_well(5, 5, dtype=F64)], inv, "f64", dynamic=False),
            S([fortran(_well(2, 3, 3))], inv, "fortran"), S([_well(2, 2, 1, 1)], inv, "1x1-two-batch-dims")]),
        OpInfo("linalg_det", torch=lambda ts, a: t().linalg.det(ts[0]), samples=[
            S([_well(3, 4, 4)], det, "batch"), S([_randn(4, 4, dtype=F64)], det, "f64", dynamic=False),
            S([fortran(_well(2, 3, 3))], det, "fortran"), S([_randn(2, 2, 2)], det, "2x2-any-sign")]),
        OpInfo("linalg_slogdet", torch=lambda ts, a: list(t().linalg.slogdet(ts[0])), samples=[
            S([_well(3, 4, 4)], slog, "batch"), S([_randn(4, 4, dtype=F64)], slog, "f64", dynamic=False),
            S([fortran(-_well(2, 3, 3))], slog, "fortran-negative"), S([_randn(2, 2, 2)], slog, "2x2-any-sign")]),
        OpInfo("linalg_solve", torch=lambda ts, a: t().linalg.solve(ts[0], ts[1]), samples=[
            S([_well(3, 4, 4), _randn(3, 4, 2)], solve, "batch"),
            S([_well(4, 4, dtype=F64), _randn(4, 3, dtype=F64)], solve, "f64", dynamic=False),
            S([fortran(_well(2, 3, 3)), _randn(2, 3, 1)], solve, "fortran"),
            S([_well(2, 1, 3, 3), _randn(2, 4, 3, 2)], solve, "broadcast-batch", dynamic=False)]),
        OpInfo("linalg_solve_triangular", torch=lambda ts, a: t().linalg.solve_triangular(
            ts[0], ts[1], upper=a["upper"], unitriangular=a["unitriangular"]), samples=[
            S([_well(3, 4, 4), _randn(3, 4, 2)], tri, "upper", {"upper": True}),
            S([_well(4, 4, dtype=F64), _randn(4, 3, dtype=F64)], tri, "lower-f64", {"upper": False}, dynamic=False),
            S([fortran(_well(2, 3, 3)), _randn(2, 3, 1)], tri, "unit-lower", {"upper": False, "unitriangular": True}),
            S([_well(2, 1, 3, 3), _randn(2, 4, 3, 2)], tri, "broadcast-unit-upper", {"upper": True, "unitriangular": True},
              dynamic=False)]),
        OpInfo("linalg_cholesky", torch=lambda ts, a: t().linalg.cholesky(ts[0], upper=a["upper"]), samples=[
            S([_spd(3, 4, 4)], chol, "lower", grad=False), S([_spd(4, 4, dtype=F64)], chol, "f64", dynamic=False, grad=False),
            S([fortran(_spd(2, 3, 3))], chol, "fortran-upper", {"upper": True}, grad=False),
            S([_spd(2, 1, 1)], chol, "1x1", grad=False)]),
        OpInfo("linalg_qr", torch=lambda ts, a: list(t().linalg.qr(ts[0], a["mode"])), samples=[
            S([_randn(3, 5, 3)], None, "tall", {"mode": "reduced"}, check=_qr_check),
            S([_randn(2, 3, 5, dtype=F64)], None, "wide-f64", {"mode": "reduced"}, check=_qr_check),
            S([fortran(_randn(2, 4, 4))], None, "square-fortran-complete", {"mode": "complete"}, check=_qr_check),
            S([_randn(2, 5, 3)], None, "complete-tall", {"mode": "complete"}, check=_qr_check, grad=False),
            S([_randn(2, 4, 3)], None, "r-only", {"mode": "r"}, check=_qr_check, grad=False)]),
        OpInfo("linalg_svd", torch=lambda ts, a: list(t().linalg.svd(ts[0], full_matrices=a["full_matrices"])), samples=[
            S([_randn(3, 5, 3)], None, "tall", {"full_matrices": False}, check=_svd_check, no_torch=_SIGNS),
            S([_randn(2, 3, 5, dtype=F64)], None, "wide-f64", {"full_matrices": False}, check=_svd_check, no_torch=_SIGNS),
            S([fortran(_randn(2, 4, 4))], None, "square-fortran-full", {"full_matrices": True}, check=_svd_check,
              no_torch=_SIGNS),
            S([_randn(2, 5, 3)], None, "full-tall", {"full_matrices": True}, check=_svd_check, grad=False, no_torch=_SIGNS),
            S([_diag(2, 3, 3)], None, "diagonal", {"full_matrices": False}, check=_svd_check, grad=False)]),
        OpInfo("linalg_eigh", torch=lambda ts, a: list(t().linalg.eigh(ts[0], "U" if a["upper"] else "L")), samples=[
            S([_randn(3, 4, 4)], None, "lower", check=_eigh_check, grad=False, no_torch=_SIGNS),
            S([_randn(4, 4, dtype=F64)], None, "f64-upper", {"upper": True}, check=_eigh_check, dynamic=False, grad=False,
              no_torch=_SIGNS),
            S([fortran(_spd(2, 3, 3))], None, "fortran-spd", check=_eigh_check, grad=False, no_torch=_SIGNS),
            S([_diag(2, 3, 3)], None, "diagonal", check=_eigh_check, grad=False)]),
        OpInfo("linalg_lu", torch=lambda ts, a: list(t().linalg.lu(ts[0])), samples=[
            S([_randn(3, 4, 4)], lu, "square"), S([_randn(2, 5, 3, dtype=F64)], lu, "tall-f64"),
            S([fortran(_randn(2, 3, 5))], lu, "wide-fortran"), S([_randn(2, 1, 1)], lu, "1x1")]),
        OpInfo("linalg_matrix_exp", torch=lambda ts, a: t().linalg.matrix_exp(ts[0]), samples=[
            S([_randn(3, 4, 4)], expm, "batch"), S([_randn(3, 3, dtype=F64)], expm, "f64", dynamic=False),
            S([fortran(_randn(2, 3, 3) * 3)], expm, "fortran-scaled"), S([_randn(2, 1, 1)], expm, "1x1")]),
        OpInfo("linalg_geqrf", torch=lambda ts, a: list(t().geqrf(ts[0])), samples=[
            S([_randn(5, 3)], _f64(_geqrf), "tall", grad=False, dynamic=False),
            S([_randn(3, 5, dtype=F64)], _f64(_geqrf), "wide-f64", grad=False, dynamic=False),
            S([fortran(_randn(2, 4, 4))], _f64(_geqrf), "batch-fortran", grad=False),
            S([_randn(2, 3, 1)], _f64(_geqrf), "column", grad=False)]),
    ]


def _geqrf(a, attrs):
    """numpy's raw QR is LAPACK's geqrf, transposed (the reference LAPACK here is numpy's)."""
    flat = a.reshape((-1,) + a.shape[-2:])
    outs = [np.linalg.qr(x, mode="raw") for x in flat]
    return (np.stack([h.T for h, _ in outs]).reshape(a.shape),
            np.stack([tau for _, tau in outs]).reshape(a.shape[:-2] + (min(a.shape[-2:]),)))
