"""``MultivariateNormal`` and the small linear algebra it needs, as composites of graphc ops.

graphc has no Cholesky or triangular-solve primitive, so both are written here as loops over
the (static) event size ``n`` of ordinary tensor ops: ``cholesky`` emits O(n^2) ops and
``solve_lower`` O(n). They trace, run batched, and differentiate through the ops they are
made of; meant for the small event sizes of policies and latent variables (n up to a few
dozen), not for large matrices.

>>> import graphc as gc
>>> from graphc.distributions.multivariate_normal import cholesky
>>> cholesky(gc.tensor([[4.0, 2.0], [2.0, 5.0]])).numpy().tolist()
[[2.0, 0.0], [1.0, 2.0]]
"""
from __future__ import annotations

import math

import numpy as np

from ..core.tensor import Tensor
from ..ops import creation
from . import constraints
from .distribution import Distribution, as_params, broadcast_shape, draw, lazy_property, same_shape

__all__ = ["MultivariateNormal", "cholesky", "solve_lower"]


def _as_tensor(value) -> Tensor:
    return value if isinstance(value, Tensor) else as_params(value)[0]


def _eye(n: int, like: Tensor) -> Tensor:
    return creation.tensor(np.eye(n), dtype=like.dtype)


def diagonal(m: Tensor) -> Tensor:
    """The diagonal of the last two dims, ``(..., n, n) -> (..., n)``."""
    return (m * _eye(int(m.shape[-1]), m)).sum(-1)


def cholesky(a: Tensor) -> Tensor:
    """Lower ``L`` with ``L @ L.T == a`` for symmetric positive-definite ``a`` (``..., n, n``),
    column by column (Cholesky-Crout); NaN where ``a`` is not positive definite."""
    n = int(a.shape[-1])
    columns = []
    for j in range(n):
        v = a[..., :, j]
        for col in columns:
            v = v - col * col[..., j:j + 1]
        below = creation.tensor((np.arange(n) >= j).astype(np.float64), dtype=a.dtype)
        columns.append(v / v[..., j:j + 1].sqrt() * below)
    return creation.stack(columns, -1)


def solve_lower(lower: Tensor, b: Tensor) -> Tensor:
    """``z`` with ``lower @ z == b`` (``lower``: ``..., n, n`` lower triangular, ``b``: ``..., n``;
    leading dims broadcast), by forward substitution."""
    n = int(lower.shape[-1])
    z = []
    for i in range(n):
        s = b[..., i]
        if i:
            s = s - (lower[..., i, :i] * creation.stack(z, -1)).sum(-1)
        z.append(s / lower[..., i, i])
    return creation.stack(z, -1)


def _inverse_lower(lower: Tensor) -> Tensor:
    """``lower``'s inverse (lower triangular), one solve per column of the identity."""
    n = int(lower.shape[-1])
    eye = _eye(n, lower)
    return creation.stack([solve_lower(lower, eye[k]) for k in range(n)], -1)


class MultivariateNormal(Distribution):
    """``MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)``:
    exactly one of the three matrices; ``scale_tril`` (lower Cholesky factor of the covariance)
    is the one everything is computed from, as in PyTorch.

    >>> import graphc as gc
    >>> d = gc.distributions.MultivariateNormal(gc.zeros(2), covariance_matrix=gc.tensor([[4.0, 2.0], [2.0, 5.0]]))
    >>> d.batch_shape, d.event_shape, d.variance.numpy().tolist()
    ((), (2,), [4.0, 5.0])
    >>> round(float(d.log_prob(gc.zeros(2))), 4)
    -3.2242
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        loc = _as_tensor(loc)
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else covariance_matrix if covariance_matrix is not None \
            else precision_matrix
        name = "scale_tril" if scale_tril is not None else "covariance_matrix" if covariance_matrix is not None \
            else "precision_matrix"
        given = _as_tensor(given)
        if given.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = broadcast_shape(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        n = loc.shape[-1]
        setattr(self, name, given if same_shape(given.shape[:-2], batch_shape) else given.expand(*batch_shape, n, n))
        self.loc = loc if same_shape(loc.shape[:-1], batch_shape) else loc.expand(*batch_shape, n)
        super().__init__(batch_shape, (n,), validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = given
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(given)
        else:  # Sigma = P^-1 = Lp^-T Lp^-1 for P = Lp Lp^T
            inv = _inverse_lower(cholesky(given))
            self._unbroadcasted_scale_tril = cholesky(inv.transpose(-1, -2) @ inv)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        cov = lower @ lower.transpose(-1, -2)
        return cov.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        inv = _inverse_lower(self._unbroadcasted_scale_tril)
        return (inv.transpose(-1, -2) @ inv).expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """``loc + L @ eps`` with ``eps ~ N(0, I)``: differentiable in ``loc`` and the matrix."""
        eps = draw(self._extended_shape(sample_shape), self.loc, "normal")
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return diagonal(self._unbroadcasted_scale_tril).log().sum(-1)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = (solve_lower(self._unbroadcasted_scale_tril, diff) ** 2).sum(-1)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if same_shape(h.shape, self._batch_shape) else h.expand(*self._batch_shape)
