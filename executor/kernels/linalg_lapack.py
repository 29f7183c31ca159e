"""Kernels of ir/ops/linalg_lapack.py: numpy's LAPACK (``xp.linalg``: cupy's on GPU).

Inverses, determinants, solves, Cholesky, LU and the matrix exponential compute in float64
and round once to the output dtype: float32 results are then the correctly rounded values
PyTorch's float32 LAPACK approximates (the op_db harness arbitrates with PyTorch's float64).
QR, SVD and eigh run in the input's dtype (their sign conventions follow LAPACK's). A
singular or non-positive-definite input raises GraphcError where PyTorch raises.
"""
from __future__ import annotations

import math

from ...ir.errors import GraphcError
from ._linalg_algos import lu_factor, matrix_exp, triangular_solve


def _guard(op, fn):
    """LAPACK's LinAlgError as graphc's error (the message says which op and why)."""
    def run(*arrays):
        try:
            return fn(*arrays)
        except GraphcError:
            raise
        except Exception as e:  # numpy.linalg.LinAlgError (cupy's raises its own)
            if type(e).__name__ != "LinAlgError":
                raise
            raise GraphcError(f"{op}: {e} (the input is singular or not positive-definite, as PyTorch reports)") from None
    return run


def _f64(xp, spec, fn):
    """Run ``fn`` on float64 copies; results rounded to the output dtypes."""
    dtypes = [t.dtype.numpy for t in spec.out_types]

    def run(*arrays):
        out = fn(*(a.astype(xp.float64) for a in arrays))
        outs = out if isinstance(out, tuple) else (out,)
        cast = tuple(xp.asarray(o).astype(d) for o, d in zip(outs, dtypes))
        return cast if isinstance(out, tuple) else cast[0]
    return run


def _inv(xp, spec):
    return _guard("linalg.inv", _f64(xp, spec, xp.linalg.inv))


def _det(xp, spec):
    return _f64(xp, spec, xp.linalg.det)


def _slogdet(xp, spec):
    return _f64(xp, spec, lambda a: tuple(xp.linalg.slogdet(a)))


def _broadcast_pair(xp, spec):
    shape_a = spec.out_types[0].shape[:-2] + spec.in_types[0].shape[-2:]
    shape_b = spec.out_types[0].shape

    def pair(a, rhs):
        return xp.broadcast_to(a, shape_a), xp.broadcast_to(rhs, shape_b)
    return pair


def _solve(xp, spec):
    pair = _broadcast_pair(xp, spec)
    return _guard("linalg.solve", _f64(xp, spec, lambda a, rhs: xp.linalg.solve(*pair(a, rhs))))


def _solve_triangular(xp, spec):
    pair = _broadcast_pair(xp, spec)
    upper, unit = spec.attrs["upper"], spec.attrs["unitriangular"]
    return _f64(xp, spec, lambda a, rhs: triangular_solve(xp, *pair(a, rhs), upper, unit))


def _cholesky(xp, spec):
    upper = spec.attrs["upper"]

    def run(a):
        low = xp.linalg.cholesky(a)
        return xp.swapaxes(low, -1, -2) if upper else low
    return _guard("linalg.cholesky", _f64(xp, spec, run))


def _qr(xp, spec):
    mode = spec.attrs["mode"]
    dtype = spec.out_types[1].dtype.numpy

    def run(a):
        if mode == "r":
            return xp.zeros((0,), dtype), xp.ascontiguousarray(xp.linalg.qr(a, mode="r"))
        q, r = xp.linalg.qr(a, mode=mode)
        return xp.ascontiguousarray(q), xp.ascontiguousarray(r)
    return run


def _svd(xp, spec):
    full = spec.attrs["full_matrices"]

    def run(a):
        u, s, vh = xp.linalg.svd(a, full_matrices=full)
        return xp.ascontiguousarray(u), xp.ascontiguousarray(s), xp.ascontiguousarray(vh)
    return run


def _eigh(xp, spec):
    uplo = "U" if spec.attrs["upper"] else "L"

    def run(a):
        w, v = xp.linalg.eigh(a, UPLO=uplo)
        return xp.ascontiguousarray(w), xp.ascontiguousarray(v)
    return run


def _lu(xp, spec):
    return _f64(xp, spec, lambda a: lu_factor(xp, a))


def _matrix_exp(xp, spec):
    return _f64(xp, spec, lambda a: matrix_exp(xp, a))


def _geqrf(xp, spec):
    """numpy's qr(mode='raw') is LAPACK's geqrf output, transposed (Fortran order); one matrix
    at a time (the raw mode takes no batches)."""
    import numpy as np

    def run(a):
        host = np.asarray(a.get() if hasattr(a, "get") else a)
        m, n = host.shape[-2:]
        flat = host.reshape((math.prod(host.shape[:-2]), m, n))
        qr = np.empty_like(flat)
        tau = np.empty((flat.shape[0], min(m, n)), host.dtype)
        for i, mat in enumerate(flat):
            if min(m, n):
                h, t = np.linalg.qr(mat, mode="raw")
                qr[i], tau[i] = h.T, t
        shape = host.shape[:-2]
        return xp.asarray(qr.reshape(host.shape)), xp.asarray(tau.reshape(shape + (min(m, n),)))
    return run


KERNELS = {
    "linalg_inv": _inv, "linalg_det": _det, "linalg_slogdet": _slogdet, "linalg_solve": _solve,
    "linalg_solve_triangular": _solve_triangular, "linalg_cholesky": _cholesky, "linalg_qr": _qr,
    "linalg_svd": _svd, "linalg_eigh": _eigh, "linalg_lu": _lu, "linalg_matrix_exp": _matrix_exp,
    "linalg_geqrf": _geqrf,
}
