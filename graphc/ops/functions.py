"""Tensor functions declared once for ``Tensor.x``, ``gc.x`` and ``F.x`` (graphc.ops.surface).

Primitives call ``apply`` with a registry op; composites are written in other tensor
functions, so their gradient comes from autodiff with no rule of their own.
"""
from __future__ import annotations

import builtins

from ..core.dispatch import apply
from .surface import torchsymbol


def _primitive(op: str, doc: str, binary: bool = False, names=()):
    """Declare ``op(input)`` or ``op(input, other)`` as a tensor function named like the op."""
    def unary(input):
        return apply(op, [input])

    def two(input, other):
        return apply(op, [input, other])
    fn = two if binary else unary
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return torchsymbol(names=names)(fn)


def _unary(op: str, doc: str):
    return _primitive(op, doc)


exp = _unary("exp", "Elementwise e**x.")
log = _unary("log", "Elementwise natural logarithm.")
log1p = _unary("log1p", "Elementwise log(1 + x), accurate for small x.")
sqrt = _unary("sqrt", "Elementwise square root.")
rsqrt = _unary("rsqrt", "Elementwise 1 / sqrt(x).")
tanh = _unary("tanh", "Elementwise hyperbolic tangent.")
sin = _unary("sin", "Elementwise sine (radians).")
cos = _unary("cos", "Elementwise cosine (radians).")
sigmoid = _unary("sigmoid", "Elementwise 1 / (1 + exp(-x)), stable for both signs.")


@torchsymbol()
def abs(input):  # noqa: A001 - PyTorch's name
    """Elementwise absolute value; of a complex tensor, the magnitude in its real dtype.

    >>> import graphc as gc
    >>> gc.abs(gc.tensor([-1.5, 2.0])).numpy().tolist(), gc.abs(gc.tensor([3 + 4j])).numpy().tolist()
    ([1.5, 2.0], [5.0])
    """
    return apply("complex_abs" if input.dtype.is_complex else "abs", [input])


sign = _unary("sign", "Elementwise sign (-1, 0 or 1).")
floor = _unary("floor", "Elementwise round down (integers unchanged).")
ceil = _unary("ceil", "Elementwise round up (integers unchanged).")


def round_(input, *, decimals=0):
    """Elementwise round to the nearest integer, halves to even (``gc.round``); ``decimals``
    rounds to that many decimal places (negative: tens, hundreds...) as PyTorch's kernel,
    ``round(x * 10**d) / 10**d`` (``round(x / 10**-d) * 10**-d`` for d < 0).

    >>> import graphc as gc
    >>> gc.round(gc.tensor([1.2345, 1250.0]), decimals=-2).numpy().tolist()
    [0.0, 1200.0]
    """
    if decimals == 0:
        return apply("round", [input])
    if not input.dtype.is_float:
        raise ShapeError(f"round with decimals takes floating-point tensors (as PyTorch), got {input.dtype.name}")
    scale = float(10 ** builtins.abs(int(decimals)))  # abs is the tensor function here
    if decimals > 0:
        return apply("div", [apply("round", [apply("mul", [input, scale])]), scale])
    return apply("mul", [apply("round", [apply("div", [input, scale])]), scale])


round_.__name__ = round_.__qualname__ = "round"
round_ = torchsymbol()(round_)
trunc = _unary("trunc", "Elementwise round toward zero (integers unchanged).")


@torchsymbol()
def frac(input):
    """The fractional part, ``x - trunc(x)`` (a composite: its gradient, 1, comes from autodiff).

    >>> import graphc as gc
    >>> gc.tensor([1.25, -1.25]).frac().numpy().tolist()
    [0.25, -0.25]
    """
    if not input.dtype.is_float:
        raise ShapeError(f"frac takes floating-point tensors (as PyTorch), got {input.dtype.name}")
    return input - trunc(input)
neg = _unary("neg", "Elementwise negation.")
logical_not = _unary("logical_not", "Elementwise not of a bool tensor.")


@torchsymbol()
def relu(input, inplace=False):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility; graphc never mutates."""
    return apply("relu", [input])


def _binary(op: str, doc: str, names=()):
    return _primitive(op, doc, binary=True, names=names)


maximum = _binary("maximum", "Elementwise maximum (the gradient splits evenly at ties, as PyTorch).")
minimum = _binary("minimum", "Elementwise minimum (the gradient splits evenly at ties, as PyTorch).")
matmul = _binary("matmul", "Matrix product with numpy's batching rules.")
eq = _binary("eq", "Elementwise ==, as a bool tensor.")
ne = _binary("ne", "Elementwise !=, as a bool tensor.")
lt = _binary("lt", "Elementwise <, as a bool tensor.", names=("less",))
le = _binary("le", "Elementwise <=, as a bool tensor.", names=("less_equal",))
gt = _binary("gt", "Elementwise >, as a bool tensor.", names=("greater",))
ge = _binary("ge", "Elementwise >=, as a bool tensor.", names=("greater_equal",))


@torchsymbol(functional=False)
def mm(input, mat2):
    """The matrix product of two 2-d tensors (``torch.mm``; ``matmul`` broadcasts, this does not).

    >>> import graphc as gc
    >>> gc.ones(2, 3).mm(gc.ones(3, 4)).shape
    (2, 4)
    """
    if input.ndim != 2 or mat2.ndim != 2:
        from ..ir.errors import ShapeError

        raise ShapeError(f"mm takes two 2-d tensors, got {input.ndim}-d and {mat2.ndim}-d (use matmul to broadcast)")
    return matmul(input, mat2)


@torchsymbol(functional=False)
def bmm(input, mat2):
    """Batched matrix product of two 3-d tensors, ``(b, n, m) @ (b, m, p) -> (b, n, p)``
    (``torch.bmm``: no broadcasting of the batch dim).

    >>> import graphc as gc
    >>> gc.bmm(gc.ones(2, 1, 3), gc.ones(2, 3, 4)).shape
    (2, 1, 4)
    """
    if input.ndim != 3 or mat2.ndim != 3:
        raise ShapeError(f"bmm takes two 3-d tensors, got {input.ndim}-d and {mat2.ndim}-d (use matmul to broadcast)")
    if input.shape[0] != mat2.shape[0] and all(isinstance(t.shape[0], int) for t in (input, mat2)):
        raise ShapeError(f"bmm: batch sizes differ, {input.shape[0]} and {mat2.shape[0]}")
    return matmul(input, mat2)


@torchsymbol(functional=False)
def add(input, other, *, alpha=1):
    """``input + alpha * other``.

    >>> import graphc as gc
    >>> gc.add(gc.tensor([1, 2]), gc.tensor([10, 20]), alpha=2).numpy().tolist()
    [21, 42]
    """
    return apply("add", [input, other if alpha == 1 else apply("mul", [other, alpha])])


@torchsymbol(functional=False, names=("subtract",))
def sub(input, other, *, alpha=1):
    """``input - alpha * other``.

    >>> import graphc as gc
    >>> gc.sub(gc.tensor([5, 5]), gc.tensor([1, 2]), alpha=2).numpy().tolist()
    [3, 1]
    """
    return apply("sub", [input, other if alpha == 1 else apply("mul", [other, alpha])])


@torchsymbol(functional=False, names=("multiply",))
def mul(input, other):
    """Elementwise product (an int tensor times a float scalar gives float32, as in PyTorch).

    >>> import graphc as gc
    >>> gc.mul(gc.tensor([1, 2]), 0.5).numpy().tolist()
    [0.5, 1.0]
    """
    return apply("mul", [input, other])


@torchsymbol(functional=False, names=("divide",))
def div(input, other, *, rounding_mode=None):
    """Division as PyTorch's: true division by default (ints give float32); ``rounding_mode``
    ``'trunc'`` rounds toward zero and ``'floor'`` down, keeping integer dtypes. Integer
    division by zero raises a GraphcError, as PyTorch's ZeroDivisionError.

    >>> import graphc as gc
    >>> a, b = gc.tensor([7, -7]), gc.tensor([2, 2])
    >>> gc.div(a, b).numpy().tolist(), gc.div(a, b, rounding_mode="trunc").numpy().tolist()
    ([3.5, -3.5], [3, -3])
    >>> gc.div(a, b, rounding_mode="floor").numpy().tolist()
    [3, -4]
    """
    return apply("div", [input, other], {"rounding_mode": rounding_mode})


@torchsymbol(functional=False)
def true_divide(input, other):
    """``div(input, other)`` with no rounding.

    >>> import graphc as gc
    >>> gc.true_divide(gc.tensor([1, 3]), 2).numpy().tolist()
    [0.5, 1.5]
    """
    return apply("div", [input, other])


@torchsymbol(functional=False)
def floor_divide(input, other):
    """``div(input, other, rounding_mode='floor')`` (Python's ``//``).

    >>> import graphc as gc
    >>> gc.floor_divide(gc.tensor([7, -7]), 2).numpy().tolist()
    [3, -4]
    """
    return apply("div", [input, other], {"rounding_mode": "floor"})


@torchsymbol()
def pow(input, exponent):  # noqa: A001 - PyTorch's name
    """Elementwise power. Integer tensors stay integers, as in PyTorch: a negative exponent
    tensor gives 0 (1 or -1 for a base of 1 or -1), while a negative Python int exponent is
    refused, as PyTorch refuses it.

    >>> import graphc as gc
    >>> gc.pow(gc.tensor([2, 3]), 2).numpy().tolist(), gc.pow(gc.tensor([2, 1]), gc.tensor([-1, -1])).numpy().tolist()
    ([4, 9], [0, 1])
    """
    if (isinstance(exponent, int) and not isinstance(exponent, bool) and exponent < 0
            and isinstance(input, Tensor) and not input.dtype.is_float):
        raise GraphcError(f"pow: integers to negative integer powers are not allowed ({input.dtype.name} tensor, "
                          f"exponent {exponent}), as in PyTorch; use a float: x.float() ** {exponent}")
    return apply("pow", [input, exponent])


@torchsymbol()
def square(input):
    """x * x. PyTorch's square is ``x ** 2``, so a bool tensor gives int64.

    >>> import graphc as gc
    >>> gc.square(gc.tensor([True, False])).numpy().tolist()
    [1, 0]
    """
    if input.dtype.name == "bool":
        input = input.long()
    return apply("mul", [input, input])


@torchsymbol(names=("clip",))
def clamp(input, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """Limit to [min, max]. ``where``, not maximum/minimum: those split the gradient 0.5/0.5 at
    ties, while PyTorch's clamp passes it whole on the closed interval. NaN stays NaN.

    >>> import graphc as gc
    >>> gc.clamp(gc.tensor([-2.0, 0.5, 3.0]), -1.0, 1.0).numpy().tolist()
    [-1.0, 0.5, 1.0]
    """
    out = input
    if min is not None:
        out = apply("where", [apply("lt", [out, min]), min, out])
    if max is not None:
        out = apply("where", [apply("gt", [out, max]), max, out])
    return out


@torchsymbol(method=False)
def where(condition, input, other):
    """``condition ? input : other`` elementwise, with broadcasting."""
    return apply("where", [condition, input, other])


@torchsymbol()
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim..end_dim`` into one (``gc.flatten(x, 1)`` keeps the batch dim).

    >>> import graphc as gc
    >>> gc.flatten(gc.zeros(2, 3, 4), 1).shape
    (2, 12)
    """
    return apply("flatten", [input], {"start_dim": start_dim, "end_dim": end_dim})


# ---- masks and triangles (composites of ``where``) -------------------------------------------------
import numpy as np  # noqa: E402  (this section's imports, kept with it: later sections append below)

from ..executor.backends import backend_of  # noqa: E402
from ..ir.errors import GraphcError, ShapeError, TraceError  # noqa: E402
from ..ir.types import is_static  # noqa: E402
from ..core.tensor import Tensor  # noqa: E402


@torchsymbol(functional=False)
def masked_fill(input, mask, value):
    """``value`` where ``mask`` (a bool tensor broadcastable to ``input``) is True, else
    ``input``: ``where(mask, value, input)``, so no gradient reaches the filled elements. The
    value takes ``input``'s dtype, as in PyTorch.

    >>> import graphc as gc
    >>> x = gc.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> x.masked_fill(gc.tril(gc.ones(2, 2)) == 0, float("-inf")).numpy().tolist()
    [[1.0, -inf], [3.0, 4.0]]
    """
    if not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise GraphcError(f"masked_fill: mask must be a bool tensor, got {got} (compare first: mask == 0)")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
        value = value.cast(input.dtype)
    elif input.dtype.name == "bool":
        value = bool(value)
    elif not input.dtype.is_float:
        value = int(value)  # a Python int stays in the tensor's integer dtype
    out = apply("where", [mask, value, input])
    if out.dims != input.dims:
        raise ShapeError(f"masked_fill: mask of shape {mask.dims} does not broadcast to the input's {input.dims}")
    return out


def _triangle(input, diagonal: int, lower: bool, what: str):
    """``where(mask, input, 0)`` with a constant mask over the last two dims."""
    if input.ndim < 2:
        raise ShapeError(f"{what} needs at least 2 dims, got shape {input.dims}")
    rows, cols = input.dims[-2:]
    if not (is_static(rows) and is_static(cols)):
        raise TraceError(f"{what} over the batch dim of a traced tensor ({input.dims}): the mask would depend on "
                         "the batch size; put the matrix dims last", input._tracer.user_location())
    keep = np.tri(rows, cols, int(diagonal), dtype=bool)
    if not lower:
        keep = ~np.tri(rows, cols, int(diagonal) - 1, dtype=bool)
    if input._tracer is None:
        keep = backend_of(input.array).asarray(keep)  # on the input's device
    zero = False if input.dtype.name == "bool" else 0
    return apply("where", [Tensor(keep), input, zero])


@torchsymbol(functional=False)
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (``j - i <= diagonal``), zeros above. On a
    constant (``gc.ones(T, T).tril()``) it runs at once, also inside a traced model; on a
    traced tensor it records ``where`` with a constant mask.

    >>> import graphc as gc
    >>> gc.ones(3, 3).tril().numpy().astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    return _triangle(input, diagonal, True, "tril")


@torchsymbol(functional=False)
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (``j - i >= diagonal``), zeros below.

    >>> import graphc as gc
    >>> gc.ones(2, 3).triu(1).numpy().astype(int).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    return _triangle(input, diagonal, False, "triu")
