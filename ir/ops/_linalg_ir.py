"""Matrix helpers the linalg vjp rules share: each emits IR through a Builder, so the
gradients of the LAPACK ops are graph ops (they compile, and run eagerly by the same rules).
Matrix dims are static here (graphc/ops/linalg_core.py pins them before recording), so masks
and identities are constants; batch dims may be symbolic and broadcast through.
"""
from __future__ import annotations

import numpy as np

from ._vjp import scalar


def mT(b, x):
    """Swap the last two dims."""
    perm = list(range(x.type.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return b.emit1("permute", [x], {"perm": perm})


def mm(b, x, y):
    return b.emit1("matmul", [x, y])


def add(b, *xs):
    xs = [x for x in xs if x is not None]
    out = xs[0]
    for x in xs[1:]:
        out = b.emit1("add", [out, x])
    return out


def sub(b, x, y):
    return b.emit1("sub", [x, y])


def mul(b, x, y):
    return b.emit1("mul", [x, y])


def div(b, x, y):
    return b.emit1("div", [x, y])


def neg(b, x):
    return b.emit1("neg", [x])


def const(b, array, like):
    """A constant array in ``like``'s dtype."""
    return b.constant(np.asarray(array, dtype=like.type.dtype.numpy), like.type.dtype)


def num(b, value, like):
    return scalar(b, value, like.type.dtype)


def tri_mask(rows: int, cols: int, lower: bool, k: int = 0):
    ones = np.ones((rows, cols))
    return np.tril(ones, k) if lower else np.triu(ones, k)


def tril(b, x, k=0):
    return mul(b, x, const(b, tri_mask(*x.type.shape[-2:], True, k), x))


def triu(b, x, k=0):
    return mul(b, x, const(b, tri_mask(*x.type.shape[-2:], False, k), x))


def eye(b, n, like, cols=None):
    return const(b, np.eye(n, n if cols is None else cols), like)


def diagonal(b, x):
    """The main diagonal of a square (..., n, n) as (..., n)."""
    n = x.type.shape[-1]
    return b.emit1("sum", [mul(b, x, eye(b, n, x))], {"dims": [x.type.rank - 1], "keepdim": False})


def diag_embed(b, v):
    """(..., n) -> (..., n, n) with ``v`` on the diagonal."""
    n = v.type.shape[-1]
    return mul(b, unsqueeze(b, v, -2), eye(b, n, v))


def unsqueeze(b, x, dim):
    shape = list(x.type.shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return b.emit1("reshape", [x], {"shape": shape})


def set_diagonal(b, x, v):
    """``x`` with its diagonal replaced by ``v`` (None: zeroed)."""
    n = x.type.shape[-1]
    off = mul(b, x, const(b, 1.0 - np.eye(n), x))
    return off if v is None else add(b, off, diag_embed(b, v))


def narrow(b, x, dim, length):
    """The first ``length`` entries along ``dim`` (a negative dim)."""
    axis = dim % x.type.rank
    if x.type.shape[axis] == length:
        return x
    slices = [[None, None, 1] for _ in range(x.type.rank)]
    slices[axis] = [0, length, 1]
    return b.emit1("slice", [x], {"slices": slices})


def solve(b, a, rhs):
    return b.emit1("linalg_solve", [a, rhs])


def solve_tri(b, a, rhs, upper, unitriangular=False):
    """``a^-1 rhs`` for triangular ``a`` (left side)."""
    return b.emit1("linalg_solve_triangular", [a, rhs], {"upper": upper, "unitriangular": unitriangular})


def solve_tri_right(b, a, rhs, upper, unitriangular=False):
    """``rhs a^-1`` for triangular ``a``: (a^T)^-1 rhs^T, transposed back."""
    return mT(b, solve_tri(b, mT(b, a), mT(b, rhs), not upper, unitriangular))


def sym_skew(b, x):
    """``x - x^T``."""
    return sub(b, x, mT(b, x))
