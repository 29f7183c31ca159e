"""Which ops take complex values, and which of their gradient rules hold for them.

graphc's complex dtypes (complex64, complex128) arrived after most ops were written: their
shape rules, kernels and vjp rules assume real numbers (``abs`` of a complex tensor would keep
the complex dtype, ``mul``'s vjp ``g * y`` lacks the conjugate). Rather than let those run
silently wrong, an op takes a complex input only when it is listed here or its OpDef says
``complex_vjp`` (the Fourier transforms and the complex parts, ir/ops/fft.py); gradients flow
through a complex value only across ops whose vjp is exact for PyTorch's complex convention
(the cotangent of ``z`` is ``dL/dRe z + i dL/dIm z``): the ``complex_vjp`` ops and the
real-linear ones below (sums, copies, reshapes and slices: their vjp has real coefficients).
"""
from __future__ import annotations

from .errors import GraphcError, ShapeError

# vjp exact for complex cotangents: linear maps with real coefficients
COMPLEX_LINEAR = frozenset({
    "add", "sub", "neg", "cast", "reshape", "permute", "broadcast_to", "flatten", "concat", "slice", "slice_grad",
    "sum", "mean", "stop_gradient", "where",
})
# forward right on complex values, but no gradient through them (mul's and div's vjp need a conjugate)
COMPLEX_FORWARD = COMPLEX_LINEAR | frozenset({"mul", "div", "eq", "ne"})


def check_inputs(opdef, in_types) -> None:
    """ShapeError when a complex input reaches an op that does not take complex values."""
    if opdef.complex_vjp or opdef.name in COMPLEX_FORWARD:
        return
    for t in in_types:
        if t.dtype.is_complex:
            raise ShapeError(f"{opdef.name} does not take complex tensors in graphc (got {t}); complex values "
                             "support arithmetic (+ - * /), reshaping and slicing, torch.fft, real/imag/conj/angle")


def check_gradient(opdef, node) -> None:
    """GraphcError when a gradient would flow through a complex value of ``node`` by a vjp
    rule that assumes real numbers."""
    if opdef.complex_vjp or opdef.name in COMPLEX_LINEAR:
        return
    if any(v.type.dtype.is_complex for v in (*node.inputs, *node.outputs)):
        raise GraphcError(f"graphc cannot differentiate {node.op} on complex values (only the Fourier transforms, "
                          "real/imag/conj/complex and linear ops such as +, -, sum, reshape carry complex gradients)")
