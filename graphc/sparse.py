"""``torch.sparse``: products of a sparse COO matrix with a dense one, and the legacy
constructors ``torch.sparse.FloatTensor(indices, values, size)`` that older graph-network
code (pygcn) uses. The tensors themselves live in graphc/ops/sparse_ops.py.

>>> import graphc as gc
>>> a = gc.sparse.FloatTensor(gc.tensor([[0, 1], [1, 0]]), gc.tensor([2.0, 3.0]), (2, 2))
>>> gc.sparse.mm(a, gc.eye(2)).numpy().tolist()
[[0.0, 2.0], [3.0, 0.0]]
"""
from __future__ import annotations

from .ir.errors import GraphcError
from .ir.types import DType
from .ops.sparse_ops import SparseTensor, spmm, sparse_coo_tensor

__all__ = ["mm", "addmm", "sum", "FloatTensor", "DoubleTensor", "SparseTensor"]


def mm(mat1: SparseTensor, mat2, reduce: str = "sum"):
    """``mat1 @ mat2`` for a sparse COO ``mat1`` and a dense ``mat2``, with gradients to ``mat2``
    and to ``mat1``'s values. ``reduce`` other than ``"sum"`` (PyTorch's CSR-only reductions) is
    refused.

    >>> import graphc as gc
    >>> gc.sparse.mm(gc.eye(2).to_sparse(), gc.ones(2, 3)).shape
    (2, 3)
    """
    if reduce != "sum":
        raise GraphcError(f"sparse.mm: reduce={reduce!r} is for sparse CSR tensors, which graphc does not have; "
                          "sparse COO products sum")
    return spmm(mat1, mat2)


def addmm(mat, mat1: SparseTensor, mat2, *, beta=1.0, alpha=1.0):
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse COO ``mat1`` (``torch.sparse.addmm``).

    >>> import graphc as gc
    >>> gc.sparse.addmm(gc.ones(2, 2), gc.eye(2).to_sparse(), gc.ones(2, 2), alpha=2.0).numpy().tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    return mat * beta + spmm(mat1, mat2) * alpha


def sum(input: SparseTensor, dim=None):  # noqa: A001 - torch.sparse.sum
    """The sum of a sparse tensor's entries (all, or over ``dim``) as a dense tensor.

    >>> import graphc as gc
    >>> float(gc.sparse.sum(gc.eye(3).to_sparse()))
    3.0
    """
    dense = input.to_dense()
    return dense.sum() if dim is None else dense.sum(dim)


def _legacy(dtype: DType, name: str):
    def construct(indices, values, size=None):
        return sparse_coo_tensor(indices, values, size, dtype=dtype)
    construct.__doc__ = f"""``torch.sparse.{name}(indices, values, size)``: a {dtype.name}
    sparse COO tensor (the legacy constructor).

    >>> import graphc as gc
    >>> gc.sparse.{name}([[0, 1]], [1.0, 2.0], (2,)).dtype.name
    '{dtype.name}'
    """
    return construct


FloatTensor = _legacy(DType.float32, "FloatTensor")
DoubleTensor = _legacy(DType.float64, "DoubleTensor")
