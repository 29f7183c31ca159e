"""Splitting and stacking, as PyTorch has them: ``split_with_sizes``, ``unsafe_split``/``unsafe_chunk``,
``tensor_split``, ``hsplit``/``vsplit``/``dsplit``; ``atleast_1d/2d/3d``, ``hstack``/``vstack``/
``dstack``/``column_stack``, ``meshgrid``, ``cartesian_prod``, ``combinations``, ``block_diag``,
``kron`` and ``_chunk_cat``. Composites over slice / concat / reshape / broadcast_to / gather.

Cutting or concatenating along a symbolic dim of a traced tensor pins it (shaping_views.fixed_size).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import dim_mul, promote
from .creation import cat
from .shaping_views import axis_of, fixed_shape, fixed_size, take
from .surface import torchsymbol

_TOP_ONLY = dict(method=False, functional=False)
_METHOD_AND_TOP = dict(functional=False)


def _slice(input, axis, start, stop):
    slices = [(None, None, 1)] * input.ndim
    slices[axis] = (start, stop, 1)
    return apply("slice", [input], {"slices": slices, "drop": []})


def cat_fixed(tensors, dim, what: str):
    """``cat`` along ``dim``, pinning a symbolic dim there (its total would depend on it)."""
    tensors = list(tensors)
    for t in tensors:
        if t.ndim:
            fixed_size(t, axis_of(dim, t.ndim, what), what)
    rest = {tuple(d for i, d in enumerate(t.dims) if i != axis_of(dim, t.ndim, what)) for t in tensors if t.ndim}
    if len(rest) > 1:  # a symbolic dim meets a number: the number fixes it
        for t in tensors:
            fixed_shape(t, what)
    return cat(tensors, dim)


# ---- splitting -----------------------------------------------------------------------------
@torchsymbol(**_METHOD_AND_TOP)
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of ``dim`` with the listed sizes (which add up to its size).

    >>> import graphc as gc
    >>> [p.shape for p in gc.zeros(5, 2).split_with_sizes([2, 3])]
    [(2, 2), (3, 2)]
    """
    fixed_size(input, axis_of(dim, input.ndim, "split_with_sizes"), "split_with_sizes")
    return input.split([int(s) for s in split_sizes], dim)


@torchsymbol(**_TOP_ONLY)
def split_with_sizes_copy(input, split_sizes, dim=0):
    """``split_with_sizes`` as new tensors."""
    return tuple(p.clone() for p in split_with_sizes(input, split_sizes, dim))


@torchsymbol(**_METHOD_AND_TOP)
def unsafe_split(input, split_size, dim=0):
    """``split`` (PyTorch's unsafe form skips a view check graphc has no need of)."""
    fixed_size(input, axis_of(dim, input.ndim, "unsafe_split"), "unsafe_split")
    return input.split(split_size, dim)


@torchsymbol(**_METHOD_AND_TOP)
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` (see ``unsafe_split``)."""
    fixed_size(input, axis_of(dim, input.ndim, "unsafe_chunk"), "unsafe_chunk")
    return input.chunk(chunks, dim)


def _split_points(indices_or_sections, what):
    """An int number of sections, or a list of split indices, from an int, a sequence or an eager
    int64 tensor (0-d: sections; 1-d: indices), as PyTorch reads them."""
    value = indices_or_sections
    if isinstance(value, Tensor):
        if value._tracer is not None:
            raise TraceError(f"{what} with a traced tensor of indices cannot be compiled: the pieces' sizes would "
                             "depend on the tensor's values; pass Python ints", value._tracer.user_location())
        if value.dtype.name != "int64" or value.ndim > 1:
            raise GraphcError(f"{what}: a tensor of indices must be a 0-d or 1-d int64 tensor, got "
                              f"{value.dtype.name}{tuple(value.shape)}")
        value = int(value.item()) if value.ndim == 0 else [int(v) for v in value.numpy().tolist()]
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return int(value)


@torchsymbol(**_METHOD_AND_TOP)
def tensor_split(input, indices_or_sections, dim=0):
    """``numpy.array_split``: ``n`` near-equal pieces (the first ``size % n`` one longer), or the
    pieces between the listed indices.

    >>> import graphc as gc
    >>> [p.numpy().tolist() for p in gc.arange(7).tensor_split(3)]
    [[0, 1, 2], [3, 4], [5, 6]]
    >>> [p.numpy().tolist() for p in gc.arange(7).tensor_split([1, 5])]
    [[0], [1, 2, 3, 4], [5, 6]]
    """
    if input.ndim == 0:
        raise ShapeError("tensor_split expects at least a 1-dimensional tensor, but got a tensor with 0 dims")
    points = _split_points(indices_or_sections, "tensor_split")
    axis = axis_of(dim, input.ndim, "tensor_split")
    size = fixed_size(input, axis, "tensor_split")
    if isinstance(points, int):
        if points <= 0:
            raise GraphcError(f"tensor_split: number of sections must be larger than 0, got {points}")
        small, extra = divmod(size, points)
        lengths = [small + 1] * extra + [small] * (points - extra)
        points = list(itertools.accumulate(lengths))[:-1]
    bounds = [0, *points, size]
    return tuple(_slice(input, axis, a, b) for a, b in zip(bounds[:-1], bounds[1:]))


def _split_along(input, value, dim, what, need):
    if input.ndim < need:
        raise ShapeError(f"torch.{what} requires a tensor with at least {need} dimension, but got a tensor with "
                         f"{input.ndim} dimensions!")
    points = _split_points(value, what)
    if isinstance(points, int):
        size = fixed_size(input, dim, what)
        if points == 0 or size % points:
            raise ShapeError(f"torch.{what} attempted to split along dimension {dim}, but the size of the dimension "
                             f"{size} is not divisible by the split_size {points}!")
    return tensor_split(input, points, dim)


@torchsymbol(**_METHOD_AND_TOP)
def hsplit(input, indices_or_sections):
    """``tensor_split`` along dim 1 (dim 0 of a 1-D tensor); sections must divide evenly.

    >>> import graphc as gc
    >>> [p.shape for p in gc.zeros(2, 4).hsplit(2)]
    [(2, 2), (2, 2)]
    """
    return _split_along(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


@torchsymbol(**_METHOD_AND_TOP)
def vsplit(input, indices_or_sections):
    """``tensor_split`` along dim 0 of a tensor of at least 2 dims; sections must divide evenly."""
    return _split_along(input, indices_or_sections, 0, "vsplit", 2)


@torchsymbol(**_METHOD_AND_TOP)
def dsplit(input, indices_or_sections):
    """``tensor_split`` along dim 2 of a tensor of at least 3 dims; sections must divide evenly."""
    return _split_along(input, indices_or_sections, 2, "dsplit", 3)


# ---- stacking ------------------------------------------------------------------------------
def _atleast(tensors, rank, shape_of):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    out = tuple(t if t.ndim >= rank else t.reshape(shape_of(t)) for t in tensors)
    return out[0] if single else out


@torchsymbol(**_TOP_ONLY)
def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (0-d become shape (1,)); a tuple unless given one tensor.

    >>> import graphc as gc
    >>> gc.atleast_1d(gc.tensor(1.0)).shape
    (1,)
    """
    return _atleast(tensors, 1, lambda t: (1,))


@torchsymbol(**_TOP_ONLY)
def atleast_2d(*tensors):
    """Each tensor with at least 2 dims: 0-d as (1, 1), (n,) as (1, n)."""
    return _atleast(tensors, 2, lambda t: (1, *t.shape) if t.ndim else (1, 1))


@torchsymbol(**_TOP_ONLY)
def atleast_3d(*tensors):
    """Each tensor with at least 3 dims: 0-d as (1, 1, 1), (n,) as (1, n, 1), (m, n) as (m, n, 1)."""
    return _atleast(tensors, 3, lambda t: (1, 1, 1) if t.ndim == 0 else (1, *t.shape, 1) if t.ndim == 1
                    else (*t.shape, 1))


def _listed(tensors, what):
    tensors = list(tensors)
    if not tensors:
        raise GraphcError(f"{what} expects a non-empty TensorList")
    return tensors


@torchsymbol(**_TOP_ONLY)
def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors), after ``atleast_1d``.

    >>> import graphc as gc
    >>> gc.hstack([gc.tensor([1, 2]), gc.tensor([3])]).numpy().tolist()
    [1, 2, 3]
    """
    tensors = atleast_1d(_listed(tensors, "hstack"))
    return cat_fixed(tensors, 0 if tensors[0].ndim == 1 else 1, "hstack")


@torchsymbol(**_TOP_ONLY, names=("row_stack",))
def vstack(tensors):
    """Concatenate along dim 0, after ``atleast_2d``."""
    return cat_fixed(atleast_2d(_listed(tensors, "vstack")), 0, "vstack")


@torchsymbol(**_TOP_ONLY)
def dstack(tensors):
    """Concatenate along dim 2, after ``atleast_3d``."""
    return cat_fixed(atleast_3d(_listed(tensors, "dstack")), 2, "dstack")


@torchsymbol(**_TOP_ONLY)
def column_stack(tensors):
    """0-d and 1-d tensors as columns, then concatenated along dim 1.

    >>> import graphc as gc
    >>> gc.column_stack([gc.tensor([1, 2]), gc.tensor([3, 4])]).numpy().tolist()
    [[1, 3], [2, 4]]
    """
    tensors = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in _listed(tensors, "column_stack")]
    return cat_fixed(tensors, 1, "column_stack")


# ---- grids and products --------------------------------------------------------------------
@torchsymbol(**_TOP_ONLY)
def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d or 1-d tensors: output ``i`` repeats tensor ``i`` along dim ``i``
    (``indexing='ij'``, the default) or with the first two dims swapped (``'xy'``).

    >>> import graphc as gc
    >>> [g.shape for g in gc.meshgrid(gc.zeros(2), gc.zeros(3), indexing="xy")]
    [(3, 2), (3, 2)]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise GraphcError(f"torch.meshgrid: indexing must be one of 'xy' or 'ij', but received: {indexing}")
    if not tensors:
        raise GraphcError("torch.meshgrid expects a non-empty TensorList")
    if any(t.ndim > 1 for t in tensors):
        raise ShapeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    lengths = [t.dims[0] if t.ndim else 1 for t in tensors]
    shape = [lengths[order[k]] for k in range(len(tensors))]
    out = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[order.index(i)] = lengths[i]
        column = apply("reshape", [t], {"shape": view})
        out.append(apply("broadcast_to", [column], {"shape": shape}))
    return tuple(out)


@torchsymbol(**_TOP_ONLY)
def cartesian_prod(*tensors):
    """Every combination of one element of each 1-D tensor, as rows (one tensor: itself).

    >>> import graphc as gc
    >>> gc.cartesian_prod(gc.tensor([1, 2]), gc.tensor([3])).numpy().tolist()
    [[1, 3], [2, 3]]
    """
    if any(t.ndim != 1 for t in tensors):
        raise ShapeError("cartesian_prod: expects 1D tensors")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return apply("concat", [g.reshape(-1, 1) for g in grids], {"dim": 1})


@torchsymbol(**_TOP_ONLY)
def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, as rows (``itertools.combinations``
    order; ``with_replacement``: ``combinations_with_replacement``).

    >>> import graphc as gc
    >>> gc.combinations(gc.tensor([1, 2, 3])).numpy().tolist()
    [[1, 2], [1, 3], [2, 3]]
    """
    if input.ndim != 1:
        raise ShapeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise GraphcError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return take(input, 0, [])
    n = fixed_size(input, 0, "combinations")
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    return take(input, 0, index.reshape(-1)).reshape(len(index), r)


@torchsymbol(**_TOP_ONLY)
def block_diag(*tensors):
    """The tensors (0-d, 1-d as a row, or 2-d) as blocks along the diagonal of one matrix.

    >>> import graphc as gc
    >>> gc.block_diag(gc.tensor([[1]]), gc.tensor([2, 3])).numpy().tolist()
    [[1, 0, 0], [0, 2, 3]]
    """
    from ..nn.functional import pad

    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                             f"{t.ndim} dimensions")
        blocks.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not blocks:
        return Tensor(np.zeros((1, 0), np.float32))
    shapes = [fixed_shape(b, "block_diag") for b in blocks]
    width = sum(s[1] for s in shapes)
    dtype = functools.reduce(promote, [b.dtype for b in blocks])
    rows, left = [], 0
    for b, (_, cols) in zip(blocks, shapes):
        rows.append(pad(b.cast(dtype), (left, width - left - cols)))
        left += cols
    return cat(rows, 0)


@torchsymbol(**_METHOD_AND_TOP)
def kron(input, other):
    """The Kronecker product: block ``(i, j)`` is ``input[i, j] * other`` (any ranks; the shorter
    shape gains leading 1s). Symbolic dims multiply through.

    >>> import graphc as gc
    >>> gc.kron(gc.tensor([1, 2]), gc.tensor([1, 10])).numpy().tolist()
    [1, 10, 2, 20]
    """
    rank = max(input.ndim, other.ndim)
    a = [1] * (rank - input.ndim) + list(input.dims)
    b = [1] * (rank - other.ndim) + list(other.dims)
    spread_a = [d for size in a for d in (size, 1)]
    spread_b = [d for size in b for d in (1, size)]
    product = apply("mul", [apply("reshape", [input], {"shape": spread_a}),
                            apply("reshape", [other], {"shape": spread_b})])
    return apply("reshape", [product], {"shape": [dim_mul(x, y) for x, y in zip(a, b)]})


@torchsymbol(**_TOP_ONLY)
def _chunk_cat(tensors, dim, num_chunks):
    """PyTorch's ``_chunk_cat``: each tensor cut into ``num_chunks`` chunks of ``dim`` (zero-padded
    to equal length), each chunk flattened, and the tensors' chunks concatenated: the result is
    ``shape[:dim] + (num_chunks, total)``.

    >>> import graphc as gc
    >>> gc._chunk_cat([gc.tensor([[1, 2, 3]])], 1, 2).numpy().tolist()
    [[[1, 2], [3, 0]]]
    """
    from ..nn.functional import pad

    tensors = list(tensors)
    if not tensors or num_chunks < 1:
        raise GraphcError("_chunk_cat expects a non-empty input tensor list and a positive num_chunks")
    pieces = []
    for t in tensors:
        axis = axis_of(dim, t.ndim, "_chunk_cat") if dim >= 0 or all(u.ndim == t.ndim for u in tensors) else None
        if axis is None:
            raise GraphcError("_chunk_cat: a negative dim needs all tensors to have the same number of dims")
        shape = fixed_shape(t, "_chunk_cat")
        chunk = math.ceil(shape[axis] / num_chunks)
        padding = [0, 0] * (t.ndim - 1 - axis) + [0, chunk * num_chunks - shape[axis]]
        padded = pad(t, padding) if padding[-1] else t
        pieces.append(padded.reshape(*shape[:axis], num_chunks, -1))
    return cat(pieces, len(pieces[0].shape) - 1)
