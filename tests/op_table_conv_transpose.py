"""The op table's entries for transposed convolution and sliding blocks
(ir/ops/conv_transpose.py): ``conv_transpose2d``, ``im2col`` (F.unfold) and ``col2im``
(F.fold). References are plain float64 loops over input positions and kernel offsets written
from the definitions (a transposed conv scatters each input pixel times the kernel into the
output), never graphc's kernels; PyTorch's side is F.conv_transpose2d / F.unfold / F.fold. The
inputs come from their own generator, so these rows leave the other rows' inputs (and their
recorded references) as they were.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, TF, OpInfo, S, fortran, strided

_RNG = np.random.default_rng(20261127)


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _pair(v, default):
    v = default if v is None else v
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_transpose2d_ref(ins, attrs):
    x, w = ins[0].astype(F64), ins[1].astype(F64)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    groups = attrs.get("groups", 1)
    (sh, sw), (ph, pw) = _pair(attrs.get("stride"), 1), _pair(attrs.get("padding"), 0)
    (dh, dw), (oph, opw) = _pair(attrs.get("dilation"), 1), _pair(attrs.get("output_padding"), 0)
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    full = np.zeros((n, og * groups, oh + 2 * ph + sh + dh * kh, ow + 2 * pw + sw + dw * kw))
    cg = c // groups
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for b in range(kw):
                    for g in range(groups):
                        contrib = x[:, g * cg:(g + 1) * cg, i, j] @ w[g * cg:(g + 1) * cg, :, a, b]
                        full[:, g * og:(g + 1) * og, i * sh + a * dh, j * sw + b * dw] += contrib
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    if len(ins) == 3:
        out = out + ins[2].astype(F64).reshape(1, -1, 1, 1)
    return [out.astype(ins[0].dtype)]


def _torch_conv_transpose2d(ts, a):
    return TF().conv_transpose2d(*ts, stride=a["stride"], padding=a["padding"], output_padding=a["output_padding"],
                                 groups=a["groups"], dilation=a["dilation"])


def _blocks(hw, attrs):
    k, s = _pair(attrs["kernel_size"], 1), _pair(attrs.get("stride"), 1)
    p, d = _pair(attrs.get("padding"), 0), _pair(attrs.get("dilation"), 1)
    return [(size + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for size, kk, ss, pp, dd in zip(hw, k, s, p, d)], k, s, p, d


def im2col_ref(ins, attrs):
    x = ins[0].astype(F64)
    n, c, h, w = x.shape
    (oh, ow), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _blocks((h, w), attrs)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, c, kh, kw, oh, ow))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    out[:, :, a, b, i, j] = xp[:, :, i * sh + a * dh, j * sw + b * dw]
    return [out.reshape(n, c * kh * kw, oh * ow).astype(ins[0].dtype)]


def col2im_ref(ins, attrs):
    cols = ins[0].astype(F64)
    h, w = attrs["output_size"]
    (oh, ow), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _blocks((h, w), attrs)
    n = cols.shape[0]
    c = cols.shape[1] // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    out[:, :, i * sh + a * dh, j * sw + b * dw] += blocks[:, :, a, b, i, j]
    return [out[:, :, ph:ph + h, pw:pw + w].astype(ins[0].dtype)]


def _window_kw(a):
    return {"kernel_size": a["kernel_size"], "dilation": a["dilation"], "padding": a["padding"], "stride": a["stride"]}


def conv_transpose_table():
    ct, unfold, fold = conv_transpose2d_ref, im2col_ref, col2im_ref
    x = _randn(2, 4, 5, 5)
    t = [OpInfo("conv_transpose2d", torch=_torch_conv_transpose2d, samples=[
        S([x, _randn(4, 3, 3, 3), _randn(3)], ct, "3x3-bias"),
        S([x, _randn(4, 3, 3, 3)], ct, "no-bias"),
        S([x, _randn(4, 3, 4, 4), _randn(3)], ct, "dcgan-stride2-pad1", {"stride": (2, 2), "padding": (1, 1)}),
        S([x, _randn(4, 3, 3, 3), _randn(3)], ct, "output-padding",
          {"stride": (2, 2), "padding": (1, 1), "output_padding": (1, 1)}),
        S([x, _randn(4, 3, 3, 3), _randn(3)], ct, "dilation2", {"dilation": (2, 2)}),
        S([x, _randn(4, 3, 2, 3), _randn(3)], ct, "asymmetric",
          {"stride": (3, 2), "padding": (1, 0), "dilation": (1, 2), "output_padding": (2, 0)}),
        S([x, _randn(4, 3, 3, 3), _randn(6)], ct, "groups2", {"groups": 2, "stride": (2, 1), "padding": (1, 1)}),
        S([x, _randn(4, 1, 3, 3), _randn(4)], ct, "depthwise", {"groups": 4, "stride": (2, 2)}),
        S([x, _randn(4, 5, 1, 1), _randn(5)], ct, "1x1"),
        S([_randn(1, 3, 4, 4, dtype=F64), _randn(3, 2, 3, 3, dtype=F64), _randn(2, dtype=F64)], ct, "f64-stride2",
          {"stride": (2, 2), "padding": (1, 1), "output_padding": (1, 0)}),
        S([fortran(_randn(2, 3, 4, 5)), fortran(_randn(3, 4, 3, 3)), _randn(4)], ct, "noncontig",
          {"stride": (2, 2)}),
    ])]
    img = _randn(2, 3, 6, 5)
    fold_cases = [("2x2", {"kernel_size": (2, 2)}), ("stride-pad-dilation",
                                                     {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1),
                                                      "dilation": (1, 2)}),
                  ("stride2-overlap", {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 0)}),
                  ("1x1", {"kernel_size": (1, 1)})]
    unfold_samples = [S([img], unfold, d, a) for d, a in fold_cases]
    unfold_samples += [S([_randn(1, 2, 5, 4, dtype=F64)], unfold, "f64", {"kernel_size": (2, 3), "padding": (1, 1)}),
                       S([fortran(_randn(2, 2, 4, 4))], unfold, "noncontig", {"kernel_size": (2, 2), "stride": (2, 2)})]
    fold_samples = []
    for d, a in fold_cases:
        length = int(np.prod(_blocks((6, 5), a)[0]))
        k = int(np.prod(a["kernel_size"]))
        fold_samples.append(S([_randn(2, 3 * k, length)], fold, d, {**a, "output_size": (6, 5)}))
    fold_samples += [S([_randn(1, 12, 9, dtype=F64)], fold, "f64", {"kernel_size": (2, 3), "output_size": (4, 5)}),
                     S([strided(_randn(2, 4, 9))], fold, "noncontig",
                       {"kernel_size": (2, 2), "stride": (2, 2), "padding": (1, 1), "output_size": (4, 4)})]
    t.append(OpInfo("im2col", torch=lambda ts, a: TF().unfold(ts[0], **_window_kw(a)), samples=unfold_samples))
    t.append(OpInfo("col2im", torch=lambda ts, a: TF().fold(ts[0], a["output_size"], **_window_kw(a)),
                    samples=fold_samples))
    return t
