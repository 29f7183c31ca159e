"""The dense algorithms numpy's linalg lacks, vectorised over the batch (``xp``: numpy or
cupy): LU with partial pivoting (LAPACK getrf's pivot choice), triangular substitution
(trsm: no pivoting, a zero on the diagonal gives inf/nan as PyTorch's) and the matrix
exponential (Higham's scaling and squaring with the degree-13 Pade approximant)."""
from __future__ import annotations

import math


def lu_factor(xp, a):
    """(P, L, U) with A = P L U for (..., m, n): L unit lower (m, k), U upper (k, n)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    work = a.reshape((math.prod(batch), m, n)).copy()
    rows = xp.arange(work.shape[0])
    perm = xp.broadcast_to(xp.arange(m), (work.shape[0], m)).copy()
    for j in range(k):
        p = j + xp.argmax(xp.abs(work[:, j:, j]), axis=1)  # the first largest, as LAPACK's idamax
        top, pivot_row = work[rows, j].copy(), work[rows, p].copy()
        work[rows, j], work[rows, p] = pivot_row, top
        pj, pp = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j], perm[rows, p] = pp, pj
        pivot = work[:, j, j][:, None]
        safe = xp.where(pivot == 0, 1.0, pivot)
        work[:, j + 1:, j] = xp.where(pivot == 0, work[:, j + 1:, j], work[:, j + 1:, j] / safe)
        work[:, j + 1:, j + 1:] -= work[:, j + 1:, j:j + 1] * work[:, j:j + 1, j + 1:]
    low = xp.tril(work[:, :, :k], -1) + xp.eye(m, k, dtype=a.dtype)
    up = xp.triu(work[:, :k, :])
    p_mat = xp.zeros((work.shape[0], m, m), a.dtype)
    p_mat[rows[:, None], perm, xp.arange(m)[None, :]] = 1.0  # row perm[i] of A is row i of L U
    return p_mat.reshape(batch + (m, m)), low.reshape(batch + (m, k)), up.reshape(batch + (k, n))


def triangular_solve(xp, a, rhs, upper: bool, unit: bool):
    """X with tri(A) X = B by substitution, one row of X per step (vectorised over the batch
    and B's columns)."""
    n = a.shape[-1]
    x = xp.zeros(rhs.shape, rhs.dtype)
    order = range(n - 1, -1, -1) if upper else range(n)
    with _quiet(xp):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            acc = rhs[..., i, :] - xp.einsum("...j,...jk->...k", a[..., i, done], x[..., done, :])
            x[..., i, :] = acc if unit else acc / a[..., i, i][..., None]
    return x


class _quiet:
    """numpy's errstate (a zero diagonal divides by zero, as PyTorch's trsm does silently)."""

    def __init__(self, xp):
        self.state = xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") else None

    def __enter__(self):
        if self.state is not None:
            self.state.__enter__()

    def __exit__(self, *exc):
        if self.state is not None:
            self.state.__exit__(*exc)


_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(xp, a):
    """exp(A) for (..., n, n): each matrix scaled by 2^-s (s from its 1-norm), the [13/13] Pade
    approximant, then squared s times (matrices needing fewer squarings keep their value)."""
    n = a.shape[-1]
    if a.size == 0:
        return a.copy()
    norm = xp.abs(a).sum(axis=-2).max(axis=-1)
    with _quiet(xp):
        s = xp.maximum(0, xp.ceil(xp.log2(xp.maximum(norm, 1e-300) / _THETA13))).astype(int)
    x = a / (2.0 ** s)[..., None, None]
    eye = xp.eye(n, dtype=a.dtype)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    b = _PADE13
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    out = xp.linalg.solve(v - u, v + u)
    steps = int(s.max()) if s.size else 0
    for i in range(steps):
        out = xp.where((s > i)[..., None, None], out @ out, out)
    return out
