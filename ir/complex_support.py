"""Which ops take complex values, and which of their gradient rules hold for them.

graphc's complex dtypes (complex64, complex128) arrived after most ops were written: their
shape rules, kernels and vjp rules assume real numbers (``abs`` of a complex tensor would keep
the complex dtype, ``mul``'s vjp ``g * y`` lacks the conjugate). Rather than let those run
silently wrong, an op takes a complex input only when it is listed here or its OpDef says
``complex_vjp`` (the Fourier transforms and the complex parts, ir/ops/fft.py); gradients flow
through a complex value only across ops whose vjp is exact for PyTorch's complex convention
(the cotangent of ``z`` is ``dL/dRe z + i dL/dIm z``): the ``complex_vjp`` ops, the
real-linear ones below (sums, copies, reshapes and slices: their vjp has real coefficients),
and ``mul``/``div``, whose rules are written again here with the conjugates (COMPLEX_VJPS).
"""
from __future__ import annotations

from .errors import GraphcError, ShapeError

# vjp exact for complex cotangents: linear maps with real coefficients
COMPLEX_LINEAR = frozenset({
    "add", "sub", "neg", "cast", "reshape", "permute", "broadcast_to", "flatten", "concat", "slice", "slice_grad",
    "sum", "mean", "stop_gradient", "where",
})
# forward right on complex values, no gradient through them
COMPLEX_FORWARD = COMPLEX_LINEAR | frozenset({"mul", "div", "eq", "ne"})


def _conj(b, v):
    return b.emit1("conj", [v]) if v.type.dtype.is_complex else v


def _vjp_mul(b, node, cts, needs):
    x, y = node.inputs
    g = cts[0]
    return [b.emit1("mul", [g, _conj(b, y)]) if needs[0] else None, b.emit1("mul", [g, _conj(b, x)]) if needs[1] else None]


def _vjp_div(b, node, cts, needs):
    y, out = node.inputs[1], node.outputs[0]
    gx = b.emit1("div", [cts[0], _conj(b, y)])
    gy = b.emit1("neg", [b.emit1("mul", [gx, _conj(b, out)])]) if needs[1] else None
    return [gx if needs[0] else None, gy]


# the vjp rules of real ops, written again for complex values (the conjugates the real rules lack);
# ir/backprop.py runs these instead of the OpDef's where a node has a complex input or output
COMPLEX_VJPS = {"mul": _vjp_mul, "div": _vjp_div}


def complex_vjp(node):
    """The complex vjp rule for ``node`` (None: the OpDef's own holds)."""
    if node.op in COMPLEX_VJPS and any(v.type.dtype.is_complex for v in (*node.inputs, *node.outputs)):
        return COMPLEX_VJPS[node.op]
    return None


def check_inputs(opdef, in_types, attrs) -> None:
    """ShapeError when a complex input reaches an op that does not take complex values."""
    if opdef.complex_vjp or opdef.name in COMPLEX_FORWARD:
        if opdef.name == "div" and attrs.get("rounding_mode") is not None and any(t.dtype.is_complex for t in in_types):
            raise ShapeError("div with rounding_mode does not take complex tensors (as in PyTorch)")
        return
    for t in in_types:
        if t.dtype.is_complex:
            raise ShapeError(f"{opdef.name} does not take complex tensors in graphc (got {t}); complex values "
                             "support arithmetic (+ - * /), reshaping and slicing, torch.fft, real/imag/conj/angle")


def check_gradient(opdef, node) -> None:
    """GraphcError when a gradient would flow through a complex value of ``node`` by a vjp
    rule that assumes real numbers."""
    if opdef.complex_vjp or opdef.name in COMPLEX_LINEAR or opdef.name in COMPLEX_VJPS:
        return
    if any(v.type.dtype.is_complex for v in (*node.inputs, *node.outputs)):
        raise GraphcError(f"graphc cannot differentiate {node.op} on complex values (only the Fourier transforms, "
                          "real/imag/conj/complex, * and / and linear ops such as +, -, sum, reshape carry complex "
                          "gradients)")
