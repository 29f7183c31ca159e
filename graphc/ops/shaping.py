"""Shape functions declared once for ``Tensor.x`` and (where PyTorch has them) ``gc.x``:
reshape/view, permute/transpose, unsqueeze/squeeze, expand, the ``*_as`` forms, and
split/chunk/unbind (slices of one dim, so their gradient is ``slice``'s).

A traced tensor's batch dim is symbolic: splitting it would give pieces whose sizes depend on
the batch size, so split/chunk/unbind along it raise a ``TraceError``.
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..ir.errors import GraphcError, TraceError
from ..ir.types import is_static
from .surface import torchsymbol
from ..core.symint import SymInt, dims_attr, shape_args

_METHOD_ONLY = dict(top=False, functional=False)
_METHOD_AND_TOP = dict(functional=False)


@torchsymbol(**_METHOD_AND_TOP)
def reshape(input, *shape):
    """A new shape with the same elements (one dim may be -1); the batch dim stays symbolic
    when passed as ``x.shape[0]``.

    >>> import graphc as gc
    >>> gc.zeros(2, 6).reshape(3, -1).shape
    (3, 4)
    """
    return apply("reshape", [input], {"shape": dims_attr(shape_args(shape))})


@torchsymbol(**_METHOD_ONLY)
def view(input, *shape):
    """``reshape`` (graphc arrays are always contiguous, so a view never fails)."""
    return reshape(input, *shape)


@torchsymbol(**_METHOD_AND_TOP)
def permute(input, *dims):
    """Reorder the dims: ``x.permute(0, 2, 1)``."""
    return apply("permute", [input], {"perm": list(shape_args(dims))})


@torchsymbol(**_METHOD_AND_TOP)
def transpose(input, dim0, dim1):
    """Swap two dims."""
    perm = list(range(input.ndim))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return permute(input, perm)


@torchsymbol(**_METHOD_AND_TOP)
def unsqueeze(input, dim):
    """Insert a dim of size 1 at ``dim``."""
    shape = list(input.shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return reshape(input, shape)


def _is_one(size) -> bool:
    """Whether a dim is 1 for squeeze. A symbolic dim is kept unless the example traced has it
    at 1: then squeezing it is the traced program, which holds at that size only (the dim is
    pinned, and the trace starts again with it fixed: graphc/tracing.py PinnedDims)."""
    if not isinstance(size, SymInt):
        return size == 1
    return int.__int__(size) == 1 and size == 1  # (the second comparison pins the dim)


@torchsymbol(**_METHOD_AND_TOP)
def squeeze(input, dim=None):
    """Drop dims of size 1 (only ``dim``, an int or a tuple of ints, when given; a symbolic dim
    is kept unless the traced example has it at 1, which pins it).

    >>> import graphc as gc
    >>> gc.zeros(1, 3, 1, 2).squeeze().shape, gc.zeros(1, 3, 1).squeeze((0, 2)).shape
    ((3, 2), (3,))
    """
    shape = list(input.shape)
    if dim is None:
        dims = range(len(shape))
    else:
        dims = {d % max(len(shape), 1) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    keep = [size for i, size in enumerate(shape) if not (i in dims and _is_one(size))]
    return reshape(input, keep)


@torchsymbol(**_METHOD_ONLY)
def expand(input, *sizes):
    """Broadcast to ``sizes`` without copying; -1 keeps a dim, new dims go in front.

    >>> import graphc as gc
    >>> gc.zeros(3, 1).expand(2, -1, 4).shape
    (2, 3, 4)
    """
    sizes, have = list(shape_args(sizes)), input.shape
    lead = len(sizes) - len(have)
    if lead < 0:
        raise GraphcError(f"expand: {len(sizes)} sizes for a rank-{len(have)} tensor (need at least {len(have)})")
    keep = [i >= lead and not isinstance(s, SymInt) and s == -1 for i, s in enumerate(sizes)]
    shape = [have[i - lead] if k else s for i, (s, k) in enumerate(zip(sizes, keep))]
    return apply("broadcast_to", [input], {"shape": dims_attr(shape)})


@torchsymbol(**_METHOD_ONLY)
def repeat(input, *sizes):
    """Tile the tensor ``sizes[i]`` times along dim ``i`` (more sizes than dims add leading
    dims), as PyTorch's ``Tensor.repeat``: a broadcast of a reshaped view, then one reshape.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 2.0]]).repeat(2, 3).tolist()
    [[1.0, 2.0, 1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]]
    """
    sizes = list(shape_args(sizes))
    have = list(input.shape)
    if len(sizes) < len(have):
        raise GraphcError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than the number of "
                          f"dimensions of tensor ({len(have)})")
    if any(isinstance(r, SymInt) or r < 0 for r in sizes):
        raise GraphcError(f"repeat: the repeats must be non-negative Python ints, got {sizes}")
    have = [1] * (len(sizes) - len(have)) + have
    spread = [d for size in have for d in (1, size)]
    tiled = [d for r, size in zip(sizes, have) for d in (r, size)]
    out = expand(reshape(input, spread), *tiled)
    return reshape(out, [r * size if r != 1 else size for r, size in zip(sizes, have)])


@torchsymbol(**_METHOD_AND_TOP)
def tile(input, dims):
    """``torch.tile``: ``repeat`` with fewer repeats than dims meaning leading ones.

    >>> import graphc as gc
    >>> gc.tile(gc.tensor([[1, 2], [3, 4]]), (2,)).tolist()
    [[1, 2, 1, 2], [3, 4, 3, 4]]
    """
    dims = list(shape_args(tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)))
    return repeat(input, *([1] * (input.ndim - len(dims)) + dims))


@torchsymbol(**_METHOD_ONLY)
def expand_as(input, other):
    """``expand(other.shape)``."""
    return expand(input, other.shape)


@torchsymbol(**_METHOD_ONLY)
def view_as(input, other):
    """``view(other.shape)``."""
    return reshape(input, other.shape)


# ---- split, chunk, unbind ------------------------------------------------------------------
def _static_size(input, dim, what: str) -> tuple[int, int]:
    """(axis, size) of the dim to cut; a traced batch dim is refused (sizes would depend on N)."""
    rank = input.ndim
    if not -max(rank, 1) <= dim < max(rank, 1) or rank == 0:
        raise GraphcError(f"{what}: dim {dim} is out of range for a rank-{rank} tensor")
    axis = dim % rank
    if not is_static(input.dims[axis]):
        raise TraceError(f"{what} along the batch dim ({input.dims[axis]}) of a traced tensor: the pieces' sizes "
                         "would depend on the batch size, which a compiled plan leaves open; split another dim, "
                         "or split the data before calling the plan", input._tracer.user_location())
    return axis, int(input.shape[axis])


def _narrow(input, axis: int, start: int, length: int):
    slices = [(None, None, 1)] * input.ndim
    slices[axis] = (start, start + length, 1)
    return apply("slice", [input], {"slices": slices, "drop": []})


@torchsymbol(**_METHOD_AND_TOP)
def split(input, split_size_or_sections, dim=0):
    """Cut ``dim`` into pieces of ``split_size`` (the last may be smaller) or of the listed
    sizes (which must add up to the dim's size), as PyTorch.

    >>> import graphc as gc
    >>> [p.shape for p in gc.zeros(5, 2).split(2)]
    [(2, 2), (2, 2), (1, 2)]
    >>> [p.shape for p in gc.split(gc.zeros(2, 5), [1, 4], dim=1)]
    [(2, 1), (2, 4)]
    """
    axis, size = _static_size(input, dim, "split")
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and not (step == 0 and size == 0):
            raise GraphcError(f"split: split_size must be a positive int, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise GraphcError(f"split: sizes {sizes} must be >= 0 and add up to dim {dim}'s size {size}")
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(_narrow(input, axis, start, length) for start, length in zip(starts, sizes))


@torchsymbol(**_METHOD_AND_TOP)
def chunk(input, chunks, dim=0):
    """Cut ``dim`` into ``chunks`` pieces of ``ceil(size / chunks)`` (fewer pieces when that
    covers the dim sooner), as PyTorch. ``chunk(1)`` works on a traced batch dim too.

    >>> import graphc as gc
    >>> [p.shape[0] for p in gc.zeros(5).chunk(3)]
    [2, 2, 1]
    """
    if not isinstance(chunks, int) or chunks <= 0:
        raise GraphcError(f"chunk: chunks must be a positive int, got {chunks!r}")
    if chunks == 1 and input.ndim:
        return (input,)
    axis, size = _static_size(input, dim, "chunk")
    if size == 0:
        return split(input, [0] * chunks, axis)
    return split(input, -(-size // chunks), axis)


@torchsymbol(**_METHOD_AND_TOP)
def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim (``q, k, v = qkv.unbind(0)``).

    >>> import graphc as gc
    >>> [t.shape for t in gc.zeros(3, 2).unbind(1)]
    [(3,), (3,)]
    """
    axis, size = _static_size(input, dim, "unbind")
    slices = [(None, None, 1)] * input.ndim
    pieces = []
    for i in range(size):
        slices[axis] = (i, None, 1)
        pieces.append(apply("slice", [input], {"slices": list(slices), "drop": [axis]}))
    return tuple(pieces)


@torchsymbol(**_METHOD_AND_TOP)
def narrow(input, dim, start, length):
    """``length`` entries of ``dim`` from ``start`` (negative counts from the end), as PyTorch's
    (a view there; a slice here, whose gradient scatters back).

    >>> import graphc as gc
    >>> gc.arange(10).narrow(0, 2, 3).numpy().tolist()
    [2, 3, 4]
    """
    axis, size = _static_size(input, dim, "narrow")
    if getattr(start, "_tracer", None) is not None:  # a start computed in the plan
        return _narrow_at(input, axis, size, start, int(length))
    start, length = int(start), int(length)
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise GraphcError(f"narrow: start {start} and length {length} are out of range for dim {dim} of size {size}")
    return _narrow(input, axis, start, length)


def _narrow_at(input, axis, size, start, length):
    """narrow from a traced 0-d start: a gather of ``start + arange(length)`` along ``axis``
    (negative starts count from the end; the window must fit, as PyTorch checks)."""
    import numpy as np

    from ..core.tensor import Tensor
    from ..ir.types import DType

    start = start.reshape([1] * input.ndim).cast(DType.int64)
    start = apply("where", [apply("lt", [start, 0]), start + size, start])
    steps = np.arange(length, dtype=np.int64).reshape([length if d == axis else 1 for d in range(input.ndim)])
    shape = list(input.shape)
    shape[axis] = length
    return apply("gather", [input, (start + Tensor(steps)).expand(*shape)], {"dim": axis})


@torchsymbol(**_METHOD_AND_TOP)
def t(input):
    """The transpose of a matrix; tensors of fewer than 2 dims as they are (``torch.t``).

    >>> import graphc as gc
    >>> gc.zeros(2, 3).t().shape
    (3, 2)
    """
    if input.ndim > 2:
        raise GraphcError(f"t() takes tensors of at most 2 dims, got {input.ndim} (use transpose or permute)")
    return input if input.ndim < 2 else transpose(input, 0, 1)
