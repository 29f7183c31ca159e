"""torch.linalg's LAPACK primitives (issue #34): inverse, determinants, solves, Cholesky, QR,
SVD, symmetric eigendecomposition, LU with partial pivoting, the matrix exponential and
geqrf. Kernels are numpy's LAPACK (cupy's on GPU) in executor/kernels/linalg_lapack.py; the
vjps (ir/ops/_linalg_vjp.py) are PyTorch's formulas as graph ops. Everything else of
``gc.linalg`` (norms, pinv, lstsq, matrix_power...) is a composite in graphc/ops/linalg_*.py.

Operands are batches of matrices (..., m, n) of float32/float64 (PyTorch refuses integers);
the matrix dims are static (the surface pins a traced symbolic one), batch dims may not be.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from . import _linalg_vjp as V
from ._shapes import broadcast, fmt_shape


def _matrix(t, op, square=False):
    if t.dtype not in (DType.float32, DType.float64):  # (PyTorch refuses integers and half precision)
        raise ShapeError(f"{op}: expected a float32 or float64 tensor (as PyTorch), got {t.dtype.name}")
    if t.rank < 2:
        raise ShapeError(f"{op}: expected a tensor of rank >= 2 (a batch of matrices), got {t}")
    m, n = t.shape[-2:]
    if not (isinstance(m, int) and isinstance(n, int)):
        raise ShapeError(f"{op}: the matrix dims must be static, got {fmt_shape(t.shape)}")
    if square and m != n:
        raise ShapeError(f"{op}: expected square matrices, got {m} by {n}")
    return t.shape[:-2], m, n


def _same(op):
    def rule(in_types, attrs):
        _matrix(in_types[0], op, square=True)
        return [in_types[0]]
    return rule


def _det(in_types, attrs):
    batch, _, _ = _matrix(in_types[0], "linalg.det", square=True)
    return [TensorType(batch, in_types[0].dtype)]


def _slogdet(in_types, attrs):
    batch, _, _ = _matrix(in_types[0], "linalg.slogdet", square=True)
    return [TensorType(batch, in_types[0].dtype)] * 2


def _solve(op, promotes=False):
    """linalg.solve takes one dtype; solve_triangular computes in A's (B is cast), as PyTorch."""
    def rule(in_types, attrs):
        a, rhs = in_types
        if promotes and a.dtype.is_float:
            rhs = rhs.with_dtype(a.dtype)
        batch, n, _ = _matrix(a, op, square=True)
        rb, rm, k = _matrix(rhs, op)
        if a.dtype is not rhs.dtype:
            raise ShapeError(f"{op}: A is {a.dtype.name} but B is {rhs.dtype.name} (PyTorch needs one dtype)")
        if rm != n:
            raise ShapeError(f"{op}: A is {n} by {n} but B has {rm} rows")
        return [TensorType(broadcast(batch, rb) + (n, k), a.dtype)]
    return rule


def _qr(in_types, attrs):
    a = in_types[0]
    batch, m, n = _matrix(a, "linalg.qr")
    mode = attrs["mode"]
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    k = m if mode == "complete" else min(m, n)
    q = TensorType((0,), a.dtype) if mode == "r" else TensorType(batch + (m, k), a.dtype)
    return [q, TensorType(batch + (k, n), a.dtype)]


def _svd(in_types, attrs):
    a = in_types[0]
    batch, m, n = _matrix(a, "linalg.svd")
    k = min(m, n)
    full = attrs["full_matrices"]
    return [TensorType(batch + (m, m if full else k), a.dtype), TensorType(batch + (k,), a.dtype),
            TensorType(batch + (n if full else k, n), a.dtype)]


def _eigh(in_types, attrs):
    batch, n, _ = _matrix(in_types[0], "linalg.eigh", square=True)
    return [TensorType(batch + (n,), in_types[0].dtype), in_types[0]]


def _lu(in_types, attrs):
    a = in_types[0]
    batch, m, n = _matrix(a, "linalg.lu")
    k = min(m, n)
    return [TensorType(batch + (m, m), a.dtype), TensorType(batch + (m, k), a.dtype), TensorType(batch + (k, n), a.dtype)]


def _geqrf(in_types, attrs):
    a = in_types[0]
    batch, m, n = _matrix(a, "geqrf")
    return [a, TensorType(batch + (min(m, n),), a.dtype)]


_BOOL = Attr("bool", False)
register(OpDef("linalg_inv", _same("linalg.inv"), vjp=V.vjp_inv, doc="matrix inverse (LAPACK gesv)"))
register(OpDef("linalg_det", _det, vjp=V.vjp_det, doc="determinant (LAPACK getrf)"))
register(OpDef("linalg_slogdet", _slogdet, vjp=V.vjp_slogdet, differentiable_outputs=(1,),
               doc="(sign, log|det|) (LAPACK getrf)"))
register(OpDef("linalg_solve", _solve("linalg.solve"), inputs=(2, 2), vjp=V.vjp_solve,
               doc="A^-1 B for square A (..., n, n) and B (..., n, k), batch dims broadcast"))
register(OpDef("linalg_solve_triangular", _solve("linalg.solve_triangular", promotes=True), inputs=(2, 2),
               promotes_inputs=True,
               attrs={"upper": Attr("bool"), "unitriangular": _BOOL}, vjp=V.vjp_solve_triangular,
               doc="A^-1 B reading only A's upper/lower triangle (unit diagonal if unitriangular)"))
register(OpDef("linalg_cholesky", _same("linalg.cholesky"), attrs={"upper": _BOOL}, vjp=V.vjp_cholesky,
               doc="the Cholesky factor L (A = L L^T) or U = L^T (LAPACK potrf)"))
register(OpDef("linalg_qr", _qr, attrs={"mode": Attr("str", "reduced")}, vjp=V.vjp_qr,
               doc="Q, R (LAPACK geqrf/orgqr); mode 'reduced', 'complete' or 'r' (Q empty)"))
register(OpDef("linalg_svd", _svd, attrs={"full_matrices": Attr("bool", True)}, vjp=V.vjp_svd,
               doc="U, S, Vh with S descending (LAPACK gesdd)"))
register(OpDef("linalg_eigh", _eigh, attrs={"upper": _BOOL}, vjp=V.vjp_eigh,
               doc="eigenvalues (ascending) and eigenvectors of a symmetric matrix, read from one triangle"))
register(OpDef("linalg_lu", _lu, vjp=V.vjp_lu, differentiable_outputs=(1, 2),
               doc="P, L, U with A = P L U (partial pivoting, as LAPACK getrf)"))
register(OpDef("linalg_matrix_exp", _same("linalg.matrix_exp"), vjp=V.vjp_matrix_exp,
               doc="the matrix exponential (scaling and squaring with a Pade approximant)"))
register(OpDef("linalg_geqrf", _geqrf, no_gradient="geqrf has no derivative in PyTorch either",
               doc="LAPACK geqrf: R above the diagonal, Householder vectors below, and tau"))
