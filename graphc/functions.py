"""Tensor functions declared once for ``Tensor.x``, ``gc.x`` and ``F.x`` (graphc.surface).

Primitives call ``apply`` with a registry op; composites are written in other tensor
functions, so their gradient comes from autodiff with no rule of their own.
"""
from __future__ import annotations

from .dispatch import apply
from .surface import torchsymbol


def _unary(op: str, doc: str):
    def fn(input):
        return apply(op, [input])
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return torchsymbol()(fn)


exp = _unary("exp", "Elementwise e**x.")
log = _unary("log", "Elementwise natural logarithm.")
log1p = _unary("log1p", "Elementwise log(1 + x), accurate for small x.")
sqrt = _unary("sqrt", "Elementwise square root.")
rsqrt = _unary("rsqrt", "Elementwise 1 / sqrt(x).")
tanh = _unary("tanh", "Elementwise hyperbolic tangent.")
sigmoid = _unary("sigmoid", "Elementwise 1 / (1 + exp(-x)), stable for both signs.")
abs = _unary("abs", "Elementwise absolute value.")  # noqa: A001 - PyTorch's name
sign = _unary("sign", "Elementwise sign (-1, 0 or 1).")
neg = _unary("neg", "Elementwise negation.")
logical_not = _unary("logical_not", "Elementwise not of a bool tensor.")


@torchsymbol()
def relu(input, inplace=False):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility; graphc never mutates."""
    return apply("relu", [input])


def _binary(op: str, doc: str, names=()):
    def fn(input, other):
        return apply(op, [input, other])
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return torchsymbol(names=names)(fn)


maximum = _binary("maximum", "Elementwise maximum (the gradient splits evenly at ties, as PyTorch).")
minimum = _binary("minimum", "Elementwise minimum (the gradient splits evenly at ties, as PyTorch).")
matmul = _binary("matmul", "Matrix product with numpy's batching rules.")
pow = _binary("pow", "Elementwise power.")  # noqa: A001 - PyTorch's name
eq = _binary("eq", "Elementwise ==, as a bool tensor.")
ne = _binary("ne", "Elementwise !=, as a bool tensor.")
lt = _binary("lt", "Elementwise <, as a bool tensor.", names=("less",))
le = _binary("le", "Elementwise <=, as a bool tensor.", names=("less_equal",))
gt = _binary("gt", "Elementwise >, as a bool tensor.", names=("greater",))
ge = _binary("ge", "Elementwise >=, as a bool tensor.", names=("greater_equal",))


@torchsymbol()
def square(input):
    """x * x."""
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
