"""The op table's entries for the index-based pooling ops (ir/ops/pool.py): ``max_pool2d_indices``
(``return_indices``), ``adaptive_max_pool2d`` and its ``adaptive_max_pool2d_indices``,
``max_unpool2d`` and the backward ops ``adaptive_max_pool2d_grad`` (a scatter-add) and
``max_unpool2d_grad`` (a gather). References loop over output positions in float64; an index is
PyTorch's flat ``h * W + w`` per plane. PyTorch's side is ``F.max_pool2d(return_indices=True)`` /
``F.adaptive_max_pool2d`` and, for the scatter/gather ops, ``scatter_add`` / ``scatter`` /
``gather`` over the flattened planes. The inputs come from their own generator, so these rows
leave the other rows' inputs (and their recorded references) as they were.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, T, TF, fortran

_RNG = np.random.default_rng(20261127)


def _distinct(*shape, dtype=F32):
    """Pairwise distinct values on a 0.25 grid: maxima never tie."""
    n = int(np.prod(shape))
    return ((_RNG.permutation(n) - n // 2) * 0.25).reshape(shape).astype(dtype)


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _pool_size(size, k, s, p, d, ceil):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _indices_ref(ins, attrs):
    x = ins[0].astype(F64)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs.get("padding", (0, 0))
    dh, dw = attrs.get("dilation", (1, 1))
    ceil = attrs.get("ceil_mode", False)
    oh, ow = _pool_size(h, kh, sh, ph, dh, ceil), _pool_size(w, kw, sw, pw, dw, ceil)
    out = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in (i * sh - ph + a * dh for a in range(kh)) if 0 <= r < h]
            cols = [q for q in (j * sw - pw + b * dw for b in range(kw)) if 0 <= q < w]
            cells = [(r, q) for r in rows for q in cols]  # row-major: the first maximum wins
            vals = np.stack([x[:, :, r, q] for r, q in cells], -1)
            first = np.argmax(vals, -1)
            out[:, :, i, j] = np.array([r * w + q for r, q in cells])[first]
    return [out]


def _torch_indices(ts, a):
    return TF().max_pool2d(ts[0], a["kernel_size"], a["stride"], a["padding"], a["dilation"],
                           ceil_mode=a["ceil_mode"], return_indices=True)[1]


def _bins(size, out):
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _adaptive_max_ref(ins, attrs):
    x = ins[0].astype(F64)
    n, c, h, w = x.shape
    oh, ow = attrs["output_size"]
    y, idx = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), np.int64)
    for i, (h0, h1) in enumerate(_bins(h, oh)):
        for j, (w0, w1) in enumerate(_bins(w, ow)):
            block = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            first = np.argmax(block, -1)
            y[:, :, i, j] = block.max(-1)
            idx[:, :, i, j] = (h0 + first // (w1 - w0)) * w + w0 + first % (w1 - w0)
    return [y.astype(ins[0].dtype), idx]


def _adaptive_values_ref(ins, attrs):
    return _adaptive_max_ref(ins, attrs)[:1]


def _adaptive_indices_ref(ins, attrs):
    return _adaptive_max_ref(ins, attrs)[1:]


def _torch_adaptive_max(ts, a):
    return TF().adaptive_max_pool2d(ts[0], a["output_size"])


def _torch_adaptive_indices(ts, a):
    return TF().adaptive_max_pool2d(ts[0], a["output_size"], return_indices=True)[1]


def _scatter_ref(accumulate, size_attr):
    def ref(ins, attrs):
        g, idx = ins[0].astype(F64), ins[1]
        n, c = g.shape[:2]
        h, w = attrs[size_attr]
        out = np.zeros((n, c, h * w))
        for a in range(n):
            for b in range(c):
                if accumulate:
                    np.add.at(out[a, b], idx[a, b].ravel(), g[a, b].ravel())
                else:
                    out[a, b, idx[a, b].ravel()] = g[a, b].ravel()
        return [out.reshape(n, c, h, w).astype(ins[0].dtype)]
    return ref


def _torch_scatter(accumulate, size_attr):
    def run(ts, a):
        g, idx = ts
        n, c = g.shape[:2]
        out = T().zeros((n, c, a[size_attr][0] * a[size_attr][1]), dtype=g.dtype)
        flat_i, flat_g = idx.reshape(n, c, -1), g.reshape(n, c, -1)
        out = out.scatter_add(2, flat_i, flat_g) if accumulate else out.scatter(2, flat_i, flat_g)
        return out.reshape(n, c, *a[size_attr])
    return run


def _gather_ref(ins, attrs):
    g, idx = ins[0].astype(F64), ins[1]
    n, c = g.shape[:2]
    got = np.take_along_axis(g.reshape(n, c, -1), idx.reshape(n, c, -1), 2)
    return [got.reshape(idx.shape).astype(ins[0].dtype)]


def _torch_gather(ts, a):
    g, idx = ts
    n, c = g.shape[:2]
    return g.reshape(n, c, -1).gather(2, idx.reshape(n, c, -1)).reshape(idx.shape)


def _unique_indices(n, c, oh, ow, h, w):
    """Each (n, c) plane's indices distinct (max unpooling writes, so a repeat would drop a value)."""
    return np.stack([_RNG.permutation(h * w)[:oh * ow] for _ in range(n * c)]).reshape(n, c, oh, ow)


def _any_indices(n, c, oh, ow, h, w):
    return _RNG.integers(0, h * w, (n, c, oh, ow)).astype(np.int64)


def vision_table() -> list[OpInfo]:
    ind = _indices_ref
    t = [OpInfo("max_pool2d_indices", torch=_torch_indices, samples=[
        S([_distinct(2, 3, 6, 6)], ind, "k2s2", {"kernel_size": (2, 2), "stride": (2, 2)}, grad=False),
        S([_distinct(2, 2, 7, 7)], ind, "k3s2p1", {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)},
          grad=False),
        S([_distinct(2, 2, 8, 7)], ind, "ceil", {"kernel_size": (3, 2), "stride": (2, 2), "ceil_mode": True},
          grad=False),
        S([_distinct(1, 2, 9, 9)], ind, "dilated-padded-ceil",
          {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "dilation": (2, 2), "ceil_mode": True},
          grad=False),
        S([_distinct(2, 2, 5, 6, dtype=F64)], ind, "f64", {"kernel_size": (2, 3), "stride": (1, 2)}, grad=False),
        S([fortran(_distinct(2, 3, 6, 6))], ind, "noncontig", {"kernel_size": (2, 2), "stride": (2, 2)},
          grad=False),
    ])]
    for op, ref, torch, grad in (("adaptive_max_pool2d", _adaptive_values_ref, _torch_adaptive_max, True),
                                 ("adaptive_max_pool2d_indices", _adaptive_indices_ref, _torch_adaptive_indices,
                                  False)):
        t.append(OpInfo(op, torch=torch, samples=[
            S([_distinct(2, 3, 6, 6)], ref, "even-3x3", {"output_size": (3, 3)}, grad=grad),
            S([_distinct(2, 3, 5, 7)], ref, "uneven-3x4", {"output_size": (3, 4)}, grad=grad),
            S([_distinct(2, 2, 5, 5)], ref, "global", {"output_size": (1, 1)}, grad=grad),
            S([_distinct(2, 2, 3, 3)], ref, "upsample-5x4", {"output_size": (5, 4)}, grad=grad),
            S([_distinct(2, 2, 5, 6, dtype=F64)], ref, "f64", {"output_size": (2, 4)}, grad=grad),
            S([fortran(_distinct(2, 3, 6, 6))], ref, "noncontig", {"output_size": (4, 4)}, grad=grad),
        ]))
    un = _scatter_ref(False, "output_size")
    t.append(OpInfo("max_unpool2d", torch=_torch_scatter(False, "output_size"), samples=[
        S([_randn(2, 3, 3, 3), _unique_indices(2, 3, 3, 3, 6, 6)], un, "3x3-to-6x6", {"output_size": (6, 6)}),
        S([_randn(2, 2, 2, 3), _unique_indices(2, 2, 2, 3, 5, 7)], un, "to-5x7", {"output_size": (5, 7)}),
        S([_randn(1, 2, 3, 3, dtype=F64), _unique_indices(1, 2, 3, 3, 4, 4)], un, "f64", {"output_size": (4, 4)}),
        S([fortran(_randn(2, 3, 3, 3)), _unique_indices(2, 3, 3, 3, 6, 6)], un, "noncontig",
          {"output_size": (6, 6)}),
    ]))
    return t


def vision_backward_table() -> list[OpInfo]:
    sa = _scatter_ref(True, "input_size")
    t = [OpInfo("adaptive_max_pool2d_grad", torch=_torch_scatter(True, "input_size"), samples=[
        S([_randn(2, 3, 3, 3), _any_indices(2, 3, 3, 3, 5, 5)], sa, "repeats-add", {"input_size": (5, 5)}),
        S([_randn(2, 2, 2, 4), _unique_indices(2, 2, 2, 4, 4, 6)], sa, "unique", {"input_size": (4, 6)}),
        S([_randn(1, 2, 3, 2, dtype=F64), _any_indices(1, 2, 3, 2, 3, 3)], sa, "f64", {"input_size": (3, 3)}),
        S([fortran(_randn(2, 3, 3, 3)), _any_indices(2, 3, 3, 3, 4, 4)], sa, "noncontig", {"input_size": (4, 4)}),
    ])]
    ga = _gather_ref
    t.append(OpInfo("max_unpool2d_grad", torch=_torch_gather, samples=[
        S([_randn(2, 3, 6, 6), _any_indices(2, 3, 3, 3, 6, 6)], ga, "6x6-to-3x3"),
        S([_randn(2, 2, 5, 7), _unique_indices(2, 2, 2, 3, 5, 7)], ga, "5x7-to-2x3"),
        S([_randn(1, 2, 4, 4, dtype=F64), _any_indices(1, 2, 3, 3, 4, 4)], ga, "f64"),
        S([fortran(_randn(2, 3, 6, 6)), _any_indices(2, 3, 3, 3, 6, 6)], ga, "noncontig"),
    ]))
    return t
