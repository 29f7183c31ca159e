"""Readers of ONNX's quantization ops and low-precision casts (see ``readers`` for the contract):
QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv, BitCast between integers, and ``low_precision_cast``, the Cast and
CastLike to the float8, float4 and float8e8m0 types.

Semantics are onnx's reference implementation (``onnx.reference.ops``), op for op:

- Casts to float8 are ml_dtypes' (round to nearest even; overflow to inf or NaN as each format
  has them), which is the reference's ``astype``; with ``saturate=1`` the value is first clamped to
  the format's finite range (the reference's ``saturate_cast``), so inf becomes the largest
  finite value and NaN stays NaN. Float4 has neither inf nor NaN: ml_dtypes saturates on its own.
  FLOAT8E8M0 follows ``onnx.numpy_helper.to_float8e8m0``: the float32 exponent (the sign is
  dropped), rounded up/down/to nearest by the mantissa, built here from log2/exp2 on the value.
- Quantizing divides in numpy's promotion of (x, scale) (or the ``precision`` attr's type), rounds
  half to even, adds the zero point and clamps to the integer range in float64 (exact), so an
  overflow saturates (the reference's int32 conversion of inf/huge values is platform behaviour).
- Dequantizing is ``(float32(x) - zero_point) * scale`` in numpy's promotion, cast to the
  scale's type or ``output_dtype``. A float8/float4 zero point must be a known zero (the
  reference ignores it on one side and adds it on the other: never guessed).
- Scales and zero points are per tensor (size 1), per axis (1-D along ``axis``) or blocked
  (``block_size``: repeated along ``axis`` and cut to its length).
- Integer products accumulate exactly in int32: matmul in int32 (numpy wraps as int32 does);
  convolutions in float64, whose sums are exact integers while every sum fits int32, which the
  reader checks from the kernel size and the (known) bias: a conv that could overflow is refused.
"""
from __future__ import annotations

import numpy as np

import graphc as gc
from ..ir.types import DType
from .composite import composing
from .conv_readers import _conv
from .dtypes import DTYPES, type_name
from .shape_readers import _known, _rank, _shape

_FLOAT8 = (DType.float8_e4m3fn, DType.float8_e4m3fnuz, DType.float8_e5m2, DType.float8_e5m2fnuz)
_INT_RANGES = {DType.uint8: (0, 255), DType.int8: (-128, 127), DType.uint16: (0, 65535),
               DType.int16: (-32768, 32767), DType.uint4: (0, 15), DType.int4: (-8, 7),
               DType.uint2: (0, 3), DType.int2: (-2, 1)}


def _dtype(x) -> DType:
    return x.type.dtype if hasattr(x, "type") else DType.from_any(np.asarray(x).dtype)


def _promoted(*dtypes: DType) -> DType:
    """numpy's promotion of arrays of these types (the reference computes in it)."""
    return DType.from_any(np.result_type(*(d.numpy for d in dtypes)))


# ---- casts -------------------------------------------------------------------------------------------
def low_precision_cast(r, x, target: DType, saturate: bool = True, round_mode: str = "up"):
    """Cast/CastLike of ``x`` to a float8, float4 or float8e8m0 type, as onnx's reference."""
    with composing(r) as t:
        v = t(x)
        if target is DType.float8_e8m0fnu:
            return t.value(_to_e8m0(r, v, saturate, round_mode))
        if target in _FLOAT8 and saturate:
            if v.dtype not in (DType.float16, DType.float32, DType.float64):
                v = v.double()  # exact; the clamp is numpy's on every type, then one rounding
            most = float(np.finfo(target.numpy).max)
            v = gc.clamp(v, -most, most)  # NaN stays NaN
        return t.value(v.cast(target))


def _to_e8m0(r, v, saturate: bool, round_mode: str):
    """onnx.numpy_helper.to_float8e8m0: 2**(e - 127) for the float32 exponent field e of |x|
    (0 for zero and subnormals), e + 1 when the mantissa rounds up; inf and NaN are NaN."""
    if round_mode not in ("up", "down", "nearest"):
        raise r.error(f"Cast to FLOAT8E8M0 with round_mode={round_mode!r}; onnx defines up, down and nearest")
    a = v.float().double().abs()  # the reference reads float32 bits; float64 holds them exactly
    special = gc.logical_or(gc.isnan(a), gc.isinf(a))
    a = gc.where(special, gc.zeros_like(a), a)
    e = gc.floor(gc.log2(gc.clamp(a, min=2.0 ** -126)))
    e = e - (gc.exp2(e) > a).double() + (gc.exp2(e + 1) <= a).double()  # log2 may be one off
    normal = a >= 2.0 ** -126
    field = gc.where(normal, e + 127, gc.zeros_like(e))
    fraction = gc.where(normal, a / gc.exp2(e) - 1, a * 2.0 ** 126)  # the mantissa, in [0, 1)
    if round_mode == "up":
        up = fraction > 0
    elif round_mode == "nearest":
        up = gc.logical_or(fraction > 0.5, gc.logical_and(fraction == 0.5, normal))
    else:
        up = fraction < 0  # never
    if saturate:
        up = gc.logical_and(up, field < 254)
    field = gc.where(special, gc.full_like(field, 255.0), field + up.double())
    value = gc.where(field == 255, gc.full_like(field, float("nan")), gc.exp2(field - 127))
    return value.cast(DType.float8_e8m0fnu)


def _bitcast(r, args):
    """BitCast between integer (and bool) types of one width: two's complement wrapping, done
    with arithmetic. Float bit patterns need a bit view graphc's ops do not have: refused."""
    x = args[0]
    to = DTYPES.get(r.attrs()["to"])
    source = _dtype(x)
    if to is None or not (to.is_integer or to is DType.bool) or not (source.is_integer or source is DType.bool):
        raise r.error(f"BitCast from {source.name} to {type_name(r.attrs()['to'])}: graphc reinterprets the bits "
                      "of integer types only (it has no op that views a float's bits)")
    if source.numpy.itemsize != to.numpy.itemsize:
        raise r.error(f"BitCast from {source.name} to {to.name}: the widths differ")
    if source is DType.bool and to is not DType.bool:
        return [r.emit("cast", [x], {"dtype": to.name})]  # True is the byte 1
    if source is to:
        return [x]
    if to is DType.bool:  # a byte other than 0 or 1 is no bool
        raise r.error(f"BitCast from {source.name} to {to.name} is not supported")
    span = 2 ** (8 * to.numpy.itemsize)
    if span == 2 ** 64:  # int64 holds no uint64 value over 2**63
        raise r.error(f"BitCast from {source.name} to {to.name}: graphc reinterprets integers up to 32 bits")
    low, high = int(np.iinfo(to.numpy).min), int(np.iinfo(to.numpy).max)
    with composing(r) as t:
        wide = t(x).long()
        wide = gc.where(wide > high, wide - span, gc.where(wide < low, wide + span, wide))
        return [t.value(wide.cast(to))]


# ---- scales and zero points ----------------------------------------------------------------------
def _along(r, t, value, shape: tuple, axis: int, block: int):
    """A scale or zero point shaped to broadcast against a tensor of ``shape`` (the reference's
    ``reshape_input``): size 1 per tensor, 1-D along ``axis``, or repeated in blocks of ``block``."""
    v = t(value)
    if v.dim() == 0 or v.numel() == 1:
        return v.reshape([])
    if not block:
        if v.dim() != 1 or v.shape[0] != shape[axis]:
            raise r.error(f"a per-axis scale or zero point of shape {list(v.shape)} for axis {axis} of {list(shape)}")
        return v.reshape([v.shape[0] if i == axis else 1 for i in range(len(shape))])
    if block < 0 or not isinstance(shape[axis], int):
        raise r.error(f"blocked quantization with block_size={block} along axis {axis} of {list(shape)}")
    v = gc.narrow(gc.repeat_interleave(v, block, dim=axis), axis, 0, shape[axis])
    if tuple(v.shape) != tuple(shape):
        raise r.error(f"a blocked scale or zero point of shape {list(t(value).shape)} does not block {list(shape)}")
    return v


def _attrs(r):
    a = r.attrs()
    return a, int(a.get("axis", 1)), int(a.get("block_size", 0))


def _zero_is_zero(r, zp, what: str) -> None:
    """A float8/float4 zero point is ignored, as the reference does (onnx requires it zero; the
    reference's DequantizeLinear checks that when it runs): a known nonzero one is refused."""
    if zp is not None and _known(zp) and np.any(np.asarray(zp).astype(np.float32) != 0):
        raise r.error(f"{what} with a nonzero zero point; onnx defines a zero one only")


def _quant_target(r, zp, output_dtype) -> DType:
    target = _dtype(zp) if zp is not None else DTYPES.get(output_dtype) if output_dtype else DType.uint8
    if output_dtype and zp is not None and DTYPES.get(output_dtype) is not target:
        raise r.error(f"QuantizeLinear with output_dtype {type_name(output_dtype)} and a {target.name} zero point")
    if target is None or (target not in _INT_RANGES and target not in _FLOAT8 and target is not DType.float4_e2m1fn):
        raise r.error(f"QuantizeLinear to {type_name(output_dtype)}: not a quantized type graphc imports")
    return target


def _quantize(r, args):
    x, scale, zp = (list(args) + [None, None])[:3]
    a, axis, block = _attrs(r)
    target = _quant_target(r, zp, a.get("output_dtype"))
    shape = _shape(x)
    axis = axis % max(len(shape), 1)
    if target in _FLOAT8:
        _zero_is_zero(r, zp, f"QuantizeLinear to {target.name}")
    with composing(r) as t:
        s = _along(r, t, scale, shape, axis, block)
        work = DTYPES[a["precision"]] if a.get("precision") else _promoted(_dtype(x), _dtype(scale))
        q = t(x).cast(work) / s.cast(work)
        if target in _FLOAT8:
            return [low_precision_cast(r, t.value(q), target, bool(a.get("saturate", 1)))]
        if target is DType.float4_e2m1fn:
            if zp is not None:
                q = q + _along(r, t, zp, shape, axis, block).cast(q.dtype)
            return [t.value(q.cast(target))]
        q = gc.round(q).double()
        if zp is not None:
            q = q + _along(r, t, zp, shape, axis, block).double()
        low, high = _INT_RANGES[target]
        return [t.value(gc.clamp(q, float(low), float(high)).cast(DType.int32).cast(target))]


def _dequantize(r, args):
    x, scale, zp = (list(args) + [None, None])[:3]
    a, axis, block = _attrs(r)
    shape, source = _shape(x), _dtype(x)
    axis = axis % max(len(shape), 1)
    out = DTYPES.get(a["output_dtype"]) if a.get("output_dtype") else _dtype(scale)
    if out is None:
        raise r.error(f"DequantizeLinear to {type_name(a['output_dtype'])}")
    with composing(r) as t:
        dx = t(x).float()
        if source in _FLOAT8 or source is DType.float4_e2m1fn:
            _zero_is_zero(r, zp, f"DequantizeLinear of {source.name}")
        elif zp is not None:
            if _dtype(zp) is not source:
                raise r.error(f"DequantizeLinear of {source.name} with a {_dtype(zp).name} zero point")
            z = _along(r, t, zp, shape, axis, block)
            work = _promoted(DType.float32, _dtype(zp))
            dx = dx.cast(work) - z.cast(work)
        s = _along(r, t, scale, shape, axis, block)
        work = _promoted(dx.dtype, s.dtype)
        return [t.value((dx.cast(work) * s.cast(work)).cast(out))]


def _dynamic_quantize(r, args):
    """DynamicQuantizeLinear: uint8 with the scale and zero point of x's range widened to 0."""
    x = args[0]
    if _dtype(x) is not DType.float32:
        raise r.error(f"DynamicQuantizeLinear of {_dtype(x).name}; onnx defines float32")
    with composing(r) as t:
        v = t(x)
        high = gc.clamp(gc.amax(v), min=0.0)
        low = gc.clamp(gc.amin(v), max=0.0)
        span = gc.where(high == low, gc.ones_like(high), high - low)
        scale = span / 255.0
        zero = gc.round(gc.clamp(-(low / scale), 0.0, 255.0))
        y = gc.clamp(gc.round(v / scale) + zero, 0.0, 255.0)
        return [t.value(y.byte()), t.value(scale), t.value(zero.byte())]


# ---- integer matmul and conv -----------------------------------------------------------------------
def _centered(r, t, x, zp, what: str, per: int | None = None):
    """int32(x) - zero point: one of a single element, or (with ``per``) a 1-D one along the dim
    that has ``per`` dims after it (a conv weight's output channels: 3; a matrix's columns: 0)."""
    v = t(x).cast(DType.int32)
    if zp is None:
        return v
    z = t(zp)
    if z.numel() == 1:
        return v - z.reshape([]).cast(DType.int32)
    if per is None or z.dim() != 1:
        raise r.error(f"{what} with a zero point of shape {list(z.shape)}; graphc imports a per-tensor one here")
    return v - z.cast(DType.int32).reshape([z.shape[0]] + [1] * per)


def _one_element(r, x, what: str) -> None:
    if x is not None and int(np.prod(_shape(x))) != 1:
        raise r.error(f"{what} of shape {list(_shape(x))}; graphc imports a per-tensor one (onnx's per-row "
                      "broadcast of it is ambiguous)")


def _matmul_integer(r, args):
    a, b, azp, bzp = (list(args) + [None, None])[:4]
    _one_element(r, azp, "MatMulInteger's a_zero_point")
    with composing(r) as t:
        return [t.value(gc.matmul(_centered(r, t, a, azp, "MatMulInteger"), _centered(r, t, b, bzp, "MatMulInteger", 0)))]


def _exact_conv(r, t, x, w, bias=None):
    """Conv of int32 tensors, accumulated exactly: in float64, refused where an int32 sum could
    overflow (the bound is the kernel's size times the largest product of the operands' types)."""
    rank, terms = _rank(t.value(x)), int(np.prod(_shape(t.value(w))[1:]))
    if rank not in (3, 4):
        raise r.error(f"an integer Conv on a rank-{rank} input; graphc imports 1-D and 2-D ones")
    if bias is not None and not _known(bias):
        raise r.error("QLinearConv with a bias computed by the graph; graphc needs it known to bound the int32 sum")
    largest = terms * 255 * 255 + (int(np.abs(np.asarray(bias, np.int64)).max(initial=0)) if bias is not None else 0)
    if largest >= 2 ** 31:
        raise r.error(f"an integer Conv summing {terms} products could overflow int32; graphc sums in float64")
    args = [t.value(x.double()), t.value(w.double())] + ([t.value(t(bias).double())] if bias is not None else [])
    return t(_conv(r, args)[0])


def _conv_integer(r, args):
    x, w, xzp, wzp = (list(args) + [None, None])[:4]
    if _dtype(x).numpy.itemsize != 1 or _dtype(w).numpy.itemsize != 1:
        raise r.error("ConvInteger of types other than int8/uint8")
    _one_element(r, xzp, "ConvInteger's x_zero_point")
    with composing(r) as t:
        xs, ws = _centered(r, t, x, xzp, ""), _centered(r, t, w, wzp, "ConvInteger", _rank(w) - 1)
        return [t.value(_exact_conv(r, t, xs, ws).cast(DType.int32))]


def _requantize(r, t, acc, multiplier, zp, out: DType):
    """acc * multiplier (float64, as numpy promotes int32 by a float array) + zero point, rounded
    half to even and clamped to ``out``'s range."""
    y = acc.double() * multiplier.double()
    if zp is not None:
        y = y + t(zp).double()
    low, high = _INT_RANGES[out]
    return gc.clamp(gc.round(y), float(low), float(high)).cast(DType.int32).cast(out)


def _qlinear_matmul(r, args):
    a, a_scale, azp, b, b_scale, bzp, y_scale, yzp = (list(args) + [None] * 8)[:8]
    for value, what in ((a_scale, "a_scale"), (azp, "a_zero_point")):
        _one_element(r, value, f"QLinearMatMul's {what}")
    out = _dtype(yzp) if yzp is not None else _dtype(a)
    if out not in (DType.int8, DType.uint8):
        raise r.error(f"QLinearMatMul to {out.name}")
    with composing(r) as t:
        acc = gc.matmul(_centered(r, t, a, azp, ""), _centered(r, t, b, bzp, "QLinearMatMul", 0))
        s = t(a_scale).reshape([]) * t(b_scale) / t(y_scale)  # in the scales' own type, as the reference
        return [t.value(_requantize(r, t, acc, s, yzp, out))]


def _qlinear_conv(r, args):
    x, x_scale, xzp, w, w_scale, wzp, y_scale, yzp, bias = (list(args) + [None] * 9)[:9]
    _one_element(r, xzp, "QLinearConv's x_zero_point")
    out = _dtype(yzp) if yzp is not None else _dtype(x)
    if out not in (DType.int8, DType.uint8):
        raise r.error(f"QLinearConv to {out.name}")
    with composing(r) as t:
        xs, ws = _centered(r, t, x, xzp, ""), _centered(r, t, w, wzp, "QLinearConv", _rank(w) - 1)
        acc = _exact_conv(r, t, xs, ws, bias).cast(DType.int32)
        s = t(w_scale)
        if s.numel() > 1:  # per output channel
            s = s.reshape([1, s.shape[0]] + [1] * (_rank(x) - 2))
        else:
            s = s.reshape([])
        m = t(x_scale).reshape([]) * s / t(y_scale).reshape([])
        # the reference clamps before it rounds (np.round half to even): the same for integer bounds
        return [t.value(_requantize(r, t, acc, m, yzp, out))]


QUANT_READERS = {
    "QuantizeLinear": _quantize, "DequantizeLinear": _dequantize, "DynamicQuantizeLinear": _dynamic_quantize,
    "MatMulInteger": _matmul_integer, "ConvInteger": _conv_integer, "QLinearMatMul": _qlinear_matmul,
    "QLinearConv": _qlinear_conv, "BitCast": _bitcast,
}
