"""Creating tensors (``gc.tensor``, ``zeros``, ``randn`` ...) and free functions on them.

Every factory takes PyTorch's ``device=`` (``"cpu"``, ``"cuda:N"`` or a ``gc.device``), so
``torch.arange(T, device=x.device)`` in a model file works as written.
"""
from __future__ import annotations


import numpy as np

from ..core.dispatch import apply
from ..ir.errors import GraphcError
from ..ir.types import DType
from ..random import generator
from ..core.symint import SymInt, dims_attr, shape_args
from ..core.tensor import Tensor
from .surface import torchsymbol

_DEFAULT_FLOAT = np.float32


def _dtype(dtype, default=_DEFAULT_FLOAT):
    return DType.from_any(dtype).numpy if dtype is not None else np.dtype(default)


def _place(array: np.ndarray, device, requires_grad: bool = False) -> Tensor:
    """A Tensor holding ``array`` on ``device`` (None: the CPU, without copying); a leaf that
    records its gradient with ``requires_grad=True``."""
    if device is not None:
        from ..executor.backends import get_backend

        array = get_backend(str(device)).asarray(array)
    out = Tensor(array)
    return out.requires_grad_() if requires_grad else out


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """An eager tensor from array-like data (Python floats become float32, ints int64; numpy
    arrays keep their dtype, uint8 images included).

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0]).dtype
    <DType.float32: 'f32'>
    """
    if _holds_traced(data):  # torch.tensor(r - value.item()) inside a compiled step: a graph value
        return _from_traced(data, dtype)
    if isinstance(data, Tensor):
        array = data.numpy()
    else:
        array = np.array(data)
    if dtype is not None:
        array = array.astype(_dtype(dtype))
    elif array.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):  # np.float64(2.5) stays f64
        array = array.astype(_DEFAULT_FLOAT)
    elif array.dtype == np.complex128 and not isinstance(data, (np.ndarray, np.generic)):  # Python complex: complex64
        array = array.astype(np.complex64)
    DType.from_any(array.dtype)  # refuse dtypes graphc has no kernels for
    return _place(np.ascontiguousarray(array) if array.ndim else array, device, requires_grad)


def _holds_traced(data) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_holds_traced(d) for d in data)
    return hasattr(data, "weak_for")


def _from_traced(data, dtype):
    """Nested lists of numbers, some traced, as one traced tensor: float32 where any number is
    a float, else int64 (as ``torch.tensor`` types Python numbers), or ``dtype``."""
    def build(d):
        if isinstance(d, (list, tuple)):
            return stack([build(x) for x in d])
        if hasattr(d, "weak_for"):
            return d.tensor
        return Tensor(np.asarray(d, np.float64 if isinstance(d, float) else np.int64))
    out = build(data)
    want = _dtype(dtype) if dtype is not None else _DEFAULT_FLOAT if out.dtype.is_float else np.int64
    return out.cast(DType.from_any(want))


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor``, but shares a numpy array's memory when no conversion is needed.

    >>> import numpy as np, graphc as gc
    >>> a = np.zeros(2, np.float32)
    >>> gc.as_tensor(a).numpy() is a
    True
    """
    same_dtype = dtype is None or isinstance(data, np.ndarray) and DType.from_any(dtype).numpy == data.dtype
    if isinstance(data, np.ndarray) and same_dtype and device in (None, "cpu") and data.flags.c_contiguous:
        return from_numpy(data)
    return tensor(data, dtype, device)


def from_numpy(array: np.ndarray) -> Tensor:
    """Wrap a numpy array without copying (its dtype is kept).

    >>> import numpy as np, graphc as gc
    >>> gc.from_numpy(np.zeros((2, 2), np.uint8)).dtype
    <DType.uint8: 'u8'>
    """
    if not isinstance(array, np.ndarray):
        raise GraphcError(f"from_numpy expects a numpy array, got {type(array).__name__}")
    DType.from_any(array.dtype)
    return Tensor(array)


def _symbolic_fill(dims, value, dtype):
    """A ``full`` node for a shape holding a traced dim (``gc.zeros(x.shape[0], 5)`` in a trace):
    the size follows the batch instead of being baked in."""
    return apply("full", [], {"shape": dims_attr(dims), "value": float(value),
                              "dtype": DType.from_any(np.dtype(_dtype(dtype))).name})


def zeros(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    dims = shape_args(shape)
    if any(isinstance(d, SymInt) for d in dims):
        return _symbolic_fill(dims, 0.0, dtype)
    return _place(np.zeros(dims, dtype=_dtype(dtype)), device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    dims = shape_args(shape)
    if any(isinstance(d, SymInt) for d in dims):
        return _symbolic_fill(dims, 1.0, dtype)
    return _place(np.ones(dims, dtype=_dtype(dtype)), device, requires_grad)


def empty(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Like ``zeros`` (graphc never hands out uninitialised memory)."""
    return zeros(*shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full(shape, value, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``shape`` filled with ``value``; the dtype follows the value as in PyTorch (bool, int64, float32).

    >>> import graphc as gc
    >>> gc.full((2,), 3).dtype, gc.full((2,), 0.5).dtype
    (<DType.int64: 'i64'>, <DType.float32: 'f32'>)
    """
    if hasattr(value, "weak_for"):  # a traced Python number (.item(), a number input): a graph value
        filled = _from_traced(value, dtype)
        return apply("broadcast_to", [filled], {"shape": dims_attr(shape_args(shape))})
    if dtype is None:
        dtype = DType.bool if isinstance(value, bool) else DType.int64 if isinstance(value, int) else None
    if any(isinstance(d, SymInt) for d in shape_args(shape)):
        return _symbolic_fill(shape_args(shape), value, dtype)
    return _place(np.full(tuple(shape_args(shape)), value, dtype=_dtype(dtype)), device, requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform [0, 1) samples from graphc's seeded generator; a size read from a traced tensor
    (``x.size(0)``) makes a ``random`` node, drawing anew every time the plan runs."""
    return _draw(shape_args(shape), "uniform", dtype, device, requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples from graphc's seeded generator (traced sizes: as ``rand``)."""
    return _draw(shape_args(shape), "normal", dtype, device, requires_grad)


def rand_like(t: Tensor, dtype=None, device=None) -> Tensor:
    """``rand`` of ``t``'s shape and dtype; of a traced tensor, fresh draws every run.

    >>> import graphc as gc
    >>> gc.rand_like(gc.zeros(2, 3)).shape
    (2, 3)
    """
    return _draw_like(t, "uniform", dtype, device)


def randn_like(t: Tensor, dtype=None, device=None) -> Tensor:
    """``randn`` of ``t``'s shape and dtype (the reparameterization trick's ``eps``)."""
    return _draw_like(t, "normal", dtype, device)


def _draw(shape: list, distribution: str, dtype, device, requires_grad) -> Tensor:
    tracer = next((d.tracer for d in shape if isinstance(d, SymInt) and d.tracer is not None), None)
    if tracer is not None:  # traced: a node of the plan, not numbers frozen at trace time
        dims = [d.sym if isinstance(d, SymInt) else int(d) for d in shape]
        return tracer.draw(dims, distribution, DType.from_any(dtype) if dtype else DType.float32)
    draw = generator().standard_normal if distribution == "normal" else generator().random
    want = _dtype(dtype)
    if want.kind == "c":  # PyTorch's complex draws: real and imaginary parts each, normal ones of variance 1/2
        scale = np.sqrt(0.5) if distribution == "normal" else 1.0
        return _place(((draw(shape) + 1j * draw(shape)) * scale).astype(want), device, requires_grad)
    return _place(draw(shape).astype(want), device, requires_grad)


def _draw_like(t: Tensor, distribution: str, dtype, device) -> Tensor:
    dtype = DType.from_any(dtype) if dtype is not None else t.dtype
    if t._tracer is not None:
        return t._tracer.draw(list(t._value.type.shape), distribution, dtype)
    return _draw(list(t.shape), distribution, dtype, device, False)


def zeros_like(t: Tensor, dtype=None, device=None) -> Tensor:
    """Zeros of ``t``'s shape; while tracing, a ``full`` node keeping a symbolic batch dim.

    >>> import graphc as gc
    >>> gc.zeros_like(gc.ones(2, 3)).shape
    (2, 3)
    """
    return _filled_like(t, 0.0, dtype, device)


def ones_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return _filled_like(t, 1.0, dtype, device)


@torchsymbol(top=False, functional=False)
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Zeros of ``size`` with this tensor's dtype unless given (``weight.new_zeros(layers,
    batch, hidden)``, the idiom for initial recurrent states).

    >>> import graphc as gc
    >>> gc.ones(2, dtype=gc.float64).new_zeros(3, 4).dtype
    <DType.float64: 'f64'>
    """
    return zeros(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


@torchsymbol(top=False, functional=False)
def new_ones(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Ones of ``size`` with this tensor's dtype unless given."""
    return ones(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


@torchsymbol(top=False, functional=False)
def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``size`` filled with ``fill_value``, with this tensor's dtype unless given."""
    return full(size, fill_value, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


@torchsymbol(top=False, functional=False)
def new_tensor(self, data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding ``data`` (copied), with this tensor's dtype unless given, as
    PyTorch's ``Tensor.new_tensor``.

    >>> import graphc as gc
    >>> gc.ones(2, dtype=gc.float64).new_tensor([1, 2]).dtype
    <DType.float64: 'f64'>
    """
    data = data.numpy() if isinstance(data, Tensor) and data._tracer is None else data
    return tensor(np.array(data, copy=True), dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


def _filled_like(t: Tensor, value: float, dtype, device) -> Tensor:
    dtype = dtype if dtype is not None else t.dtype
    if t._tracer is not None:  # not a constant of the example's shape: the plan runs at any batch size
        return t._tracer.record("full", [], {"shape": list(t._value.type.shape), "value": value,
                                             "dtype": DType.from_any(dtype).name})
    return full(t.shape, value, dtype=dtype, device=device)


def arange(start, stop=None, step=1, dtype=None, device=None) -> Tensor:
    """Like ``torch.arange``: ints give int64, floats float32.

    >>> import graphc as gc
    >>> gc.arange(3).numpy().tolist(), gc.arange(0, 1, 0.5).dtype
    ([0, 1, 2], <DType.float32: 'f32'>)
    """
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is None:
        dtype = DType.int64 if values.dtype.kind in "iu" else DType.float32
    return _place(values.astype(_dtype(dtype)), device)


def stack(tensors, dim: int = 0) -> Tensor:
    tensors = list(tensors)
    return cat([t.unsqueeze(dim) for t in tensors], dim=dim)


def cat(tensors, dim: int = 0) -> Tensor:
    """Tensors joined along ``dim``. Joined along a traced symbolic dim (the batch: the
    forward-forward loss's ``cat([g_pos, g_neg])``), the result's size is a sum of symbols,
    which a plan's shapes cannot hold: the dim is pinned to its example size and the step
    traced again, so the plan runs at that size (as when ``x.size(0)`` is used as a number).

    >>> import graphc as gc
    >>> gc.cat([gc.zeros(2, 3), gc.ones(1, 3)]).shape
    (3, 3)
    """
    tensors = list(tensors)
    for t in tensors:
        if t._tracer is not None and t.ndim and not isinstance(t.dims[dim % t.ndim], int):
            t._tracer.fix_size(t.dims[dim % t.ndim])
    return apply("concat", tensors, {"dim": dim})


concat = cat
