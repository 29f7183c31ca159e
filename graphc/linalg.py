"""``gc.linalg``: PyTorch's ``torch.linalg`` on numpy's LAPACK (cupy's on GPU).

Factorizations and solves are registry ops (ir/ops/linalg_lapack.py) with PyTorch's
gradients as graph ops; the rest are composites (graphc/ops/linalg_more.py,
graphc/ops/linalg_compose.py). ``eig``/``eigvals`` need complex dtypes and ``ldl_*``
returns int32 pivots: graphc has neither, so those names are absent.

>>> import graphc as gc
>>> gc.linalg.det(gc.eye(3) * 2).item()
8.0
"""
from __future__ import annotations

from .ops.linalg_compose import (cross, diagonal, householder_product, matrix_power, multi_dot, tensorinv,  # noqa: F401
                                 tensorsolve, vander, vecdot)
from .ops.linalg_core import (cholesky, cholesky_ex, det, eigh, eigvalsh, inv, inv_ex, lu, lu_factor,  # noqa: F401
                              lu_factor_ex, matrix_exp, qr, slogdet, solve, solve_ex, solve_triangular, svd, svdvals)
from .ops.linalg_more import cond, lstsq, matrix_norm, matrix_rank, norm, pinv, vector_norm  # noqa: F401

__all__ = ["cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh", "householder_product",
           "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "matrix_exp", "matrix_norm", "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
           "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm"]
