"""The vjp rules of the LAPACK ops (ir/ops/linalg_lapack.py): the matrix-calculus formulas of
PyTorch's FunctionsManual.cpp (real case), emitted as graph ops through ``_linalg_ir``."""
from __future__ import annotations

import numpy as np

from ..errors import GraphcError
from ._linalg_ir import (add, const, diag_embed, diagonal, div, eye, mT, mm, mul, narrow, neg, num, set_diagonal,
                         solve, solve_tri, solve_tri_right, sub, sym_skew, tril, triu, unsqueeze)


def _inv(b, a):
    return b.emit1("linalg_inv", [a])


def vjp_inv(b, node, cts, needs):
    """d(A^-1) = -A^-1 dA A^-1, so gA = -Y^T g Y^T."""
    yt = mT(b, node.outputs[0])
    return [neg(b, mm(b, mm(b, yt, cts[0]), yt))]


def _outer_scalar(b, g):
    return unsqueeze(b, unsqueeze(b, g, -1), -1)


def vjp_det(b, node, cts, needs):
    """gA = g adj(A)^T, the cofactor matrix, from the SVD A = U S Vh (adjugate-safe, so singular
    matrices get PyTorch's gradient too): cof(A) = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh."""
    a = node.inputs[0]
    n = a.type.shape[-1]
    if n == 0:
        return [mul(b, a, num(b, 0.0, a))]
    u, s, vh = b.emit("linalg_svd", [a], {"full_matrices": False})
    others = add(b, mul(b, unsqueeze(b, s, -2), const(b, 1.0 - np.eye(n), s)), eye(b, n, s))  # row i: s_j, 1 at j = i
    rest = _prod_last(b, others)
    sign = mul(b, b.emit1("linalg_det", [u]), b.emit1("linalg_det", [vh]))
    scale = mul(b, unsqueeze(b, mul(b, cts[0], sign), -1), rest)
    return [mm(b, mul(b, u, unsqueeze(b, scale, -2)), vh)]


def _prod_last(b, x):
    """The product over the last dim by halving (log2(n) multiplies; zeros stay exact)."""
    while x.type.shape[-1] > 1:
        if x.type.shape[-1] % 2:
            ones = b.emit1("broadcast_to", [const(b, 1.0, x)], {"shape": list(x.type.shape[:-1]) + [1]})
            x = _cat(b, [x, ones], -1)
        x = mul(b, _strided(b, x, 0), _strided(b, x, 1))
    return b.emit1("reshape", [x], {"shape": list(x.type.shape[:-1])})


def _strided(b, x, start):
    slices = [[None, None, 1] for _ in range(x.type.rank)]
    slices[-1] = [start, None, 2]
    return b.emit1("slice", [x], {"slices": slices})


def vjp_slogdet(b, node, cts, needs):
    """The sign has no gradient; logabsdet's is g A^-T."""
    return [mul(b, _outer_scalar(b, cts[1]), mT(b, _inv(b, node.inputs[0])))]


def vjp_solve(b, node, cts, needs):
    """X = A^-1 B: gB = A^-T g, gA = -gB X^T (broadcast batch dims are summed by autodiff)."""
    a, x = node.inputs[0], node.outputs[0]
    gb = solve(b, mT(b, a), cts[0])
    return [neg(b, mm(b, gb, mT(b, x))) if needs[0] else None, gb if needs[1] else None]


def vjp_solve_triangular(b, node, cts, needs):
    """As solve, with gA kept on the triangle the solve read (strictly, for unit diagonals)."""
    a, x = node.inputs[0], node.outputs[0]
    upper, unit = node.attrs["upper"], node.attrs["unitriangular"]
    gb = solve_tri(b, mT(b, a), cts[0], not upper, unit)
    ga = None
    if needs[0]:
        full = neg(b, mm(b, gb, mT(b, x)))
        shift = (1 if upper else -1) if unit else 0
        ga = _as(b, triu(b, full, shift) if upper else tril(b, full, shift), a)
    return [ga, _as(b, gb, node.inputs[1]) if needs[1] else None]


def _as(b, grad, like):
    """The cotangent in its input's dtype (the op promotes f32 with f64)."""
    want = like.type.dtype
    return grad if grad.type.dtype is want else b.emit1("cast", [grad], {"dtype": want.name})


def vjp_cholesky(b, node, cts, needs):
    """A = L L^T: gA = L^-T phi(L^T gL) L^-1, symmetrised (phi: the lower triangle, diagonal halved)."""
    upper = node.attrs["upper"]
    low = mT(b, node.outputs[0]) if upper else node.outputs[0]
    gl = mT(b, cts[0]) if upper else cts[0]
    inner = mm(b, mT(b, low), gl)
    phi = add(b, tril(b, inner, -1), mul(b, diag_embed(b, diagonal(b, inner)), num(b, 0.5, inner)))
    ga = solve_tri(b, mT(b, low), phi, True)
    ga = solve_tri_right(b, low, ga, False)
    return [mul(b, add(b, ga, mT(b, ga)), num(b, 0.5, ga))]


def vjp_eigh(b, node, cts, needs):
    """gA = V (diag(gL) + skew(V^T gV) / 2 / E) V^T, E_ij = L_j - L_i (PyTorch's, not symmetrised)."""
    lam, v = node.outputs
    gl, gv = cts
    if gv is None:
        inner = diag_embed(b, gl)
    else:
        vgv = mul(b, sym_skew(b, mm(b, mT(b, v), gv)), num(b, 0.5, v))
        n = lam.type.shape[-1]
        gap = add(b, sub(b, unsqueeze(b, lam, -2), unsqueeze(b, lam, -1)), eye(b, n, lam))
        inner = set_diagonal(b, div(b, vgv, gap), gl)
    return [mm(b, mm(b, v, inner), mT(b, v))]


def vjp_svd(b, node, cts, needs):
    """PyTorch's svd_backward (real case) on the reduced factors (full_matrices narrows them)."""
    u, s, vh = node.outputs
    gu, gs, gvh = cts
    k = s.type.shape[-1]
    m, n = u.type.shape[-2], vh.type.shape[-1]
    u, vh = narrow(b, u, -1, k), narrow(b, vh, -2, k)
    gu = narrow(b, gu, -1, k) if gu is not None else None
    gvh = narrow(b, gvh, -2, k) if gvh is not None else None
    if gu is None and gvh is None:
        if gs is None:
            return [None]
        return [mm(b, u, mul(b, unsqueeze(b, gs, -1), vh)) if m >= n
                else mm(b, mul(b, u, unsqueeze(b, gs, -2)), vh)]
    s_row, s_col = unsqueeze(b, s, -2), unsqueeze(b, s, -1)
    s2 = mul(b, s, s)
    gap = add(b, sub(b, unsqueeze(b, s2, -2), unsqueeze(b, s2, -1)), eye(b, k, s))
    terms = []
    if gu is not None:
        terms.append(mul(b, sym_skew(b, mm(b, mT(b, u), gu)), s_row))
    if gvh is not None:
        terms.append(mul(b, s_col, sym_skew(b, mm(b, vh, mT(b, gvh)))))
    ga = div(b, add(b, *terms), gap)
    if gs is not None:
        ga = add(b, ga, diag_embed(b, gs))
    if m > n and gu is not None:
        ga = mm(b, u, ga)
        gus = div(b, gu, s_row)
        ga = mm(b, sub(b, add(b, ga, gus), mm(b, u, mm(b, mT(b, u), gus))), vh)
    elif m < n and gvh is not None:
        ga = mm(b, ga, vh)
        sgv = div(b, gvh, s_col)
        ga = mm(b, u, sub(b, add(b, ga, sgv), mm(b, mm(b, sgv, mT(b, vh)), vh)))
    else:
        ga = mm(b, u, mm(b, ga, vh))
    return [ga]


def vjp_qr(b, node, cts, needs):
    """PyTorch's linalg_qr_backward: M = gR R^T - Q^T gQ; tall: (Q syminvadj(triu M) + gQ) R^-T;
    wide: Q tril(-M + M^T) R1^-T padded with zero columns, plus Q gR."""
    q, r = node.outputs
    gq, gr = cts
    mode = node.attrs["mode"]
    m, n = r.type.shape[-2] if mode == "r" else q.type.shape[-2], r.type.shape[-1]
    if mode == "r" or (mode == "complete" and m > n):
        raise GraphcError(f"linalg.qr: no derivative with mode={mode!r} (as PyTorch): Q is "
                          + ("not computed" if mode == "r" else "not determined by A for a tall A"))
    parts = []
    if gr is not None:
        parts.append(mm(b, gr, mT(b, r)))
    if gq is not None:
        parts.append(neg(b, mm(b, mT(b, q), gq)))
    if not parts:
        return [None]
    big_m = add(b, *parts)
    if m >= n:
        up = triu(b, big_m)
        sym = set_diagonal(b, add(b, up, mT(b, up)), diagonal(b, up))
        rhs = add(b, mm(b, q, sym), gq)
        return [solve_tri_right(b, mT(b, r), rhs, False)]
    lower = tril(b, sub(b, mT(b, big_m), big_m))
    r1 = narrow(b, r, -1, m)
    lead = solve_tri_right(b, mT(b, r1), mm(b, q, lower), False)
    ga = _cat(b, [lead, _zeros(b, lead, list(lead.type.shape[:-1]) + [n - m])], -1)
    return [add(b, ga, mm(b, q, gr)) if gr is not None else ga]


def vjp_lu(b, node, cts, needs):
    """A = P L U, PyTorch's linalg_lu_backward: square gA = P L^-T (tril(L^T gL, -1) +
    triu(gU U^T)) U^-T; the wide and tall cases add the blocks beyond the square part."""
    p, low, up = node.outputs
    gl, gu = cts[1], cts[2]
    m, n = low.type.shape[-2], up.type.shape[-1]
    k = min(m, n)
    if gl is None and gu is None:
        return [None]
    if m == n:
        ga = add(b, tril(b, mm(b, mT(b, low), gl), -1) if gl is not None else None,
                 triu(b, mm(b, gu, mT(b, up))) if gu is not None else None)
        ga = solve_tri_right(b, mT(b, up), ga, False)
        return [mm(b, p, solve_tri(b, mT(b, low), ga, True, True))]
    if m < n:
        u1 = narrow(b, up, -1, k)
        ga = add(b, mm(b, mT(b, low), gl) if gl is not None else None,
                 neg(b, mm(b, triu(b, gu), mT(b, up))) if gu is not None else None)
        ga = solve_tri_right(b, mT(b, u1), tril(b, ga, -1), False)
        if gu is not None:
            ga = _cat(b, [add(b, ga, triu(b, narrow(b, gu, -1, k))), _tail(b, gu, -1, k)], -1)
        ga = solve_tri(b, mT(b, low), ga, True, True)
        if gu is None:
            ga = _cat(b, [ga, _zeros(b, ga, list(ga.type.shape[:-1]) + [n - k])], -1)
        return [mm(b, p, ga)]
    l1 = narrow(b, low, -2, k)
    ga = add(b, mm(b, gu, mT(b, up)) if gu is not None else None,
             neg(b, mm(b, mT(b, low), tril(b, gl, -1))) if gl is not None else None)
    ga = solve_tri(b, mT(b, l1), triu(b, ga), True, True)
    if gl is not None:
        ga = _cat(b, [add(b, ga, tril(b, narrow(b, gl, -2, k), -1)), _tail(b, gl, -2, k)], -2)
    ga = solve_tri_right(b, mT(b, up), ga, False)
    if gl is None:
        ga = _cat(b, [ga, _zeros(b, ga, list(ga.type.shape[:-2]) + [m - k, n])], -2)
    return [mm(b, p, ga)]


def _cat(b, xs, dim):
    return b.emit1("concat", xs, {"dim": dim % xs[0].type.rank})


def _zeros(b, like, shape):
    return b.emit1("broadcast_to", [const(b, 0.0, like)], {"shape": shape})


def _tail(b, x, dim, start):
    axis = dim % x.type.rank
    slices = [[None, None, 1] for _ in range(x.type.rank)]
    slices[axis] = [start, None, 1]
    return b.emit1("slice", [x], {"slices": slices})


def vjp_matrix_exp(b, node, cts, needs):
    """gA = the upper-right block of exp([[A^T, g], [0, A^T]]) (PyTorch's differential)."""
    a, g = node.inputs[0], cts[0]
    at = mT(b, a)
    zero = mul(b, at, num(b, 0.0, at))
    top = b.emit1("concat", [at, g], {"dim": at.type.rank - 1})
    bottom = b.emit1("concat", [zero, at], {"dim": at.type.rank - 1})
    big = b.emit1("linalg_matrix_exp", [b.emit1("concat", [top, bottom], {"dim": at.type.rank - 2})])
    n = a.type.shape[-1]
    return [_tail(b, narrow(b, big, -2, n), -1, n)]
