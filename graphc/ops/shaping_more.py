"""More shape functions, composites over slice / concat / permute / where: flip, fliplr,
flipud, roll, movedim/moveaxis, diagonal, diag, diag_embed; and eye, linspace, logspace.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..executor.backends import backend_of
from ..ir.errors import ShapeError
from ..ir.types import DType
from .shaping import _static_size
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _axes(dims, rank, what):
    dims = [dims] if isinstance(dims, int) else list(dims)
    out = []
    for d in dims:
        if not -max(rank, 1) <= int(d) < max(rank, 1):
            raise ShapeError(f"{what}: dim {d} is out of range for a rank-{rank} tensor")
        out.append(int(d) % max(rank, 1))
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: dims {tuple(dims)} repeat a dim")
    return out


def _const(input, array):
    if input._tracer is None:
        array = backend_of(input.array).asarray(array)
    return Tensor(array)


def _slice(x, axis, start, stop, step=1):
    slices = [(None, None, 1)] * x.ndim
    slices[axis] = (start, stop, step)
    return apply("slice", [x], {"slices": slices, "drop": []})


@torchsymbol(**_METHOD_AND_TOP)
def flip(input, *dims_args, dims=None):
    """Reverse the order along ``dims`` (a copy, as PyTorch's).

    >>> import graphc as gc
    >>> gc.tensor([[1, 2], [3, 4]]).flip(1).numpy().tolist()
    [[2, 1], [4, 3]]
    """
    if dims is None:
        dims = dims_args[0] if len(dims_args) == 1 and isinstance(dims_args[0], (list, tuple)) else dims_args
    if input.ndim == 0:
        return input
    out = input
    for axis in _axes(dims, input.ndim, "flip"):
        _static_size(out, axis, "flip")  # a traced batch dim is refused with a clear message
        out = _slice(out, axis, None, None, -1)
    return out


@torchsymbol(**_METHOD_AND_TOP)
def fliplr(input):
    """``flip(1)`` of a tensor of at least 2 dims."""
    if input.ndim < 2:
        raise ShapeError("fliplr: input must be >= 2-d")
    return flip(input, 1)


@torchsymbol(**_METHOD_AND_TOP)
def flipud(input):
    """``flip(0)`` of a tensor of at least 1 dim."""
    if input.ndim < 1:
        raise ShapeError("flipud: input must be >= 1-d")
    return flip(input, 0)


@torchsymbol(**_METHOD_AND_TOP)
def roll(input, shifts, dims=None):
    """Shift elements along ``dims`` cyclically (the flattened tensor when None), as PyTorch.

    >>> import graphc as gc
    >>> gc.tensor([1, 2, 3, 4]).roll(1).numpy().tolist()
    [4, 1, 2, 3]
    """
    from .creation import cat

    if dims is None:
        shape = input.shape
        return roll(input.reshape(-1), shifts, 0).reshape(shape) if input.ndim else input
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {tuple(shifts)} and dims {tuple(dims)} differ in length")
    out = input
    for shift, dim in zip(shifts, dims):
        axis, size = _static_size(out, dim, "roll")
        if size == 0 or int(shift) % size == 0:
            continue
        s = int(shift) % size
        out = cat([_slice(out, axis, size - s, size), _slice(out, axis, 0, size - s)], axis)
    return out


@torchsymbol(**_METHOD_AND_TOP, names=("moveaxis",))
def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination`` (ints or tuples), keeping the others' order.

    >>> import graphc as gc
    >>> gc.zeros(2, 3, 4).movedim(0, -1).shape
    (3, 4, 2)
    """
    src = _axes(source, input.ndim, "movedim")
    dst = _axes(destination, input.ndim, "movedim")
    if len(src) != len(dst):
        raise ShapeError("movedim: source and destination need as many dims")
    if input.ndim == 0:
        return input
    rest = iter(d for d in range(input.ndim) if d not in src)
    where = dict(zip(dst, src))
    perm = [where[i] if i in where else next(rest) for i in range(input.ndim)]
    return input if perm == list(range(input.ndim)) else apply("permute", [input], {"perm": perm})


@torchsymbol(**_METHOD_AND_TOP)
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the (``dim1``, ``dim2``) planes as the last dim (``offset`` > 0: above).

    >>> import graphc as gc
    >>> gc.tensor([[1, 2], [3, 4]]).diagonal().numpy().tolist()
    [1, 4]
    """
    a1, a2 = _axes((dim1, dim2), input.ndim, "diagonal")
    x = movedim(input, (a1, a2), (-2, -1))
    rows, cols = _static_size(x, -2, "diagonal")[1], _static_size(x, -1, "diagonal")[1]
    offset = int(offset)
    if offset >= 0:
        x = _slice(x, x.ndim - 1, min(offset, cols), cols)
    else:
        x = _slice(x, x.ndim - 2, min(-offset, rows), rows)
    length = min(int(x.shape[-2]), int(x.shape[-1]))
    x = _slice(_slice(x, x.ndim - 2, 0, length), x.ndim - 1, 0, length)
    mask = _const(input, np.eye(length, dtype=bool))
    out = apply("sum", [apply("where", [mask, x, False if x.dtype.name == "bool" else 0])],
                {"dims": (-1,), "keepdim": False})
    return out.cast(input.dtype.name) if out.dtype != input.dtype else out


@torchsymbol(**_METHOD_AND_TOP)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims ``dim1``, ``dim2`` of the result) whose ``offset`` diagonal is the last dim.

    >>> import graphc as gc
    >>> gc.tensor([1, 2]).diag_embed().numpy().tolist()
    [[1, 0], [0, 2]]
    """
    length = _static_size(input, -1, "diag_embed")[1] if input.ndim else 1
    offset = int(offset)
    n = length + abs(offset)
    pick = np.zeros((n, n, length), dtype=bool)
    k = np.arange(length)
    pick[k + max(-offset, 0), k + max(offset, 0), k] = True
    v = input.unsqueeze(-2).unsqueeze(-2)  # (..., 1, 1, L)
    out = apply("sum", [apply("where", [_const(input, pick), v, False if input.dtype.name == "bool" else 0])],
                {"dims": (-1,), "keepdim": False})
    if out.dtype != input.dtype:
        out = out.cast(input.dtype.name)
    rank = out.ndim
    d1, d2 = _axes((dim1, dim2), rank, "diag_embed")
    return movedim(out, (rank - 2, rank - 1), (d1, d2))


@torchsymbol(**_METHOD_AND_TOP)
def diag(input, diagonal=0):
    """A 1-D tensor as the ``diagonal``-th diagonal of a square matrix; a matrix's diagonal as a vector.

    >>> import graphc as gc
    >>> gc.diag(gc.tensor([[1, 2], [3, 4]]), 1).numpy().tolist()
    [2]
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal)
    raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got {input.ndim}-D")


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The ``n`` x ``m`` identity (float32 unless ``dtype``), as ``torch.eye``."""
    from .creation import _dtype, _place

    return _place(np.eye(int(n), int(n if m is None else m), dtype=_dtype(dtype)), device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` (float32 unless ``dtype``)."""
    from .creation import _dtype, _place

    if isinstance(start, Tensor) or isinstance(end, Tensor):  # 0-d tensors: traced values in a plan
        return _linspace_of_tensors(start, end, int(steps), dtype)
    values = _linspace(float(start), float(end), int(steps))
    return _place(values.astype(_dtype(dtype)), device, requires_grad)


def _linspace_of_tensors(start, end, steps, dtype):
    """linspace with 0-d tensor ends, as graph ops (PyTorch's two-sided formula, in float64)."""
    from .creation import _dtype

    want = DType.from_any(np.dtype(_dtype(dtype)))
    start, end = (x.reshape(()).cast(DType.float64) if isinstance(x, Tensor) else float(x) for x in (start, end))
    if steps == 1:
        return (start * np.ones(1) if isinstance(start, Tensor) else Tensor(np.array([start]))).cast(want)
    i = Tensor(np.arange(steps, dtype=np.float64))
    step = (end - start) / (steps - 1)
    values = apply("where", [Tensor(np.arange(steps) < steps // 2), start + step * i, end - step * (steps - 1 - i)])
    return values.cast(want)


def _linspace(start, end, steps):
    """PyTorch's formula: from the start for the first half, from the end for the second."""
    if steps == 1:
        return np.array([start])
    step = (end - start) / (steps - 1)
    i = np.arange(steps)
    return np.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``base ** linspace(start, end, steps)`` (float32 unless ``dtype``)."""
    from .creation import _dtype, _place

    if isinstance(start, Tensor) or isinstance(end, Tensor):
        exponents = _linspace_of_tensors(start, end, int(steps), DType.float64)
        return apply("pow", [float(base), exponents]).cast(DType.from_any(np.dtype(_dtype(dtype))))
    values = np.power(float(base), _linspace(float(start), float(end), int(steps)))
    return _place(values.astype(_dtype(dtype)), device, requires_grad)


def broadcast_shapes(*shapes) -> tuple:
    """The shape that tensors of these shapes broadcast to (ints count as 1-D shapes), as
    ``torch.broadcast_shapes``; shapes that do not broadcast are a ``ShapeError``.

    >>> import graphc as gc
    >>> gc.broadcast_shapes((2, 1), (3,), 1)
    (2, 3)
    """
    sizes = [(s,) if isinstance(s, int) else tuple(int(d) for d in s) for s in shapes]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*sizes))
    except ValueError:
        raise ShapeError(f"broadcast_shapes: shapes {sizes} do not broadcast") from None
