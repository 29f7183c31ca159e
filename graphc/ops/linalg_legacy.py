"""PyTorch's top-level linear algebra (``torch.det``, ``torch.svd``, ``Tensor.cholesky``, ...):
the older names and signatures of ``torch.linalg``'s functions, each a thin composite over
graphc/ops/linalg_core.py. ``torch.lu``/``lu_solve``/``lu_unpack`` carry LAPACK's int32
pivots, a dtype graphc lacks (``gc.linalg.lu`` gives P, L, U).
"""
from __future__ import annotations

import collections

from ..ir.errors import GraphcError
from . import linalg_core as core
from .linalg_compose import apply_reflectors, matrix_power as _matrix_power
from .linalg_more import pinv
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
SVDResult = collections.namedtuple("svd", "U S V")
TriangularSolveResult = collections.namedtuple("triangular_solve", "solution cloned_coefficient")
GeqrfResult = collections.namedtuple("geqrf", "a tau")


@torchsymbol(**_METHOD_AND_TOP)
def det(input):
    """The determinant (``torch.linalg.det``).

    >>> import graphc as gc
    >>> gc.tensor([[2.0, 1.0], [1.0, 1.0]]).det().item()
    1.0
    """
    return core.det(input)


@torchsymbol(**_METHOD_AND_TOP)
def slogdet(input):
    """``(sign, logabsdet)`` (``torch.linalg.slogdet``).

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 0.0], [0.0, -1.0]]).slogdet().sign.item()
    -1.0
    """
    return core.slogdet(input)


@torchsymbol(**_METHOD_AND_TOP)
def logdet(input):
    """log(det(A)): NaN for a negative determinant, -inf for a zero one.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 0.0], [0.0, 1.0]]).logdet().item()
    0.0
    """
    sign, logabs = core.slogdet(input)
    from ..core.dispatch import apply

    return apply("where", [apply("lt", [sign, 0.0]), float("nan"), logabs])


@torchsymbol(**_METHOD_AND_TOP)
def inverse(input):
    """The matrix inverse (``torch.linalg.inv``).

    >>> import graphc as gc
    >>> gc.tensor([[4.0]]).inverse().item()
    0.25
    """
    return core.inv(input)


@torchsymbol(**_METHOD_AND_TOP)
def matrix_exp(input):
    """The matrix exponential (``torch.linalg.matrix_exp``).

    >>> import graphc as gc
    >>> gc.zeros(1, 1).matrix_exp().item()
    1.0
    """
    return core.matrix_exp(input)


@torchsymbol(**_METHOD_AND_TOP)
def matrix_power(input, n):
    """``input`` to the integer power ``n`` (``torch.linalg.matrix_power``).

    >>> import graphc as gc
    >>> gc.tensor([[2.0]]).matrix_power(3).item()
    8.0
    """
    return _matrix_power(input, n)


@torchsymbol(**_METHOD_AND_TOP)
def cholesky(input, upper=False):
    """The Cholesky factor (``torch.linalg.cholesky``).

    >>> import graphc as gc
    >>> gc.tensor([[4.0]]).cholesky().item()
    2.0
    """
    return core.cholesky(input, upper=upper)


def _factor_differential(factor, upper):
    """dA for A = L L^T (lower) or U^T U (upper) in terms of the full ``factor``: PyTorch's
    cholesky_inverse/cholesky_solve backward treat it as dense, though LAPACK reads one triangle."""
    f0 = factor.detach()
    if upper:
        return lambda: factor.mT @ f0 + f0.mT @ factor
    return lambda: factor @ f0.mT + f0 @ factor.mT


def _with_dense_gradient(value, linear):
    """``value``, with the derivative of ``linear`` (linear in the live input; zero in value)."""
    return value + (linear - linear.detach())


@torchsymbol(**_METHOD_AND_TOP)
def cholesky_inverse(input, upper=False):
    """A^-1 from A's Cholesky factor ``input`` (lower L: A = L L^T; ``upper``: A = U^T U),
    reading its triangle; the gradient is PyTorch's (dense in ``input``).

    >>> import graphc as gc
    >>> gc.tensor([[2.0]]).cholesky_inverse().item()
    0.25
    """
    n, _ = core.matrix_dims(input, "cholesky_inverse", square=True)
    from .shaping_more import eye

    f0 = input.detach()
    low = f0.mT if upper else f0
    low_inv = core.solve_triangular(low, f0 * 0 + eye(n, dtype=input.dtype), upper=False)
    inverse = low_inv.mT @ low_inv
    if not input.requires_grad and not input.is_symbolic:
        return inverse
    return _with_dense_gradient(inverse, -(inverse @ _factor_differential(input, upper)() @ inverse))


@torchsymbol(**_METHOD_AND_TOP)
def cholesky_solve(input, input2, upper=False):
    """X with A X = ``input`` for A given by its Cholesky factor ``input2`` (its triangle is
    read; the gradient to it is PyTorch's, dense).

    >>> import graphc as gc
    >>> gc.tensor([[8.0]]).cholesky_solve(gc.tensor([[2.0]])).item()
    2.0
    """
    f0 = input2.detach()
    low = f0.mT if upper else f0

    def solve(rhs):
        return core.solve_triangular(low.mT, core.solve_triangular(low, rhs, upper=False), upper=True)

    x = solve(input)
    if not input2.requires_grad and not input2.is_symbolic:
        return x
    return _with_dense_gradient(x, -solve(_factor_differential(input2, upper)() @ x.detach()))


@torchsymbol(**_METHOD_AND_TOP)
def qr(input, some=True):
    """``(Q, R)``: reduced when ``some``, complete otherwise (``torch.linalg.qr``).

    >>> import graphc as gc
    >>> gc.tensor([[0.0], [2.0]]).qr().R.abs().item()
    2.0
    """
    return core.qr(input, "reduced" if some else "complete")


@torchsymbol(**_METHOD_AND_TOP)
def svd(input, some=True, compute_uv=True):
    """``(U, S, V)`` with A = U diag(S) V^T (V, not Vh; ``compute_uv=False``: U and V are
    zeros of shape (m, m) and (n, n), as PyTorch's).

    >>> import graphc as gc
    >>> gc.tensor([[0.0, 3.0], [1.0, 0.0]]).svd().S.numpy().tolist()
    [3.0, 1.0]
    """
    m, n = core.matrix_dims(input, "svd")
    u, s, vh = core.svd(input, full_matrices=not some or not compute_uv)
    if not compute_uv:
        return SVDResult((u * 0.0).detach(), s, (vh.mT * 0.0).detach())
    return SVDResult(u, s, vh.mT)


@torchsymbol(**_METHOD_AND_TOP)
def pinverse(input, rcond=1e-15):
    """The pseudo-inverse, dropping singular values <= rcond * s_max (``torch.linalg.pinv``).

    >>> import graphc as gc
    >>> gc.tensor([[2.0, 0.0]]).pinverse().numpy().tolist()
    [[0.5], [0.0]]
    """
    return pinv(input, rtol=rcond)


@torchsymbol(**_METHOD_AND_TOP)
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """``(X, A.clone())`` with tri(A) X = ``input`` (``transpose``: tri(A)^T X = ``input``).

    >>> import graphc as gc
    >>> gc.tensor([[4.0]]).triangular_solve(gc.tensor([[2.0]])).solution.item()
    2.0
    """
    a = A.mT if transpose else A
    x = core.solve_triangular(a, input, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


@torchsymbol(**_METHOD_AND_TOP)
def geqrf(input):
    """LAPACK's geqrf: ``(a, tau)`` with R on and above the diagonal of ``a`` and the
    Householder vectors below it (no gradient, as PyTorch).

    >>> import graphc as gc
    >>> a, tau = gc.tensor([[3.0], [4.0]]).geqrf()
    >>> round(abs(a[0, 0].item()), 6)
    5.0
    """
    from ..core.dispatch import apply

    core.matrix_dims(input, "geqrf")
    return GeqrfResult(*apply("linalg_geqrf", [input.detach()]))


@torchsymbol(**_METHOD_AND_TOP)
def ormqr(input, input2, input3, left=True, transpose=False):
    """Q C, Q^T C, C Q or C Q^T for Q of geqrf's ``(input, input2)``, C = ``input3``.

    >>> import graphc as gc
    >>> gc.ormqr(gc.zeros(2, 2), gc.zeros(2), gc.ones(2, 2)).numpy().tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    core.matrix_dims(input, "ormqr")
    core.static_last(input2, "ormqr")
    core.matrix_dims(input3, "ormqr")
    return apply_reflectors(input, input2, input3, left=left, transpose=transpose)


@torchsymbol(**_METHOD_AND_TOP)
def lu(A, pivot=True, get_infos=False):
    """Refused: PyTorch's pivots are int32 (``gc.linalg.lu`` gives P, L, U)."""
    raise GraphcError("torch.lu returns LAPACK's pivots as int32, a dtype graphc does not have; "
                      "gc.linalg.lu gives the factorization as (P, L, U)")


@torchsymbol(method=False, functional=False)
def svd_lowrank(A, q=6, niter=2, M=None):
    """``(U, S, V)`` of rank ``q`` approximating A - M: graphc takes the exact truncated SVD
    (PyTorch's randomized range finder converges to it; ``niter`` is not needed).

    >>> import graphc as gc
    >>> gc.svd_lowrank(gc.tensor([[3.0, 0.0], [0.0, 1.0]]), q=1)[1].numpy().tolist()
    [3.0]
    """
    a = A if M is None else A - M
    m, n = core.matrix_dims(a, "svd_lowrank")
    k = min(int(q), m, n)
    u, s, vh = core.svd(a, full_matrices=False)
    return u[..., :, :k], s[..., :k], vh[..., :k, :].mT


@torchsymbol(method=False, functional=False)
def pca_lowrank(A, q=None, center=True, niter=2):
    """``svd_lowrank`` of A with its column means subtracted (``center``); q defaults to min(6, m, n).

    >>> import graphc as gc
    >>> gc.pca_lowrank(gc.tensor([[1.0, 0.0], [3.0, 0.0]]), q=1)[1].numpy().tolist()
    [1.4142135381698608]
    """
    m, n = core.matrix_dims(A, "pca_lowrank")
    q = min(6, m, n) if q is None else q
    a = A - A.mean(-2, keepdim=True) if center else A
    return svd_lowrank(a, q, niter)
