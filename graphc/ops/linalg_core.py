"""``gc.linalg``'s factorizations and solves over the LAPACK primitives of
ir/ops/linalg_lapack.py (gradients from their vjp rules). Results are named tuples as
PyTorch's (``torch.return_types``); ``*_ex`` variants and ``lu_factor`` return LAPACK's int32
``info``/pivots, a dtype graphc does not have, so they are refused.
"""
from __future__ import annotations

import collections
import functools

from ..core.dispatch import apply
from ..core.symint import SymInt
from ..ir.errors import GraphcError, ShapeError

SlogdetResult = collections.namedtuple("slogdet", "sign logabsdet")
QRResult = collections.namedtuple("qr", "Q R")
SVDResult = collections.namedtuple("svd", "U S Vh")
EighResult = collections.namedtuple("eigh", "eigenvalues eigenvectors")
LUResult = collections.namedtuple("lu", "P L U")


def takes_out(fn):
    """PyTorch's ``out=``: the result is copied into the given tensor(s) (same shape and
    dtype; graphc does not resize them), which are returned."""
    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        return result if out is None else _write_out(result, out, fn.__name__)
    return wrapper


def _write_out(result, out, op):
    results = result if isinstance(result, tuple) else (result,)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(results):
        raise GraphcError(f"linalg.{op}: out= needs {len(results)} tensors, got {len(outs)}")
    for r, o in zip(results, outs):
        if tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype:
            raise GraphcError(f"linalg.{op}: out= is {o.dtype.name}{list(o.shape)} but the result is "
                              f"{r.dtype.name}{list(r.shape)} (graphc does not resize out=)")
        o.copy_(r)
    return type(result)(*outs) if isinstance(result, tuple) else outs[0]


def matrix_dims(A, op, square=False):
    """(m, n) of a batch of matrices (..., m, n). A traced symbolic matrix dim (the batch
    symbol on a 2-D input) is pinned to its example size: the trace starts again with it fixed
    (graphc/tracing.py PinnedDims), since LAPACK's shapes are static."""
    if A.ndim < 2:
        raise ShapeError(f"{op}: expected a tensor with 2 or more dims (a batch of matrices), got shape {tuple(A.shape)}")
    m, n = static_dims(A, (-2, -1), op)
    if A.dtype.name not in ("float32", "float64"):  # (PyTorch refuses integers and half precision)
        raise ShapeError(f"{op}: expected a float32 or float64 tensor (as PyTorch), got {A.dtype.name}")
    if square and m != n:
        raise ShapeError(f"{op}: A must be batches of square matrices, but they are {m} by {n} matrices")
    return m, n


def static_dims(t, axes, op):
    """The sizes of ``t``'s dims ``axes``. A traced symbolic one (the batch symbol on a 2-D
    input) is pinned to its example size and the trace starts again with it fixed
    (graphc/tracing.py PinnedDims): LAPACK's shapes are static."""
    sizes = [t.shape[a] for a in axes]
    if any(not isinstance(t.dims[a], int) for a in axes):
        for s in sizes:
            int(s)  # pins the symbol (SymInt.__int__)
        raise ShapeError(f"{op}: dims {[t.dims[a] for a in axes]} are symbolic; {op} needs them static")
    return [int.__int__(s) if isinstance(s, SymInt) else int(s) for s in sizes]


def static_last(t, op):
    """The size of ``t``'s last dim (pinned when symbolic, as :func:`static_dims`)."""
    if t.ndim == 0:
        raise ShapeError(f"{op}: expected a tensor with at least one dim, got a 0-d tensor")
    return static_dims(t, (-1,), op)[0]


def refuse_int32(op, what):
    raise GraphcError(f"{op} returns {what} as int32 (LAPACK's), a dtype graphc does not have; use "
                      f"{op.replace('_ex', '')} (it raises on failure) instead")


@takes_out
def inv(A):
    """The inverse of square matrices (..., n, n).

    >>> import graphc as gc
    >>> gc.linalg.inv(gc.tensor([[2.0, 0.0], [0.0, 4.0]])).numpy().tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    matrix_dims(A, "linalg.inv", square=True)
    return apply("linalg_inv", [A])


@takes_out
def det(A):
    """The determinant of square matrices.

    >>> import graphc as gc
    >>> gc.linalg.det(gc.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
    -2.0
    """
    matrix_dims(A, "linalg.det", square=True)
    return apply("linalg_det", [A])


@takes_out
def slogdet(A):
    """``(sign, logabsdet)`` of the determinant.

    >>> import graphc as gc
    >>> s, l = gc.linalg.slogdet(gc.tensor([[-2.0, 0.0], [0.0, 1.0]]))
    >>> s.item(), round(l.item(), 6)
    (-1.0, 0.693147)
    """
    matrix_dims(A, "linalg.slogdet", square=True)
    return SlogdetResult(*apply("linalg_slogdet", [A]))


def _is_vector_rhs(A, B):
    """PyTorch's rule: B is a (batch of) vector(s) when 1-D, or when its shape is A's minus the last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.dims) == tuple(A.dims[:-1]))


@takes_out
def solve(A, B, *, left=True):
    """X with A X = B (``left=False``: X A = B); B may be a (batch of) vector(s).

    >>> import graphc as gc
    >>> gc.linalg.solve(gc.tensor([[2.0, 0.0], [0.0, 4.0]]), gc.tensor([2.0, 2.0])).numpy().tolist()
    [1.0, 0.5]
    """
    matrix_dims(A, "linalg.solve", square=True)
    if not left:  # X A = B is A^T X^T = B^T (a vector B stays a vector)
        return solve(A.mT, B) if _is_vector_rhs(A, B) else solve(A.mT, B.mT).mT
    if _is_vector_rhs(A, B):
        return apply("linalg_solve", [A, B.unsqueeze(-1)]).squeeze(-1)
    matrix_dims(B, "linalg.solve")
    return apply("linalg_solve", [A, B])


@takes_out
def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with tri(A) X = B reading A's ``upper`` or lower triangle only (``left=False``: X A = B).

    >>> import graphc as gc
    >>> a = gc.tensor([[2.0, 5.0], [0.0, 4.0]])
    >>> gc.linalg.solve_triangular(a, gc.tensor([[2.0], [4.0]]), upper=True).numpy().tolist()
    [[-1.5], [1.0]]
    """
    matrix_dims(A, "linalg.solve_triangular", square=True)
    matrix_dims(B, "linalg.solve_triangular")
    if not left:
        return apply("linalg_solve_triangular", [A.mT, B.mT], {"upper": not upper, "unitriangular": unitriangular}).mT
    return apply("linalg_solve_triangular", [A, B], {"upper": bool(upper), "unitriangular": bool(unitriangular)})


@takes_out
def cholesky(A, *, upper=False):
    """The Cholesky factor L (A = L L^T) of symmetric positive-definite matrices (``upper``: L^T).

    >>> import graphc as gc
    >>> gc.linalg.cholesky(gc.tensor([[4.0, 2.0], [2.0, 2.0]])).numpy().tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    matrix_dims(A, "linalg.cholesky", square=True)
    return apply("linalg_cholesky", [A], {"upper": bool(upper)})


@takes_out
def qr(A, mode="reduced"):
    """``(Q, R)`` with A = Q R (``mode``: 'reduced', 'complete' or 'r', where Q is empty).

    >>> import graphc as gc
    >>> q, r = gc.linalg.qr(gc.tensor([[3.0], [4.0]]))
    >>> abs(r.item())
    5.0
    """
    matrix_dims(A, "linalg.qr")
    return QRResult(*apply("linalg_qr", [A], {"mode": mode}))


@takes_out
def svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)`` with A = U diag(S) Vh, S descending.

    >>> import graphc as gc
    >>> gc.linalg.svd(gc.tensor([[3.0, 0.0], [0.0, -4.0]])).S.numpy().tolist()
    [4.0, 3.0]
    """
    matrix_dims(A, "linalg.svd")
    return SVDResult(*apply("linalg_svd", [A], {"full_matrices": bool(full_matrices)}))


@takes_out
def svdvals(A, *, driver=None):
    """The singular values, descending.

    >>> import graphc as gc
    >>> gc.linalg.svdvals(gc.tensor([[0.0, 2.0], [1.0, 0.0]])).numpy().tolist()
    [2.0, 1.0]
    """
    matrix_dims(A, "linalg.svdvals")
    return apply("linalg_svd", [A], {"full_matrices": False})[1]


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise ShapeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "U"


@takes_out
def eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of symmetric matrices (ascending; read from the ``UPLO`` triangle).

    >>> import graphc as gc
    >>> gc.linalg.eigh(gc.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues.numpy().tolist()
    [1.0, 3.0]
    """
    matrix_dims(A, "linalg.eigh", square=True)
    return EighResult(*apply("linalg_eigh", [A], {"upper": _uplo(UPLO)}))


@takes_out
def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric matrices, ascending.

    >>> import graphc as gc
    >>> gc.linalg.eigvalsh(gc.tensor([[2.0, 0.0], [0.0, 1.0]])).numpy().tolist()
    [1.0, 2.0]
    """
    matrix_dims(A, "linalg.eigvalsh", square=True)
    return apply("linalg_eigh", [A], {"upper": _uplo(UPLO)})[0]


@takes_out
def lu(A, *, pivot=True):
    """``(P, L, U)`` with A = P L U (partial pivoting, as LAPACK's getrf).

    >>> import graphc as gc
    >>> p, l, u = gc.linalg.lu(gc.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> (p @ l @ u).numpy().tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    matrix_dims(A, "linalg.lu")
    if not pivot:
        raise GraphcError("linalg.lu: pivot=False is not supported (PyTorch supports it on CUDA only)")
    return LUResult(*apply("linalg_lu", [A]))


def matrix_exp(A):
    """The matrix exponential.

    >>> import graphc as gc
    >>> gc.linalg.matrix_exp(gc.zeros(2, 2)).numpy().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    matrix_dims(A, "linalg.matrix_exp", square=True)
    return apply("linalg_matrix_exp", [A])


def inv_ex(A, *, check_errors=False, out=None):
    """Refused: PyTorch's ``info`` is int32 (see :func:`inv`)."""
    refuse_int32("linalg.inv_ex", "info")


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """Refused: PyTorch's ``info`` is int32 (see :func:`solve`)."""
    refuse_int32("linalg.solve_ex", "info")


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """Refused: PyTorch's ``info`` is int32 (see :func:`cholesky`)."""
    refuse_int32("linalg.cholesky_ex", "info")


def lu_factor(A, *, pivot=True, out=None):
    """Refused: PyTorch's pivots are int32 (:func:`lu` gives P, L, U)."""
    raise GraphcError("linalg.lu_factor returns LAPACK's pivots as int32, a dtype graphc does not have; "
                      "linalg.lu gives the factorization as (P, L, U)")


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """Refused: PyTorch's pivots and info are int32 (:func:`lu` gives P, L, U)."""
    lu_factor(A)
