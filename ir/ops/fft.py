"""Discrete Fourier transforms (``torch.fft``) and the complex parts (real, imag, conj, complex).

Three transforms cover the whole of ``torch.fft``, as in PyTorch's ``_fft_c2c/_fft_r2c/_fft_c2r``:

- ``fft_c2c``: complex (or real, read as complex) to complex over ``dims``, forward or
  ``inverse``; the input is cut or zero-padded to ``sizes`` first (``n=``/``s=``);
- ``fft_r2c``: real to complex, the last dim of ``dims`` one-sided (``sizes[-1] // 2 + 1``);
- ``fft_c2r``: one-sided complex to real, ``sizes`` the output lengths;

and ``fft_resize`` cuts or zero-pads along dims (the adjoint of the cut/pad inside a
transform). ``norm`` is PyTorch's: "backward" (the inverse scales by 1/n), "ortho" (both by
1/sqrt(n)), "forward" (the forward scales by 1/n).

Gradients use PyTorch's convention for complex values (the cotangent of ``z`` is
``dL/dRe z + i dL/dIm z``): the vjp of a transform is the transform the other way with the
dual norm; a real input takes the real part. Every vjp here is exact for complex cotangents,
which is why these ops are marked ``complex_vjp`` (ir/complex_support.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType, is_static
from ._shapes import norm_axis

NORMS = ("backward", "ortho", "forward")
DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_ATTRS = {"dims": Attr("ints"), "sizes": Attr("dims"), "norm": Attr("str", "backward")}


def _check(x: TensorType, attrs, op: str) -> tuple:
    dims = tuple(norm_axis(d, x.rank) for d in attrs["dims"])
    if x.rank == 0 or len(set(dims)) != len(dims) or not dims:
        raise ShapeError(f"{op}: dims {tuple(attrs['dims'])} must be distinct dims of a tensor of rank >= 1, got {x}")
    if len(attrs["sizes"]) != len(dims):
        raise ShapeError(f"{op}: {len(attrs['sizes'])} sizes for {len(dims)} dims")
    for s in attrs["sizes"]:
        if is_static(s) and s < 1:
            raise ShapeError(f"{op}: invalid number of data points ({s}) specified")
    if attrs["norm"] not in NORMS:
        raise ShapeError(f"{op}: invalid normalization mode {attrs['norm']!r} (one of {', '.join(NORMS)})")
    if x.dtype is DType.float16:
        raise ShapeError(f"{op} does not take float16 tensors in graphc; cast to float32 first")
    return dims


def _resized(x: TensorType, dims, sizes) -> tuple:
    shape = list(x.shape)
    for d, s in zip(dims, sizes):
        shape[d] = s
    return tuple(shape)


def _c2c(in_types, attrs):
    x = in_types[0]
    dims = _check(x, attrs, "fft_c2c")
    return [TensorType(_resized(x, dims, attrs["sizes"]), x.dtype.to_complex)]


def _r2c(in_types, attrs):
    x = in_types[0]
    dims = _check(x, attrs, "fft_r2c")
    if x.dtype.is_complex:
        raise ShapeError(f"fft_r2c takes a real input, got {x.dtype.name}")
    last = attrs["sizes"][-1]
    if not is_static(last):
        raise ShapeError(f"fft_r2c: the one-sided dim needs a static size, got {last} (pass n= or s=)")
    return [TensorType(_resized(x, dims, attrs["sizes"][:-1] + (last // 2 + 1,)), x.dtype.to_complex)]


def _c2r(in_types, attrs):
    x = in_types[0]
    dims = _check(x, attrs, "fft_c2r")
    if not is_static(attrs["sizes"][-1]):
        raise ShapeError(f"fft_c2r: the output's last transformed dim needs a static size, got {attrs['sizes'][-1]}")
    return [TensorType(_resized(x, dims, attrs["sizes"]), x.dtype.to_real if x.dtype.is_complex
                       else x.dtype if x.dtype.is_float else DType.float32)]


def _resize(in_types, attrs):
    x = in_types[0]
    dims = tuple(norm_axis(d, x.rank) for d in attrs["dims"])
    if len(attrs["sizes"]) != len(dims):
        raise ShapeError(f"fft_resize: {len(attrs['sizes'])} sizes for {len(dims)} dims")
    return [x.with_shape(_resized(x, dims, attrs["sizes"]))]


# ---- vjps --------------------------------------------------------------------------------------
def _back_to_input(b, g, x):
    """The cotangent ``g`` (shaped like the transform's padded input) cut/padded back to
    ``x``'s shape, and its real part where ``x`` is real."""
    if g.type.shape != x.type.shape:
        dims = [d for d, (a, c) in enumerate(zip(g.type.shape, x.type.shape)) if a != c]
        g = b.emit1("fft_resize", [g], {"dims": dims, "sizes": [x.type.shape[d] for d in dims]})
    if not x.type.dtype.is_complex:
        g = b.emit1("real", [g])
    return g


def _vjp_c2c(b, node, cts, needs):
    attrs = node.attrs
    g = b.emit1("fft_c2c", [cts[0]], {**attrs, "norm": DUAL[attrs["norm"]], "inverse": not attrs["inverse"]})
    return [_back_to_input(b, g, node.inputs[0])]


def _vjp_r2c(b, node, cts, needs):
    """The one-sided output is the first half of the full transform: pad the cotangent with
    zeros to the full length, then the full transform's adjoint."""
    attrs, g = node.attrs, cts[0]
    dims = [norm_axis(d, node.inputs[0].type.rank) for d in attrs["dims"]]
    g = b.emit1("fft_resize", [g], {"dims": [dims[-1]], "sizes": [attrs["sizes"][-1]]})
    g = b.emit1("fft_c2c", [g], {**attrs, "norm": DUAL[attrs["norm"]], "inverse": True})
    return [_back_to_input(b, g, node.inputs[0])]


def _vjp_c2r(b, node, cts, needs):
    """The real output sums each one-sided entry k with its mirror n - k: the adjoint is the
    one-sided forward transform (dual norm) weighted 2 for the mirrored entries, 1 for entry
    0 and (n even) n / 2."""
    attrs, x = node.attrs, node.inputs[0]
    dims = [norm_axis(d, x.type.rank) for d in attrs["dims"]]
    n = attrs["sizes"][-1]
    g = b.emit1("fft_r2c", [cts[0]], {"dims": dims, "sizes": list(attrs["sizes"]), "norm": DUAL[attrs["norm"]]})
    weights = np.full(n // 2 + 1, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    shape = [1] * x.type.rank
    shape[dims[-1]] = n // 2 + 1
    real = g.type.dtype.to_real
    w = b.constant(weights.reshape(shape).astype(real.numpy), real)
    g = b.emit1("mul", [g, w])
    return [_back_to_input(b, g, x)]


def _vjp_resize(b, node, cts, needs):
    x = node.inputs[0]
    dims = [norm_axis(d, x.type.rank) for d in node.attrs["dims"]]
    return [b.emit1("fft_resize", [cts[0]], {"dims": dims, "sizes": [x.type.shape[d] for d in dims]})]


def _shift(in_types, attrs):
    x = in_types[0]
    for d in attrs["dims"]:
        norm_axis(d, x.rank)
    return [x]


def _vjp_shift(b, node, cts, needs):
    return [b.emit1("fft_shift", [cts[0]], {**node.attrs, "inverse": not node.attrs["inverse"]})]


# ---- the complex parts -------------------------------------------------------------------------
def _part(name):
    def rule(in_types, attrs):
        x = in_types[0]
        if not x.dtype.is_complex:
            raise ShapeError(f"{name} takes a complex tensor, got {x.dtype.name}")
        return [x.with_dtype(x.dtype.to_real)]
    return rule


def _conj(in_types, attrs):
    return [in_types[0]]


def _make_complex(in_types, attrs):
    re, im = in_types
    if re.dtype is not im.dtype or re.dtype not in (DType.float32, DType.float64):
        raise ShapeError(f"complex: expected both inputs to be float32 or float64 of one dtype, got "
                         f"{re.dtype.name} and {im.dtype.name}")
    from ._shapes import broadcast

    return [TensorType(broadcast(re.shape, im.shape), re.dtype.to_complex)]


def _vjp_real(b, node, cts, needs):
    return [b.emit1("cast", [cts[0]], {"dtype": node.inputs[0].type.dtype.name})]  # g + 0i


def _vjp_imag(b, node, cts, needs):
    g = cts[0]
    zero = b.emit1("full", [], {"shape": list(g.type.shape), "value": 0.0, "dtype": g.type.dtype.name})
    return [b.emit1("make_complex", [zero, g])]  # 0 + i g


def _vjp_conj(b, node, cts, needs):
    return [b.emit1("conj", [cts[0]])]


def _vjp_complex_abs(b, node, cts, needs):
    """``g * z / |z|`` (0 where z = 0, as PyTorch's sgn)."""
    z, r = node.inputs[0], node.outputs[0]
    zero = b.emit1("eq", [r, b.constant(np.array(0.0, r.type.dtype.numpy), r.type.dtype)])
    safe = b.emit1("where", [zero, b.constant(np.array(1.0, r.type.dtype.numpy), r.type.dtype), r])
    sign = b.emit1("div", [z, b.emit1("cast", [safe], {"dtype": z.type.dtype.name})])
    return [b.emit1("mul", [b.emit1("cast", [cts[0]], {"dtype": z.type.dtype.name}), sign])]


def _vjp_make_complex(b, node, cts, needs):
    g = cts[0]
    return [b.emit1("real", [g]) if needs[0] else None, b.emit1("imag", [g]) if needs[1] else None]


register(OpDef("fft_c2c", _c2c, attrs={**_ATTRS, "inverse": Attr("bool", False)}, vjp=_vjp_c2c, complex_vjp=True,
               doc="complex DFT over dims (input cut/zero-padded to sizes)"))
register(OpDef("fft_r2c", _r2c, attrs=_ATTRS, vjp=_vjp_r2c, complex_vjp=True,
               doc="real-to-complex DFT, the last of dims one-sided"))
register(OpDef("fft_c2r", _c2r, attrs=_ATTRS, vjp=_vjp_c2r, complex_vjp=True,
               doc="one-sided complex-to-real inverse DFT, sizes the output lengths"))
register(OpDef("fft_resize", _resize, attrs={"dims": Attr("ints"), "sizes": Attr("dims")}, vjp=_vjp_resize,
               complex_vjp=True, doc="cut or zero-pad along dims to sizes"))
register(OpDef("fft_shift", _shift, attrs={"dims": Attr("ints"), "inverse": Attr("bool", False)}, vjp=_vjp_shift,
               complex_vjp=True, doc="roll each of dims by half its size (fftshift; inverse: ifftshift)"))
register(OpDef("real", _part("real"), vjp=_vjp_real, complex_vjp=True, doc="real part of a complex tensor"))
register(OpDef("imag", _part("imag"), vjp=_vjp_imag, complex_vjp=True, doc="imaginary part of a complex tensor"))
register(OpDef("conj", _conj, vjp=_vjp_conj, complex_vjp=True, doc="complex conjugate (a copy of a real tensor)"))
register(OpDef("complex_abs", _part("abs"), vjp=_vjp_complex_abs, complex_vjp=True,
               doc="magnitude of a complex tensor, in its real dtype"))
register(OpDef("make_complex", _make_complex, inputs=(2, 2), vjp=_vjp_make_complex, complex_vjp=True,
               doc="real + i * imag (torch.complex)"))
