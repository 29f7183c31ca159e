"""Reading a tensor at an integer index tensor along dim 0 (``output[idx_train]``,
``y[perm]``, ``x[[0, 2]]``): PyTorch's advanced indexing with one integer index, as a ``gather``
(gradient: a sum-scatter, so repeated indices add). Every other index goes to basic indexing
(graphc/core/indexing.py). A bool mask index selects a data-dependent number of rows: it is
refused there as before.

>>> import graphc as gc
>>> x = gc.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
>>> x[gc.tensor([2, 0, 2])].numpy().tolist()
[[5.0, 6.0], [1.0, 2.0], [5.0, 6.0]]
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.indexing import getitem as basic_getitem
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from ..ir.types import DType


def _int_index(index):
    """The index as an int64 Tensor when it is one integer tensor/array/list, else None."""
    if isinstance(index, Tensor):
        return index if index.dtype is DType.int64 else None
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
        return Tensor(index.astype(np.int64))
    if isinstance(index, list) and index and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                                 for i in index):
        return Tensor(np.asarray(index, np.int64))
    return None


def take_rows(tensor: Tensor, index: Tensor) -> Tensor:
    """``tensor[index]`` for an int64 ``index`` of any shape: shape ``index.shape + tensor.shape[1:]``;
    negative indices count from the end.

    >>> import graphc as gc
    >>> take_rows(gc.arange(5), gc.tensor([[0, -1], [1, 1]])).numpy().tolist()
    [[0, 4], [1, 1]]
    """
    if tensor.ndim == 0:
        raise ShapeError("an integer index tensor indexes a tensor of at least 1 dim, got a 0-d one")
    n = tensor.shape[0]
    if index._tracer is None and index.numel() and isinstance(n, int):
        values = index.numpy()
        if values.min() < -n or values.max() >= n:
            raise ShapeError(f"index {int(values.max() if values.max() >= n else values.min())} is out of bounds for "
                             f"dim 0 with size {n}")
    if index._tracer is None and tensor._tracer is None:
        index = index.to(tensor.device)
    flat = index.reshape(-1)
    tail = tuple(tensor.shape[1:])
    rows = flat.reshape(flat.shape[0], *([1] * len(tail))).expand(flat.shape[0], *tail) if tail else flat
    picked = apply("gather", [tensor, rows], {"dim": 0})
    return picked.reshape(*index.shape, *tail)


def getitem(tensor: Tensor, index):
    """``Tensor.__getitem__``: one integer index tensor (alone, or followed by ``:`` / ``...``)
    reads rows, anything else is basic indexing.

    >>> import graphc as gc
    >>> gc.arange(6).reshape(3, 2)[[2, 0]].numpy().tolist(), gc.arange(6).reshape(3, 2)[1, 1:].numpy().tolist()
    ([[4, 5], [0, 1]], [3])
    """
    rows = _int_index(index)
    if rows is None and isinstance(index, tuple) and index and all(  # x[idx, :] and x[idx, ...] read rows too
            i is Ellipsis or (isinstance(i, slice) and i == slice(None)) for i in index[1:]) \
            and sum(i is Ellipsis for i in index) <= 1 and sum(isinstance(i, slice) for i in index) < tensor.ndim:
        rows = _int_index(index[0])
    if rows is not None:
        return take_rows(tensor, rows)
    return basic_getitem(tensor, index)


Tensor.__getitem__ = getitem  # the basic path stays in core/indexing.py; this adds integer tensors in front
