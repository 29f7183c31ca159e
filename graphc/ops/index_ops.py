"""Index-vector ops along one dim and flat-index ops, composites over ``gather``/``scatter``
(graphc/ops/scatter_ops.py): ``index_select``, ``index_add``, ``index_copy``, ``index_fill``,
``index_reduce``, ``take``, ``take_along_dim``, ``put``, ``masked_scatter``.

A 1-D index of length k along ``dim`` becomes gather/scatter's index by a reshape to
``[1, .., k, .., 1]`` and an ``expand`` to the operand's shape (symbolic dims kept), so these
compile, and their gradients are gather's and scatter's.
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from .scatter_ops import (_as_1d, _axis, _expand_along, _long_index, _written, gather, scatter, scatter_add,
                          scatter_reduce)
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _vector(index, what):
    index = _long_index(index, what)
    if index.ndim > 1:
        raise ShapeError(f"{what}: index must be 0-d or 1-d, got {index.ndim}-d")
    return _as_1d(index)


@torchsymbol(**_METHOD_AND_TOP)
def index_select(input, dim, index):
    """The slices of ``input`` along ``dim`` at the 1-D ``index``, in its order (repeats
    allowed; their gradients add up).

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 2.0], [3.0, 4.0]]).index_select(0, gc.tensor([1, 1, 0])).numpy().tolist()
    [[3.0, 4.0], [3.0, 4.0], [1.0, 2.0]]
    """
    index = _vector(index, "index_select")
    if input.ndim == 0:  # PyTorch takes a one-element index (its length may be a traced symbol)
        return _scalar(gather(input.reshape(1), 0, index))
    axis = _axis(dim, input.ndim, "index_select")
    return gather(input, axis, _expand_along(index, axis, input.shape))


def _source_index(input, dim, index, source, what):
    """(input as at least 1-D, axis, gather/scatter index shaped like the source, the source)."""
    index = _vector(index, what)
    if input.ndim == 0 and source.ndim <= 1:  # a one-element index: source matches its (maybe traced) length
        return input.reshape(1), 0, index, source.reshape(1).expand(index.shape)
    axis = _axis(dim, input.ndim, what)
    if source.ndim != input.ndim:
        raise ShapeError(f"{what}: source must have the input's rank ({input.ndim}), got {source.ndim}")
    return input, axis, _expand_along(index, axis, source.shape), source


def _scalar(t):
    """A one-element 1-D tensor as 0-d (a traced length that must be 1 is summed away)."""
    return t.reshape(()) if isinstance(t.dims[0], int) else t.sum()


def _like_input(input, out):
    return out.reshape(()) if input.ndim == 0 else out


@torchsymbol(**_METHOD_AND_TOP)
def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the slices ``index`` along ``dim``.

    >>> import graphc as gc
    >>> gc.zeros(3, 2).index_add(0, gc.tensor([2, 0, 2]), gc.ones(3, 2)).numpy().tolist()
    [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
    """
    x, axis, idx, src = _source_index(input, dim, index, source, "index_add")
    return _like_input(input, scatter_add(x, axis, idx, src if alpha == 1 else src * alpha))


@torchsymbol(**_METHOD_AND_TOP)
def index_copy(input, dim, index, source):
    """``input`` with the slices ``index`` along ``dim`` replaced by ``source``'s.

    >>> import graphc as gc
    >>> gc.zeros(3).index_copy(0, gc.tensor([2, 0]), gc.tensor([5.0, 6.0])).numpy().tolist()
    [6.0, 0.0, 5.0]
    """
    x, axis, idx, src = _source_index(input, dim, index, source, "index_copy")
    return _like_input(input, scatter(x, axis, idx, src))


@torchsymbol(**_METHOD_AND_TOP)
def index_fill(input, dim, index, value):
    """``input`` with the slices ``index`` along ``dim`` set to ``value`` (a number or a 0-d
    tensor, which then gets the gradient of what it filled).

    >>> import graphc as gc
    >>> gc.zeros(2, 3).index_fill(1, gc.tensor([0, 2]), -1.0).numpy().tolist()
    [[-1.0, 0.0, -1.0], [-1.0, 0.0, -1.0]]
    """
    def run(x):
        idx = _vector(index, "index_fill")
        axis = _axis(dim, x.ndim, "index_fill")
        full_idx = _expand_along(idx, axis, x.shape) if input.ndim else idx
        if not isinstance(value, Tensor):
            src = apply("full", [], {"shape": list(full_idx.dims), "value": float(value), "dtype": x.dtype.name})
            return scatter(x, axis, full_idx, src)
        if value.ndim:
            raise ShapeError(f"index_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
        # a mask, so a repeated index sends value each filled position's gradient once
        return apply("where", [_written(x, axis, full_idx), value.cast(x.dtype), x])
    return run(input) if input.ndim else run(input.reshape(1)).reshape(())


@torchsymbol(**_METHOD_AND_TOP)
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """``input`` with ``source``'s slices combined at the slices ``index`` along ``dim`` by
    ``reduce`` (``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``), as ``scatter_reduce``.

    >>> import graphc as gc
    >>> gc.ones(2).index_reduce(0, gc.tensor([0, 0]), gc.tensor([2.0, 3.0]), "prod").numpy().tolist()
    [6.0, 1.0]
    """
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ShapeError(f"index_reduce: reduce must be one of prod, mean, amax, amin, got {reduce!r}")

    x, axis, idx, src = _source_index(input, dim, index, source, "index_reduce")
    return _like_input(input, scatter_reduce(x, axis, idx, src, reduce, include_self=include_self))


@torchsymbol(**_METHOD_AND_TOP)
def take(input, index):
    """``input`` read as a flat (row-major) vector at ``index``; the result has ``index``'s shape.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 2.0], [3.0, 4.0]]).take(gc.tensor([[3, 0]])).numpy().tolist()
    [[4.0, 1.0]]
    """
    index = _long_index(index, "take")
    return gather(input.reshape(-1), 0, index.reshape(-1)).reshape(index.shape)


@torchsymbol(**_METHOD_AND_TOP)
def take_along_dim(input, indices, dim=None):
    """``gather`` with ``input`` and ``indices`` broadcast against each other outside ``dim``
    (numpy's ``take_along_axis``); ``dim=None`` reads the flattened input.

    >>> import graphc as gc
    >>> x = gc.tensor([[10.0, 30.0, 20.0]])
    >>> gc.take_along_dim(x, x.argsort(dim=1), dim=1).numpy().tolist()
    [[10.0, 20.0, 30.0]]
    """
    indices = _long_index(indices, "take_along_dim")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim: input and indices must have the same rank, got {input.ndim} and "
                         f"{indices.ndim}")
    axis = _axis(dim, input.ndim, "take_along_dim")
    shape_x, shape_i = list(input.shape), list(indices.shape)
    for d in range(input.ndim):
        if d != axis:
            big = shape_i[d] if _is_one(shape_x[d]) else shape_x[d]
            shape_x[d] = shape_i[d] = big
    return gather(input.expand(shape_x), axis, indices.expand(shape_i))


def _is_one(size):
    return isinstance(size, int) and size == 1


@torchsymbol(**_METHOD_AND_TOP)
def put(input, index, source, accumulate=False):
    """``input`` (read as a flat vector) with ``source`` written (added, with ``accumulate``)
    at ``index``.

    >>> import graphc as gc
    >>> gc.zeros(2, 2).put(gc.tensor([3, 0]), gc.tensor([5.0, 6.0])).numpy().tolist()
    [[6.0, 0.0], [0.0, 5.0]]
    """
    index = _long_index(index, "put").reshape(-1)
    flat = input.reshape(-1)
    src = source.reshape(-1)
    out = scatter_add(flat, 0, index, src) if accumulate else scatter(flat, 0, index, src)
    return out.reshape(input.shape)


@torchsymbol(**_METHOD_AND_TOP)
def masked_scatter(input, mask, source):
    """``input`` with the positions where ``mask`` (broadcast to it) is True filled, in
    row-major order, by ``source``'s leading elements.

    >>> import graphc as gc
    >>> gc.zeros(4).masked_scatter(gc.tensor([True, False, True, False]), gc.tensor([1.0, 2.0])).numpy().tolist()
    [1.0, 0.0, 2.0, 0.0]
    """
    if mask.dtype.name != "bool":
        raise ShapeError(f"masked_scatter: mask must be bool, got {mask.dtype.name}")
    target_shape = input.shape
    m = mask.expand(*_broadcast_shape(mask.shape, target_shape)) if tuple(mask.shape) != tuple(target_shape) else mask
    if tuple(m.shape) != tuple(target_shape):
        input = input.expand(*m.shape)
    flat_m = m.reshape(-1)
    # each True's rank among the Trues: the inverse of the stable sort putting Trues first (no
    # running sum, which would need a static length)
    trues_first = apply("argsort", [flat_m], {"dim": 0, "descending": True})
    slot = apply("argsort", [trues_first], {"dim": 0, "descending": False})
    slot = apply("where", [flat_m, slot, 0])
    values = gather(source.reshape(-1), 0, slot).reshape(m.shape)
    return apply("where", [m, values, input])


def _broadcast_shape(a, b):
    a, b = list(a), list(b)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    return [y if _is_one(x) else x for x, y in zip(a, b)]


def _aten_index(indices):
    """ATen's index list (``None`` for a dim taken whole) as a Python index tuple."""
    return tuple(slice(None) if i is None else i for i in indices)


@torchsymbol(**_METHOD_AND_TOP)
def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` written (added with ``accumulate``) at ``input[indices]``
    (a tuple of index tensors, ``None`` taking a dim whole), as a new tensor.

    >>> import graphc as gc
    >>> gc.zeros(3).index_put((gc.tensor([0, 2]),), gc.tensor(1.0)).numpy().tolist()
    [1.0, 0.0, 1.0]
    """
    from ..core.indexing import index_put as put_at

    return put_at(input, _aten_index(indices), values, accumulate)


@torchsymbol(method=True, top=False, functional=False)
def index_put_(input, indices, values, accumulate=False):
    """In-place ``index_put``; returns the tensor.

    >>> import graphc as gc
    >>> x = gc.zeros(3)
    >>> x.index_put_((gc.tensor([1]),), gc.tensor(2.0), accumulate=True).numpy().tolist()
    [0.0, 2.0, 0.0]
    """
    from ..core.inplace import put_in_place

    return put_in_place(input, _aten_index(indices), values, accumulate, "index_put_")


# ---- in-place forms (PyTorch's Tensor.x_): the out-of-place result written into the tensor ----
def _in_place(name, fn):
    from ..core.inplace import _arithmetic  # the knot's in-place machinery (eager write / traced rebind)

    return _arithmetic(name, fn)


scatter_ = _in_place("scatter", lambda x, dim, index, src=None, value=None, *, reduce=None:
                     scatter(x, dim, index, src, value, reduce=reduce))
scatter_add_ = _in_place("scatter_add", lambda x, dim, index, src: scatter_add(x, dim, index, src))
scatter_reduce_ = _in_place("scatter_reduce", lambda x, dim, index, src, reduce, *, include_self=True:
                            scatter_reduce(x, dim, index, src, reduce, include_self=include_self))
index_add_ = _in_place("index_add", lambda x, dim, index, source, *, alpha=1: index_add(x, dim, index, source,
                                                                                          alpha=alpha))
index_copy_ = _in_place("index_copy", lambda x, dim, index, source: index_copy(x, dim, index, source))
index_fill_ = _in_place("index_fill", lambda x, dim, index, value: index_fill(x, dim, index, value))
index_reduce_ = _in_place("index_reduce", lambda x, dim, index, source, reduce, *, include_self=True:
                          index_reduce(x, dim, index, source, reduce, include_self=include_self))
put_ = _in_place("put", lambda x, index, source, accumulate=False: put(x, index, source, accumulate))
masked_scatter_ = _in_place("masked_scatter", lambda x, mask, source: masked_scatter(x, mask, source))
