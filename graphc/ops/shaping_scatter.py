"""Writing into positions and reading strided ones, as composites over ``scatter`` / ``gather``
of constant indices: ``select_scatter``, ``slice_scatter``, ``diagonal_scatter``,
``as_strided_copy`` / ``as_strided_scatter`` (and ``Tensor.as_strided``); with ``rot90``,
``diagflat``, ``repeat_interleave`` and ``constant_pad_nd``.

graphc tensors own their elements (no storage shared between views), so ``as_strided`` reads
the tensor's own elements in row-major order, ``storage_offset`` counting from its first: for a
contiguous tensor that is PyTorch's storage; a position past the tensor is an error.
"""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError, TraceError
from ..ir.types import is_static
from .shaping_views import axis_of, fixed_shape, fixed_size, put, take
from .surface import torchsymbol

_TOP_ONLY = dict(method=False, functional=False)
_METHOD_AND_TOP = dict(functional=False)


def _same_dtype(input, src, what):
    if src.dtype != input.dtype:
        raise GraphcError(f"{what}: src has dtype {src.dtype.name}, the input {input.dtype.name}; they must match")


@torchsymbol(**_METHOD_AND_TOP)
def select_scatter(input, src, dim, index):
    """``input`` with ``input.select(dim, index)`` replaced by ``src`` (a new tensor).

    >>> import graphc as gc
    >>> gc.zeros(2, 2).select_scatter(gc.ones(2), 0, 1).numpy().tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    _same_dtype(input, src, "select_scatter")
    axis = axis_of(dim, input.ndim, "select_scatter")
    size, index = input.dims[axis], int(index)
    if is_static(size) and not -size <= index < size:
        raise ShapeError(f"select_scatter: index {index} is out of range for dim {dim} of size {size}")
    want = tuple(d for i, d in enumerate(input.dims) if i != axis)
    if tuple(src.dims) != want:
        raise ShapeError(f"select_scatter: src of shape {tuple(src.shape)} must have the selected slice's "
                         f"{tuple(input.shape[:axis] + input.shape[axis + 1:])}")
    return put(input, axis, [index], src.unsqueeze(axis))


@torchsymbol(**_METHOD_AND_TOP)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``input[..., start:end:step, ...]`` (in ``dim``) replaced by ``src``.

    >>> import graphc as gc
    >>> gc.zeros(4).slice_scatter(gc.ones(2), start=0, step=2).numpy().tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    _same_dtype(input, src, "slice_scatter")
    axis = axis_of(dim, input.ndim, "slice_scatter")
    if int(step) <= 0:
        raise GraphcError(f"slice_scatter: slice step must be positive, got {step}")
    size = fixed_size(input, axis, "slice_scatter")
    positions = np.arange(*slice(start, end, int(step)).indices(size))
    want = list(input.dims)
    want[axis] = len(positions)
    if list(src.dims) != want:
        raise ShapeError(f"slice_scatter: src of shape {tuple(src.shape)} must have the slice's shape {tuple(want)}")
    return put(input, axis, positions, src) if len(positions) else input.clone()


def _diagonal_positions(rows, cols, offset):
    """Flat positions (in a rows x cols matrix) of the ``offset`` diagonal."""
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(min(rows - r0, cols - c0), 0)
    k = np.arange(length)
    return (r0 + k) * cols + c0 + k


@torchsymbol(**_METHOD_AND_TOP)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``.

    >>> import graphc as gc
    >>> gc.zeros(2, 2).diagonal_scatter(gc.ones(2)).numpy().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _same_dtype(input, src, "diagonal_scatter")
    a1, a2 = axis_of(dim1, input.ndim, "diagonal_scatter"), axis_of(dim2, input.ndim, "diagonal_scatter")
    if a1 == a2:
        raise ShapeError(f"diagonal_scatter: dim1 and dim2 cannot be equal ({dim1}, {dim2})")
    rows, cols = fixed_size(input, a1, "diagonal_scatter"), fixed_size(input, a2, "diagonal_scatter")
    positions = _diagonal_positions(rows, cols, int(offset))
    moved = input.movedim((a1, a2), (-2, -1))
    want = tuple(moved.dims[:-2]) + (len(positions),)
    if tuple(src.dims) != want:
        raise ShapeError(f"diagonal_scatter: src of shape {tuple(src.shape)} must have the diagonal's shape {want}")
    flat = moved.reshape(*moved.shape[:-2], rows * cols)
    out = put(flat, flat.ndim - 1, positions, src) if len(positions) else flat.clone()
    return out.reshape(moved.shape).movedim((-2, -1), (a1, a2))


def _strided_positions(input, size, stride, storage_offset, what):
    """Flat positions an ``as_strided`` view reads, checked against the tensor's elements."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    offset = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise ShapeError(f"{what}: mismatch in length of strides and shape ({len(stride)} and {len(size)})")
    if any(s < 0 for s in (*size, *stride)) or offset < 0:
        raise ShapeError(f"{what}: sizes, strides and storage_offset must be non-negative, got {size}, {stride}, "
                         f"{offset}")
    grid = np.full(size, offset, dtype=np.int64)
    for axis, step in enumerate(stride):
        shape = [1] * len(size)
        shape[axis] = size[axis]
        grid = grid + (np.arange(size[axis], dtype=np.int64) * step).reshape(shape)
    elements = int(np.prod(fixed_shape(input, what), dtype=np.int64))
    if grid.size and int(grid.max()) >= elements:
        raise ShapeError(f"{what}: size {tuple(size)}, stride {tuple(stride)} and storage_offset {offset} reach "
                         f"element {int(grid.max())} of a tensor of {elements} (graphc tensors own their elements: "
                         "no storage beyond them)")
    return grid


@torchsymbol(**_TOP_ONLY)
def as_strided_copy(input, size, stride, storage_offset=None):
    """The elements at ``storage_offset + sum(i_k * stride_k)`` of the tensor's row-major
    elements, in a tensor of ``size`` (a ``gather``, so gradients sum back).

    >>> import graphc as gc
    >>> gc.as_strided_copy(gc.arange(6), (2, 2), (1, 2)).numpy().tolist()
    [[0, 2], [1, 3]]
    """
    grid = _strided_positions(input, size, stride, storage_offset, "as_strided")
    return take(input.reshape(-1), 0, grid.reshape(-1)).reshape(grid.shape)


@torchsymbol(**_METHOD_AND_TOP)
def as_strided(input, size, stride, storage_offset=None):
    """``as_strided_copy``: graphc has no strided views; ``storage_offset`` counts from the
    tensor's first element (PyTorch's counts from its storage's, the same for a contiguous
    tensor that is no view of another).

    >>> import graphc as gc
    >>> gc.arange(6).as_strided((2,), (3,), 1).numpy().tolist()
    [1, 4]
    """
    return as_strided_copy(input, size, stride, storage_offset)


@torchsymbol(**_METHOD_AND_TOP)
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """``input`` with the positions ``as_strided(size, stride, storage_offset)`` reads replaced by
    ``src`` (overlapping positions: one of the writes wins, as in PyTorch).

    >>> import graphc as gc
    >>> gc.zeros(4).as_strided_scatter(gc.ones(2), (2,), (2,)).numpy().tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    _same_dtype(input, src, "as_strided_scatter")
    grid = _strided_positions(input, size, stride, storage_offset, "as_strided_scatter")
    if tuple(src.dims) != grid.shape:
        raise ShapeError(f"as_strided_scatter: src of shape {tuple(src.shape)} must have size {grid.shape}")
    flat = input.reshape(-1)
    out = put(flat, 0, grid.reshape(-1), src.reshape(-1)) if grid.size else flat.clone()
    return out.reshape(input.shape)


@torchsymbol(**_METHOD_AND_TOP)
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first dim toward the second.

    >>> import graphc as gc
    >>> gc.tensor([[1, 2], [3, 4]]).rot90().numpy().tolist()
    [[2, 4], [1, 3]]
    """
    dims = list(dims)
    if len(dims) != 2:
        raise ShapeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise ShapeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = axis_of(dims[0], input.ndim, "rot90"), axis_of(dims[1], input.ndim, "rot90")
    if d0 == d1:
        raise ShapeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = int(k) % 4
    if k:
        fixed_size(input, d0, "rot90")
        fixed_size(input, d1, "rot90")
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


@torchsymbol(**_METHOD_AND_TOP)
def diagflat(input, offset=0):
    """The flattened input as the ``offset`` diagonal of a square matrix.

    >>> import graphc as gc
    >>> gc.diagflat(gc.tensor([[1, 2]])).numpy().tolist()
    [[1, 0], [0, 2]]
    """
    fixed_shape(input, "diagflat")
    return input.reshape(-1).diag_embed(int(offset))


def _repeat_counts(repeats, what):
    if isinstance(repeats, Tensor):
        if repeats._tracer is not None:
            raise TraceError(f"{what} with a traced tensor of repeats cannot be compiled: the result's size would "
                             "depend on its values; pass an int or an eager tensor", repeats._tracer.user_location())
        if repeats.dtype.name != "int64" or repeats.ndim > 1:
            raise GraphcError(f"{what}: repeats must be an int or a 0-d or 1-d int64 tensor, got "
                              f"{repeats.dtype.name}{tuple(repeats.shape)}")
        repeats = repeats.numpy()
    counts = np.asarray(repeats, dtype=np.int64).reshape(-1)
    if (counts < 0).any():
        raise GraphcError(f"{what}: repeats can not be negative")
    return counts


@torchsymbol(**_METHOD_AND_TOP)
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (of ``dim``; of the flattened tensor when None) ``repeats`` times in a row;
    ``repeats`` an int or one count per element. ``repeat_interleave(counts)`` alone gives each
    index ``counts[i]`` times.

    >>> import graphc as gc
    >>> gc.tensor([1, 2]).repeat_interleave(2).numpy().tolist()
    [1, 1, 2, 2]
    >>> gc.repeat_interleave(gc.tensor([1, 2])).numpy().tolist()
    [0, 1, 1]
    """
    if repeats is None:  # repeat_interleave(counts): the indices
        counts = _repeat_counts(input, "repeat_interleave")
        return Tensor(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    if dim is None:
        input, dim = input.reshape(-1), 0
    axis = axis_of(dim, input.ndim, "repeat_interleave")
    if input.ndim == 0:
        input = input.reshape(1)
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        if repeats < 0:
            raise GraphcError("repeat_interleave: repeats can not be negative")
        shape = list(input.shape)
        spread = input.unsqueeze(axis + 1).expand(*shape[:axis + 1], repeats, *shape[axis + 1:])
        shape[axis] = shape[axis] * repeats
        out = spread.reshape(shape)
    else:
        counts = _repeat_counts(repeats, "repeat_interleave")
        size = fixed_size(input, axis, "repeat_interleave")
        if counts.size == 1:
            counts = np.full(size, counts[0])
        if counts.size != size:
            raise ShapeError(f"repeat_interleave: repeats must have the same size as input along dim, but got "
                             f"repeats.size(0) = {counts.size} and input.size({dim}) = {size}")
        out = take(input, axis, np.repeat(np.arange(size), counts))
    if output_size is not None and int(out.shape[axis]) != int(output_size):
        raise ShapeError(f"repeat_interleave: output_size {output_size} != the result's {out.shape[axis]}")
    return out


@torchsymbol(**_TOP_ONLY)
def constant_pad_nd(input, pad, value=0):
    """``F.pad(input, pad, value=value)``: ``pad`` pairs (before, after) from the last dim
    backwards; negative amounts crop.

    >>> import graphc as gc
    >>> gc.constant_pad_nd(gc.tensor([1.0]), (1, 2)).numpy().tolist()
    [0.0, 1.0, 0.0, 0.0]
    """
    from ..nn.functional import pad as _pad

    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"constant_pad_nd: padding length {len(pad)} must be even and at most twice the rank "
                         f"{input.ndim}")
    for i in range(len(pad) // 2):
        fixed_size(input, input.ndim - 1 - i, "constant_pad_nd")
    return _pad(input, pad, value=value)
