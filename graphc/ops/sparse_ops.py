"""Sparse COO tensors (``torch.sparse_coo_tensor``, ``Tensor.to_sparse``) and the sparse-dense
matrix product (``torch.sparse.mm``, ``torch.spmm``, ``torch.mm``/``matmul`` with a sparse first
operand), as composites over ``gather`` and ``scatter(reduce="sum")``.

A :class:`SparseTensor` holds an int64 ``indices`` tensor ``(sparse_dim, nnz)``, a ``values``
tensor ``(nnz, *dense_dims)`` and a static size. ``spmm(A, B)`` gathers ``B``'s rows at A's
column indices, scales them by A's values and sum-scatters them into A's row indices: every
step is a registry op with a vjp, so the product has gradients to the dense operand and to
the values, runs eagerly and traces into a compiled plan (a sparse matrix closed over by the
step is a constant of the plan; one built inside the step from traced indices and values
carries them as graph values).

>>> import graphc as gc
>>> a = gc.sparse_coo_tensor(gc.tensor([[0, 1, 1], [2, 0, 2]]), gc.tensor([3.0, 4.0, 5.0]), (2, 3))
>>> a.is_sparse, a.to_dense().numpy().tolist()
(True, [[0.0, 0.0, 3.0], [4.0, 0.0, 5.0]])
>>> gc.spmm(a, gc.ones(3, 2)).numpy().tolist()
[[3.0, 3.0], [9.0, 9.0]]
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import DType
from . import creation
from .surface import METHODS, TOP_LEVEL, torchsymbol

_DENSE_MM, _DENSE_MATMUL = TOP_LEVEL["mm"], TOP_LEVEL["matmul"]  # the dense products wrapped below


class SparseTensor:
    """A sparse COO tensor (``layout == "sparse_coo"``): ``indices`` (int64, ``(sparse_dim,
    nnz)``), ``values`` (``(nnz, *dense_dims)``) and ``size``. Duplicate indices add up
    (``coalesce()`` merges them, eagerly).

    >>> import graphc as gc
    >>> s = gc.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> s._indices().numpy().tolist(), s._values().numpy().tolist(), s.shape
    ([[0, 1], [1, 0]], [2.0, 1.0], (2, 2))
    """

    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, size: tuple, coalesced: bool = False):
        self._indices_t, self._values_t = indices, values
        self.shape = tuple(int(s) for s in size)
        self._coalesced = coalesced

    # ---- what it is ------------------------------------------------------------------
    @property
    def dtype(self) -> DType:
        return self._values_t.dtype

    @property
    def device(self):
        return self._values_t.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def requires_grad(self) -> bool:
        return bool(self._values_t.requires_grad)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def sparse_dim(self) -> int:
        return int(self._indices_t.shape[0])

    def dense_dim(self) -> int:
        return self.ndim - self.sparse_dim()

    def _nnz(self) -> int:
        return int(self._indices_t.shape[1])

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor (PyTorch refuses an uncoalesced one)."""
        if not self._coalesced:
            raise GraphcError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices_t

    def values(self) -> Tensor:
        """The values of a coalesced tensor (PyTorch refuses an uncoalesced one)."""
        if not self._coalesced:
            raise GraphcError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._values_t

    def __repr__(self) -> str:
        return f"SparseTensor(size={self.shape}, nnz={self._nnz()}, dtype={self.dtype.name}, layout=sparse_coo)"

    # ---- conversions -----------------------------------------------------------------
    def to_dense(self) -> Tensor:
        """The dense tensor: values sum-scattered at their flat positions (duplicates add)."""
        return to_dense(self)

    def coalesce(self) -> "SparseTensor":
        """Indices sorted and unique, duplicates' values summed. The number of unique indices is
        data-dependent, so this runs eagerly only (a traced one is refused)."""
        return coalesce(self)

    def t(self) -> "SparseTensor":
        """The transpose of a 2-d sparse matrix (its two index rows swapped)."""
        if self.sparse_dim() != 2 or self.dense_dim():
            raise ShapeError(f"t() of a sparse tensor needs 2 sparse dims and no dense ones, got {self}")
        flipped = apply("slice", [self._indices_t], {"slices": [(None, None, -1), (None, None, 1)], "drop": []})
        return SparseTensor(flipped, self._values_t, self.shape[::-1])

    def detach(self) -> "SparseTensor":
        return SparseTensor(self._indices_t, self._values_t.detach(), self.shape, self._coalesced)

    def double(self) -> "SparseTensor":
        return SparseTensor(self._indices_t, self._values_t.double(), self.shape, self._coalesced)

    def float(self) -> "SparseTensor":
        return SparseTensor(self._indices_t, self._values_t.float(), self.shape, self._coalesced)

    def to(self, *args, **kwargs) -> "SparseTensor":
        """``.to(device/dtype)`` applied to the values and indices (indices stay int64)."""
        values = self._values_t.to(*args, **kwargs)
        indices = self._indices_t.to(device=values.device) if values._tracer is None else self._indices_t
        return SparseTensor(indices, values, self.shape, self._coalesced)

    def cuda(self) -> "SparseTensor":
        return self.to("cuda")

    def cpu(self) -> "SparseTensor":
        return self.to("cpu")

    # ---- products ----------------------------------------------------------------------
    def mm(self, mat2: Tensor) -> Tensor:
        return spmm(self, mat2)

    def matmul(self, other: Tensor) -> Tensor:
        return spmm(self, other)

    __matmul__ = matmul

    def __mul__(self, other):
        """A sparse tensor times a number: the values scaled."""
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return SparseTensor(self._indices_t, self._values_t * other, self.shape, self._coalesced)
        raise GraphcError("a sparse tensor multiplies only by a Python number in graphc")

    __rmul__ = __mul__


def _as_index_tensor(indices) -> Tensor:
    t = indices if isinstance(indices, Tensor) else creation.tensor(np.asarray(indices), dtype=DType.int64)
    if t.dtype is not DType.int64:
        t = t.long()
    if t.ndim != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be 2-d (sparse_dim, nnz), got shape {tuple(t.shape)}")
    return t


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad=False,
                      check_invariants=None, is_coalesced=None) -> SparseTensor:
    """A sparse COO tensor from int ``indices`` ``(sparse_dim, nnz)`` and ``values`` ``(nnz,
    *dense_dims)`` (``torch.sparse_coo_tensor``); ``size`` defaults to one past the largest
    index along each sparse dim (eager indices only).

    >>> import graphc as gc
    >>> gc.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0]).to_dense().numpy().tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    """
    indices = _as_index_tensor(indices)
    if not isinstance(values, Tensor):
        values = creation.tensor(values, dtype=dtype)
    elif dtype is not None:
        values = values.to(dtype)
    if device is not None:
        values, indices = values.to(device), indices.to(device)
    if requires_grad:
        values.requires_grad_()
    if values.ndim < 1 or values.shape[0] != indices.shape[1]:
        raise ShapeError(f"sparse_coo_tensor: values {tuple(values.shape)} must have nnz = {indices.shape[1]} "
                         "entries along dim 0")
    sparse_dim = int(indices.shape[0])
    if size is None:
        if indices._tracer is not None:
            raise TraceError("sparse_coo_tensor without a size reads the indices' values; give size= to compile it")
        size = tuple((indices.numpy().max(axis=1) + 1).tolist()) if indices.shape[1] else (0,) * sparse_dim
        size = size + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + values.ndim - 1 or tuple(size[sparse_dim:]) != tuple(values.shape[1:]):
        raise ShapeError(f"sparse_coo_tensor: size {size} does not fit {sparse_dim} sparse dims and values of shape "
                         f"{tuple(values.shape)}")
    if indices._tracer is None and indices.shape[1]:
        idx = indices.numpy()
        if idx.min() < 0 or (idx.max(axis=1) >= np.array(size[:sparse_dim])).any():
            raise ShapeError(f"sparse_coo_tensor: indices out of range for size {size}")
    return SparseTensor(indices, values, size, bool(is_coalesced))


def _flat_positions(sparse: SparseTensor) -> Tensor:
    """The row-major flat position of every index over the sparse dims (int64, ``(nnz,)``)."""
    sizes = sparse.shape[:sparse.sparse_dim()]
    flat = None
    for d in range(len(sizes)):
        row = apply("slice", [sparse._indices_t], {"slices": [(d, None, 1), (None, None, 1)], "drop": [0]})
        stride = int(np.prod(sizes[d + 1:], dtype=np.int64))
        term = row * stride if stride != 1 else row
        flat = term if flat is None else flat + term
    return flat


def _expand_rows(index: Tensor, tail: tuple) -> Tensor:
    """``index (nnz,)`` broadcast to ``(nnz, *tail)``: the index tensor of a gather/scatter along dim 0."""
    if not tail:
        return index
    return index.reshape(index.shape[0], *([1] * len(tail))).expand(index.shape[0], *tail)


def _scatter_rows(rows: Tensor, src: Tensor, n: int) -> Tensor:
    """``zeros(n, *src.shape[1:])`` with ``src[i]`` added at row ``rows[i]`` (duplicates add)."""
    tail = tuple(src.shape[1:])
    zeros = creation.zeros((n, *tail), dtype=src.dtype)
    if src._tracer is None:
        zeros = zeros.to(src.device)
    return apply("scatter", [zeros, _expand_rows(rows, tail), src], {"dim": 0, "reduce": "sum"})


def to_dense(sparse: SparseTensor) -> Tensor:
    """The dense form of a sparse COO tensor (gradients flow to its values; duplicates add).

    >>> import graphc as gc
    >>> to_dense(gc.sparse_coo_tensor([[1, 1]], [2.0, 3.0], (2,))).numpy().tolist()
    [0.0, 5.0]
    """
    sizes = sparse.shape[:sparse.sparse_dim()]
    flat = _scatter_rows(_flat_positions(sparse), sparse._values_t, int(np.prod(sizes, dtype=np.int64)))
    return flat.reshape(*sparse.shape)


def coalesce(sparse: SparseTensor) -> SparseTensor:
    """Unique sorted indices with summed values (eager: the result's nnz depends on the data).

    >>> import graphc as gc
    >>> c = coalesce(gc.sparse_coo_tensor([[2, 0, 2]], [1.0, 2.0, 3.0], (3,)))
    >>> c.indices().numpy().tolist(), c.values().numpy().tolist()
    ([[0, 2]], [2.0, 4.0])
    """
    if sparse._indices_t._tracer is not None or sparse._values_t._tracer is not None:
        raise TraceError("coalesce() of a traced sparse tensor has a data-dependent number of entries; coalesce "
                         "before compiling (or use the uncoalesced tensor: products add duplicates anyway)")
    flat = _flat_positions(sparse).numpy()
    unique, inverse = np.unique(flat, return_inverse=True)
    sizes = sparse.shape[:sparse.sparse_dim()]
    indices = np.stack(np.unravel_index(unique, sizes)).astype(np.int64).reshape(len(sizes), -1)
    # duplicates summed by the same scatter as to_dense, so the values keep their gradient
    values = _scatter_rows(creation.tensor(inverse.reshape(-1).astype(np.int64)).to(sparse.device),
                           sparse._values_t, len(unique))
    return SparseTensor(creation.tensor(indices).to(sparse.device), values, sparse.shape, coalesced=True)


def spmm(input: SparseTensor, mat2: Tensor) -> Tensor:
    """``input @ mat2`` for a 2-d sparse COO ``input`` and a dense ``mat2`` (2-d, or 1-d as a
    vector): ``out[r] += v * mat2[c]`` for every entry ``(r, c, v)``. Gradients reach ``mat2``
    and the values.

    >>> import graphc as gc
    >>> a = gc.sparse_coo_tensor([[0, 0, 1], [0, 1, 1]], [1.0, 2.0, 3.0], (2, 2))
    >>> gc.spmm(a, gc.tensor([[1.0], [10.0]])).numpy().tolist()
    [[21.0], [30.0]]
    """
    if not getattr(input, "is_sparse", False):
        raise GraphcError(f"spmm takes a sparse COO first operand, got {type(input).__name__}")
    if input.sparse_dim() != 2 or input.dense_dim():
        raise ShapeError(f"spmm: the sparse operand must be a 2-d matrix with 2 sparse dims, got {input}")
    if not isinstance(mat2, Tensor) or mat2.ndim not in (1, 2):
        raise ShapeError(f"spmm: the dense operand must be a 1-d or 2-d tensor, got {getattr(mat2, 'shape', mat2)}")
    if mat2.dtype is not input.dtype:
        raise GraphcError(f"spmm: the sparse operand is {input.dtype.name} and the dense one {mat2.dtype.name}")
    rows_n, cols_n = input.shape
    if isinstance(mat2.shape[0], int) and mat2.shape[0] != cols_n:
        raise ShapeError(f"spmm: a {input.shape} sparse matrix times a dense {tuple(mat2.shape)} one")
    vector = mat2.ndim == 1
    dense = mat2.reshape(-1, 1) if vector else mat2
    tail = tuple(dense.shape[1:])
    index = input._indices_t
    rows = apply("slice", [index], {"slices": [(0, 1, 1), (None, None, 1)], "drop": [0]})
    cols = apply("slice", [index], {"slices": [(1, 2, 1), (None, None, 1)], "drop": [0]})
    picked = apply("gather", [dense, _expand_rows(cols, tail)], {"dim": 0})  # mat2[c] for every entry
    weighted = picked * input._values_t.reshape(-1, 1)
    out = _scatter_rows(rows, weighted, rows_n)
    return out.reshape(rows_n) if vector else out


# ---- the surfaces: gc.sparse_coo_tensor, gc.spmm, gc.mm / gc.matmul with a sparse operand ------------
torchsymbol(method=False, functional=False)(sparse_coo_tensor)
torchsymbol(method=False, functional=False)(spmm)


@torchsymbol(method=False, functional=False)
def mm(input, mat2):
    """``torch.mm``: the dense product, or ``spmm`` when ``input`` is sparse.

    >>> import graphc as gc
    >>> gc.mm(gc.eye(2).to_sparse(), gc.ones(2, 1)).numpy().tolist()
    [[1.0], [1.0]]
    """
    return spmm(input, mat2) if getattr(input, "is_sparse", False) else _DENSE_MM(input, mat2)


@torchsymbol(method=False, functional=False)
def matmul(input, other):
    """``torch.matmul``: the dense product, or ``spmm`` when ``input`` is sparse.

    >>> import graphc as gc
    >>> gc.matmul(gc.eye(2).to_sparse(), gc.ones(2)).numpy().tolist()
    [1.0, 1.0]
    """
    return spmm(input, other) if getattr(input, "is_sparse", False) else _DENSE_MATMUL(input, other)


@torchsymbol(top=False, functional=False)
def to_sparse(self, sparse_dim=None, *, layout=None) -> SparseTensor:
    """The sparse COO form of a dense tensor: its nonzero entries (eager only: their number
    depends on the data), read from the tensor so that gradients reach it through the values.

    >>> import graphc as gc
    >>> gc.tensor([0.0, 5.0]).to_sparse()._values().numpy().tolist()
    [5.0]
    """
    if layout not in (None, "sparse_coo") and str(layout).split(".")[-1] != "sparse_coo":
        raise GraphcError(f"to_sparse: graphc has the sparse_coo layout only, got {layout}")
    if self._tracer is not None:
        raise TraceError("to_sparse() of a traced tensor has a data-dependent number of entries; convert before "
                         "compiling", self._tracer.user_location())
    sparse_dim = self.ndim if sparse_dim is None else int(sparse_dim)
    array = self.numpy()
    lead = array.reshape(*array.shape[:sparse_dim], -1) if sparse_dim < array.ndim else array[..., None]
    where = np.nonzero(np.any(lead != 0, axis=-1))
    indices = np.stack(where).astype(np.int64).reshape(sparse_dim, -1)
    flat = np.ravel_multi_index(where, array.shape[:sparse_dim]) if sparse_dim else np.zeros(0, np.int64)
    rows = self.reshape(-1, *self.shape[sparse_dim:])
    values = rows[creation.tensor(np.asarray(flat, np.int64)).to(self.device)]  # a gather: gradients reach self
    return SparseTensor(creation.tensor(indices).to(self.device), values, tuple(self.shape), coalesced=True)


def dense_to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
    """``Tensor.to_dense()`` of a dense tensor: itself (cast to ``dtype`` if given), as PyTorch's.

    >>> import graphc as gc
    >>> t = gc.ones(2)
    >>> t.to_dense() is t
    True
    """
    return self if dtype is None else self.to(dtype)


METHODS["to_dense"] = dense_to_dense
Tensor.is_sparse = False  # dense tensors answer is_sparse as PyTorch's strided ones do
