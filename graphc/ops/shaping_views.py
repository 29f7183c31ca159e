"""PyTorch's view functions and their ``*_copy`` twins, as composites over reshape / permute /
slice / broadcast_to / gather: ``select``, ``Tensor.unfold``, ``unflatten``, ``ravel``,
``reshape_as``, ``sum_to_size``, ``broadcast_to``/``broadcast_tensors``, ``positive``,
``adjoint`` and ``Tensor.H``/``mH``; ``alias_copy``, ``expand_copy``, ``permute_copy``... (graphc
arrays are never shared between tensors a user can write through, so a ``*_copy`` is the view
followed by ``clone``).

A result whose size depends on a symbolic dim of a traced tensor (cutting the batch dim into
pieces) pins that dim (:func:`fixed_size`): the trace starts again with the example's size
fixed, and the plan then takes that size only (a ``ShapeError`` names the line otherwise), as
``len(x)`` does (docs/design-notes.md, "PinnedDims").
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.symint import dims_attr, shape_args
from ..core.tensor import Tensor
from ..executor.backends import backend_of
from ..ir.errors import GraphcError, ShapeError
from ..ir.ops._shapes import broadcast
from ..ir.types import is_static
from .surface import torchsymbol

_TOP_ONLY = dict(method=False, functional=False)
_METHOD_AND_TOP = dict(functional=False)
_METHOD_ONLY = dict(top=False, functional=False)


# ---- helpers shared by the shape files -----------------------------------------------------
def axis_of(dim, rank: int, what: str) -> int:
    """``dim`` (negative counts from the end) as an axis of a rank-``rank`` tensor (0-d: one axis)."""
    n = max(rank, 1)
    if not -n <= int(dim) < n:
        raise ShapeError(f"{what}: dim {dim} is out of range for a rank-{rank} tensor")
    return int(dim) % n


def fixed_size(input: Tensor, axis: int, what: str) -> int:
    """The size of ``axis`` as a Python int. A symbolic dim (a traced batch) is pinned at its
    example size and a ``ShapeError`` starts the trace again with it fixed (graphc/tracing.py)."""
    dim = input.dims[axis]
    if is_static(dim):
        return int(dim)
    int(input.shape[axis])  # SymInt.__int__ pins the symbol (tracer.fix_size)
    raise ShapeError(f"{what}: the result's shape depends on the symbolic dim {dim} of a traced tensor; the "
                     "trace is repeated with it fixed at the example's size (the plan takes that size only)")


def fixed_shape(input: Tensor, what: str) -> tuple:
    """Every dim of ``input`` as a Python int (symbolic dims pinned, as :func:`fixed_size`)."""
    for axis in range(input.ndim):
        fixed_size(input, axis, what)
    return tuple(int(d) for d in input.dims)


def const_like(input: Tensor, array) -> Tensor:
    """A constant on ``input``'s device (a graph constant while tracing)."""
    if input._tracer is None:
        array = backend_of(input.array).asarray(array)
    return Tensor(array)


def take(input: Tensor, axis: int, index) -> Tensor:
    """``input`` read at the constant int64 positions ``index`` (1-D) along ``axis``: a
    ``gather`` of an index broadcast over the other dims (its gradient sums back)."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    shape = [1] * input.ndim
    shape[axis] = index.size
    dims = list(input.dims)
    dims[axis] = index.size
    full = apply("broadcast_to", [const_like(input, index.reshape(shape))], {"shape": dims})
    return apply("gather", [input, full], {"dim": axis})


def put(input: Tensor, axis: int, index, src: Tensor) -> Tensor:
    """``input`` with ``src`` written at the constant positions ``index`` (1-D) along ``axis``
    (``src`` has ``len(index)`` there): a ``scatter``, whose gradient reaches both."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    shape = [1] * input.ndim
    shape[axis] = index.size
    full = apply("broadcast_to", [const_like(input, index.reshape(shape))], {"shape": list(src.dims)})
    return apply("scatter", [input, full, src.cast(input.dtype)], {"dim": axis, "reduce": "none"})


def copied(out):
    """A ``*_copy``'s result: the view's values in new tensors (gradients flow through)."""
    if isinstance(out, (tuple, list)):
        return type(out)(copied(o) for o in out)
    return out.clone()


# ---- views ---------------------------------------------------------------------------------
@torchsymbol(**_METHOD_AND_TOP)
def select(input, dim, index):
    """The slice at ``index`` of ``dim``, without that dim (``x[:, index]`` for dim 1).

    >>> import graphc as gc
    >>> gc.tensor([[1, 2], [3, 4]]).select(1, -1).numpy().tolist()
    [2, 4]
    """
    if input.ndim == 0:
        raise ShapeError("select() cannot be applied to a 0-dim tensor")
    axis = axis_of(dim, input.ndim, "select")
    size, index = input.dims[axis], int(index)
    if is_static(size) and not -size <= index < size:
        raise ShapeError(f"select: index {index} is out of range for dim {dim} of size {size}")
    slices = [(None, None, 1)] * input.ndim
    slices[axis] = (index, None, 1)
    return apply("slice", [input], {"slices": slices, "drop": [axis]})


@torchsymbol(**_METHOD_ONLY)
def unfold(input, dimension, size, step):
    """Every ``size``-long window of ``dimension``, ``step`` apart, as a new last dim (``dimension``
    then counts the windows), as ``Tensor.unfold``: one ``gather`` of the windows' positions.

    >>> import graphc as gc
    >>> gc.arange(5).unfold(0, 2, 2).numpy().tolist()
    [[0, 1], [2, 3]]
    """
    if input.ndim == 0:
        if int(size) > 1 or int(step) <= 0:
            raise ShapeError(f"unfold: size {size} and step {step} do not fit a 0-d tensor")
        return input.reshape(1)
    axis = axis_of(dimension, input.ndim, "unfold")
    length, size, step = fixed_size(input, axis, "unfold"), int(size), int(step)
    if size < 0 or size > length or step <= 0:
        raise ShapeError(f"unfold: size {size} (at most {length}, dim {dimension}'s size) and step {step} (> 0) "
                         "do not fit")
    count = (length - size) // step + 1
    index = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    out = take(input, axis, index)
    shape = list(out.dims)
    shape[axis:axis + 1] = [count, size]
    out = apply("reshape", [out], {"shape": shape})
    return out if axis + 1 == out.ndim - 1 else out.movedim(axis + 1, -1)


@torchsymbol(**_METHOD_AND_TOP)
def unflatten(input, dim, sizes):
    """Split ``dim`` into ``sizes`` (one may be -1), as PyTorch's.

    >>> import graphc as gc
    >>> gc.zeros(2, 12).unflatten(1, (3, -1)).shape
    (2, 3, 4)
    """
    axis = axis_of(dim, input.ndim, "unflatten")
    sizes = list(sizes)
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    if not is_static(input.dims[axis]) and not any(hasattr(s, "sym") for s in sizes):
        fixed_size(input, axis, "unflatten")
    shape = list(input.shape)
    shape[axis:axis + 1] = sizes
    return input.reshape(shape)


@torchsymbol(**_METHOD_AND_TOP)
def ravel(input):
    """The elements as one dim (``reshape(-1)``).

    >>> import graphc as gc
    >>> gc.zeros(2, 3).ravel().shape
    (6,)
    """
    return input.reshape(-1)


@torchsymbol(**_METHOD_ONLY)
def reshape_as(input, other):
    """``reshape(other.shape)``. When the two disagree on a traced symbolic dim, that dim is pinned.

    >>> import graphc as gc
    >>> gc.zeros(6).reshape_as(gc.zeros(2, 3)).shape
    (2, 3)
    """
    if list(input.dims) != list(other.dims) and not all(is_static(d) for d in (*input.dims, *other.dims)):
        fixed_shape(input, "reshape_as")
        fixed_shape(other, "reshape_as")
    return input.reshape(other.shape)


@torchsymbol(**_METHOD_ONLY)
def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (a shape it broadcasts to), as ``Tensor.sum_to_size``.

    >>> import graphc as gc
    >>> gc.ones(2, 3).sum_to_size(1, 3).numpy().tolist()
    [[2.0, 2.0, 2.0]]
    """
    size = dims_attr(shape_args(size))
    have = list(input.dims)
    lead = len(have) - len(size)
    for axis, (s, d) in enumerate(zip(size, have[lead:]) if lead >= 0 else ()):
        if not is_static(d) and s != d and s != 1:  # a number where the tensor has a symbolic dim fixes it
            fixed_size(input, lead + axis, "sum_to_size")
    if lead < 0 or any(s != 1 and s != d for s, d in zip(size, have[lead:])):
        raise ShapeError(f"sum_to_size: size {tuple(size)} is not expandable to the tensor's {tuple(input.shape)}")
    out = input.sum(tuple(range(lead))) if lead else input
    dims = tuple(i for i, (s, d) in enumerate(zip(size, have[lead:])) if s == 1 and d != 1)
    return out.sum(dims, keepdim=True) if dims else out


@torchsymbol(**_METHOD_AND_TOP)
def broadcast_to(input, size):
    """``expand(size)``: -1 keeps a dim, new dims go in front.

    >>> import graphc as gc
    >>> gc.broadcast_to(gc.zeros(3, 1), (2, 3, 4)).shape
    (2, 3, 4)
    """
    return expand_fixed(input, size, "broadcast_to")


def expand_fixed(input, size, what: str):
    """``input.expand(size)``; a symbolic dim of ``input`` that ``size`` names as a plain number
    (not -1, not the traced size itself) is pinned, as the number fixes it."""
    size = list(shape_args(tuple(size)))
    lead = len(size) - input.ndim
    for axis, dim in enumerate(input.dims):
        want = size[lead + axis] if lead + axis >= 0 else -1
        if not is_static(dim) and not hasattr(want, "sym") and want != -1:
            fixed_size(input, axis, what)
    return input.expand(*size)


@torchsymbol(**_TOP_ONLY)
def broadcast_tensors(*tensors):
    """Every tensor broadcast to their common shape (numpy's rule; a traced batch dim broadcasts too).

    >>> import graphc as gc
    >>> [t.shape for t in gc.broadcast_tensors(gc.zeros(3), gc.zeros(2, 1))]
    [(2, 3), (2, 3)]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = list(broadcast(*(tuple(t.dims) for t in tensors)))
    return tuple(t if list(t.dims) == shape else apply("broadcast_to", [t], {"shape": shape}) for t in tensors)


@torchsymbol(**_METHOD_AND_TOP)
def positive(input):
    """``input`` itself (``+x``); PyTorch refuses bool tensors, and so does graphc.

    >>> import graphc as gc
    >>> gc.positive(gc.tensor([-1.0])).numpy().tolist()
    [-1.0]
    """
    if input.dtype.name == "bool":
        raise GraphcError("The `+` operator, on a bool tensor is not supported.")
    return input


@torchsymbol(**_METHOD_AND_TOP)
def adjoint(input):
    """The conjugate transpose of the last two dims (graphc's tensors are real: ``mT``).

    >>> import graphc as gc
    >>> gc.zeros(4, 2, 3).adjoint().shape
    (4, 3, 2)
    """
    if input.ndim < 2:
        raise ShapeError(f"adjoint: expected a tensor of at least 2 dims, got {input.ndim}")
    return input.transpose(-2, -1)


def _h(input):
    """The conjugate transpose of a matrix (graphc's tensors are real: ``t()``); a 0-d tensor as it is."""
    if input.ndim not in (0, 2):
        raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got {input.ndim}-D tensor.")
    return input.t()


def _mh(input):
    """The conjugate transpose of the last two dims (``mT`` of a real tensor)."""
    if input.ndim < 2:
        raise ShapeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {input.ndim}-D "
                         "tensor.")
    return adjoint(input)


Tensor.H = property(_h)  # properties, as PyTorch's: the surface installs methods only
Tensor.mH = property(_mh)


# ---- the *_copy functions ------------------------------------------------------------------
@torchsymbol(**_TOP_ONLY)
def alias_copy(input):
    """A copy of ``input`` (PyTorch's ``alias`` is a view; its ``_copy`` a new tensor).

    >>> import graphc as gc
    >>> gc.alias_copy(gc.tensor([1.0])).numpy().tolist()
    [1.0]
    """
    return input.clone()


@torchsymbol(**_TOP_ONLY)
def expand_copy(input, size, *, implicit=False):
    """``input.expand(size)`` as a new tensor.

    >>> import graphc as gc
    >>> gc.expand_copy(gc.zeros(3, 1), (3, 2)).shape
    (3, 2)
    """
    return copied(expand_fixed(input, size, "expand_copy"))


@torchsymbol(**_TOP_ONLY)
def permute_copy(input, dims):
    """``input.permute(dims)`` as a new tensor."""
    return copied(input.permute(*dims) if input.ndim else input)


@torchsymbol(**_TOP_ONLY)
def squeeze_copy(input, dim=None):
    """``input.squeeze(dim)`` as a new tensor."""
    return copied(input.squeeze(dim))


@torchsymbol(**_TOP_ONLY)
def unsqueeze_copy(input, dim):
    """``input.unsqueeze(dim)`` as a new tensor."""
    return copied(input.unsqueeze(dim))


@torchsymbol(**_TOP_ONLY)
def t_copy(input):
    """``input.t()`` as a new tensor."""
    return copied(input.t())


@torchsymbol(**_TOP_ONLY)
def transpose_copy(input, dim0, dim1):
    """``input.transpose(dim0, dim1)`` as a new tensor (dims checked against the rank)."""
    if input.ndim == 0:
        axis_of(dim0, 0, "transpose_copy")
        axis_of(dim1, 0, "transpose_copy")
        return copied(input)
    return copied(input.transpose(axis_of(dim0, input.ndim, "transpose_copy"),
                                  axis_of(dim1, input.ndim, "transpose_copy")))


@torchsymbol(**_TOP_ONLY)
def view_copy(input, size):
    """``input.view(size)`` as a new tensor (a symbolic dim the new shape cannot keep is pinned)."""
    try:
        return copied(input.reshape(size))
    except ShapeError:
        fixed_shape(input, "view_copy")
        raise


@torchsymbol(**_METHOD_AND_TOP)
def narrow_copy(input, dim, start, length):
    """``input.narrow(dim, start, length)`` as a new tensor.

    >>> import graphc as gc
    >>> gc.arange(5).narrow_copy(0, 1, 2).numpy().tolist()
    [1, 2]
    """
    fixed_size(input, axis_of(dim, input.ndim, "narrow_copy"), "narrow_copy")
    return copied(input.narrow(dim, start, length))


@torchsymbol(**_TOP_ONLY)
def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    """``input.diagonal(offset, dim1, dim2)`` as a new tensor."""
    for dim in (dim1, dim2):
        fixed_size(input, axis_of(dim, input.ndim, "diagonal_copy"), "diagonal_copy")
    return copied(input.diagonal(offset, dim1, dim2))


@torchsymbol(**_TOP_ONLY)
def unbind_copy(input, dim=0):
    """``input.unbind(dim)`` as new tensors."""
    fixed_size(input, axis_of(dim, input.ndim, "unbind_copy"), "unbind_copy")
    return copied(input.unbind(dim))


@torchsymbol(**_TOP_ONLY)
def unfold_copy(input, dimension, size, step):
    """``input.unfold(dimension, size, step)`` (a new tensor already)."""
    return unfold(input, dimension, size, step)
