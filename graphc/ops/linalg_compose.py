"""More of ``gc.linalg`` as composites of ordinary ops: matrix_power, multi_dot,
tensorinv/tensorsolve, vander, vecdot, cross, diagonal and householder_product."""
from __future__ import annotations

import math

from ..ir.errors import ShapeError
from . import linalg_core as core
from .linalg_core import takes_out
from .creation import cat, stack
from .shaping_more import diagonal as _diagonal


@takes_out
def matrix_power(A, n):
    """A^n for an integer n (negative: of the inverse), by repeated squaring.

    >>> import graphc as gc
    >>> gc.linalg.matrix_power(gc.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).numpy().tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    m, _ = core.matrix_dims(A, "linalg.matrix_power", square=True)
    n = int(n)
    if n == 0:
        from .shaping_more import eye
        return A * 0 + eye(m, dtype=A.dtype)  # (A * 0 keeps the batch dims and a zero gradient, as PyTorch)
    base = core.inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


@takes_out
def multi_dot(tensors):
    """The product of a chain of matrices (the first may be a vector, the last too).

    >>> import graphc as gc
    >>> gc.linalg.multi_dot([gc.ones(1, 2), gc.ones(2, 3), gc.ones(3, 1)]).item()
    6.0
    """
    if len(tensors) < 2:
        raise ShapeError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    mats = [first.unsqueeze(0) if first.ndim == 1 else first, *tensors[1:-1],
            last.unsqueeze(-1) if last.ndim == 1 else last]
    for t in mats:
        if t.ndim != 2:
            raise ShapeError(f"linalg.multi_dot: tensors must be 2-D (the first and last may be 1-D), got {t.ndim}-D")
    out = mats[0]
    for t in mats[1:]:
        out = out @ t
    if first.ndim == 1:
        out = out.squeeze(0)
    if last.ndim == 1:
        out = out.squeeze(-1)
    return out


@takes_out
def tensorinv(A, ind=2):
    """The inverse in the sense of ``tensordot(tensorinv(A), A, ind)`` being the identity.

    >>> import graphc as gc
    >>> gc.linalg.tensorinv(gc.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    left, right = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = math.prod(left), math.prod(right)
    if rows != cols:
        raise ShapeError(f"linalg.tensorinv: prod(shape[:ind]) = {rows} must equal prod(shape[ind:]) = {cols}")
    return core.inv(A.reshape(rows, cols)).reshape(*right, *left)


@takes_out
def tensorsolve(A, B, dims=None):
    """X with ``tensordot(A, X, X.ndim) == B``.

    >>> import graphc as gc
    >>> gc.linalg.tensorsolve(gc.eye(6).reshape(2, 3, 6), gc.ones(2, 3)).shape
    (6,)
    """
    if dims is not None:
        from .shaping_more import movedim
        dims = [d % A.ndim for d in dims]
        A = movedim(A, dims, list(range(A.ndim - len(dims), A.ndim)))
    rest = tuple(A.shape[B.ndim:])
    rows = math.prod(B.shape)
    return core.solve(A.reshape(rows, math.prod(rest)), B.reshape(rows)).reshape(*rest)


def vander(x, *, N=None):
    """The Vandermonde matrix: columns x^0, x^1, ..., x^(N-1) (products, so x = 0 is fine).

    >>> import graphc as gc
    >>> gc.linalg.vander(gc.tensor([2.0, 3.0])).numpy().tolist()
    [[1.0, 2.0], [1.0, 3.0]]
    """
    if x.ndim == 0:  # PyTorch reads a 0-d x as one value
        x = x.reshape(1)
    n = x.shape[-1] if N is None else int(N)
    if n < 1:
        raise ShapeError(f"linalg.vander: N must be > 0, got {n}")
    cols = [x * 0 + 1]
    for _ in range(n - 1):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


@takes_out
def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along ``dim`` (broadcasting).

    >>> import graphc as gc
    >>> gc.linalg.vecdot(gc.tensor([1.0, 2.0]), gc.tensor([3.0, 4.0])).item()
    11.0
    """
    return (x * y).sum(dim)


@takes_out
def cross(input, other, *, dim=-1):
    """The 3-vector cross product along ``dim`` (broadcasting).

    >>> import graphc as gc
    >>> gc.linalg.cross(gc.tensor([1.0, 0.0, 0.0]), gc.tensor([0.0, 1.0, 0.0])).numpy().tolist()
    [0.0, 0.0, 1.0]
    """
    _pin_mismatched(input, other, "linalg.cross")
    a, b = (input * 1) + other * 0, (other * 1) + input * 0  # broadcast both to one shape
    axis = dim % a.ndim
    if a.shape[axis] != 3:
        raise ShapeError(f"linalg.cross: dim {dim} must have size 3, got {a.shape[axis]}")
    a0, a1, a2 = (a.narrow(axis, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(axis, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis)


def _pin_mismatched(x, y, op):
    """A traced symbolic dim that meets another size in broadcasting (x [N, 3] against y [5, 3],
    an example of batch 1) is pinned, and the trace starts again with it fixed."""
    for dx, dy, sx, sy in zip(reversed(x.dims), reversed(y.dims), reversed(x.shape), reversed(y.shape)):
        if dx != dy and 1 not in (dx, dy) and not (isinstance(dx, int) and isinstance(dy, int)):
            int(sx), int(sy)  # pins the symbols (SymInt.__int__)
            raise ShapeError(f"{op}: dims {dx} and {dy} broadcast only at fixed sizes")


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal of the (``dim1``, ``dim2``) matrices as the last dim.

    >>> import graphc as gc
    >>> gc.linalg.diagonal(gc.tensor([[1.0, 2.0], [3.0, 4.0]])).numpy().tolist()
    [1.0, 4.0]
    """
    core.static_dims(A, (dim1 % A.ndim, dim2 % A.ndim), "linalg.diagonal")  # (pins a traced batch dim)
    return _diagonal(A, offset, dim1, dim2)


@takes_out
def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th column
    of A below the diagonal and a 1 on it (LAPACK's orgqr), as products of ordinary ops.

    >>> import graphc as gc
    >>> gc.linalg.householder_product(gc.zeros(2, 2), gc.zeros(2)).numpy().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    m, n = core.matrix_dims(A, "linalg.householder_product")
    k = core.static_last(tau, "linalg.householder_product")
    if not (k <= n <= m):
        raise ShapeError(f"linalg.householder_product: need tau.shape[-1] <= A.shape[-1] <= A.shape[-2], got {k}, {n}, {m}")
    return apply_reflectors(A, tau, _eye_cols(A, m, n), left=True, transpose=False)


def _eye_cols(A, m, n):
    from .shaping_more import eye
    return (A * 0.0).detach()[..., :, :n] + eye(m, n, dtype=A.dtype)


def reflector(A, i, m):
    """v_i: column i of A with zeros above row i and a 1 at row i (a column (..., m, 1))."""
    from .shaping_more import eye
    below = A.narrow(-1, i, 1)
    mask = [[1.0 if r > i else 0.0] for r in range(m)]
    unit = eye(m, dtype=A.dtype)[:, i:i + 1]
    return below * A.new_tensor(mask) + unit


def apply_reflectors(A, tau, C, left, transpose):
    """Q C, Q^T C, C Q or C Q^T with Q = H_1 ... H_k (each H_i symmetric)."""
    m = A.shape[-2]
    k = tau.shape[-1]
    order = range(k)
    # Q C = H_1 (H_2 (... H_k C)): the last reflector acts first; Q^T C reverses that
    if left != transpose:
        order = reversed(order)
    out = C
    for i in order:
        v = reflector(A, i, m)
        t = tau[..., i:i + 1].unsqueeze(-1)
        if left:
            out = out - (v * t) @ (v.mT @ out)
        else:
            out = out - ((out @ v) * t) @ v.mT
    return out
