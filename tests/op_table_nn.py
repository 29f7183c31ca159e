"""The op table's neural-network ops (matmul, conv2d, pooling, batch norm, softmax, ...): one
``OpInfo`` entry per op (see op_table.py). Import ``OP_INFO`` from ``op_table``, which builds the
whole table; this module takes its helpers from there.
"""
from __future__ import annotations

import numpy as np

from op_table import (F32, F64, TF, OpInfo, S, T, distinct, flipped, fortran, ints, promote, randn, strided,
                      uniform)


# ---- neural-network ops ---------------------------------------------------------------------

def _matmul_ref(ins, attrs):
    a, b = ins
    return [np.asarray(np.matmul(a.astype(F64), b.astype(F64))).astype(promote(a, b))]


def linear_ref(ins, attrs):
    x, w = ins[0].astype(F64), ins[1].astype(F64)
    y = np.einsum("...i,oi->...o", x, w)
    if len(ins) == 3:
        y = y + ins[2].astype(F64)
    return [y.astype(promote(*ins))]


def windows(x, kernel, stride, padding, dilation, pad_value):
    """Yield ``(i, j, window)`` for every output position (a plain loop; sizes are tiny)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    for i in range(oh):
        for j in range(ow):
            yield i, j, xp[:, :, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d_ref(ins, attrs):
    x, w = ins[0].astype(F64), ins[1].astype(F64)
    bias = ins[2].astype(F64) if len(ins) == 3 else np.zeros(w.shape[0])
    groups = attrs.get("groups", 1)
    o, cg, kh, kw = w.shape
    per_group = o // groups
    out = {}
    for i, j, win in windows(x, (kh, kw), pair(attrs.get("stride", 1)), pair(attrs.get("padding", 0)),
                              pair(attrs.get("dilation", 1)), 0.0):
        for oc in range(o):
            g = oc // per_group
            out[i, j, oc] = np.einsum("nchw,chw->n", win[:, g * cg:(g + 1) * cg], w[oc]) + bias[oc]
    oh, ow = max(k[0] for k in out) + 1, max(k[1] for k in out) + 1
    y = np.empty((x.shape[0], o, oh, ow))
    for (i, j, oc), v in out.items():
        y[:, oc, i, j] = v
    return [y.astype(promote(*ins))]


def torch_conv2d(ts, a):
    return TF().conv2d(*ts, stride=a["stride"], padding=a["padding"], dilation=a["dilation"],
                       groups=a["groups"])


def pool_ref(kind):
    def ref(ins, attrs):
        x = ins[0].astype(F64)
        k, s, p = pair(attrs["kernel_size"]), pair(attrs["stride"]), pair(attrs.get("padding", 0))
        d = pair(attrs.get("dilation", 1))
        ones = np.ones((1, 1) + x.shape[2:])
        cells = {}
        pad_value = -np.inf if kind == "max" else 0.0
        for (i, j, win), (_, _, real) in zip(windows(x, k, s, p, d, pad_value), windows(ones, k, s, p, d, 0.0)):
            if kind == "max":
                cells[i, j] = win.max(axis=(2, 3))
            elif attrs.get("count_include_pad", True):
                cells[i, j] = win.sum(axis=(2, 3)) / (k[0] * k[1])
            else:  # divide by the number of real (unpadded) pixels in the window
                cells[i, j] = win.sum(axis=(2, 3)) / real.sum()
        oh, ow = max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1
        y = np.empty(x.shape[:2] + (oh, ow))
        for (i, j), v in cells.items():
            y[:, :, i, j] = v
        return [y.astype(ins[0].dtype)]
    return ref


def torch_pool(kind):
    def run(ts, a):
        if kind == "max":
            return TF().max_pool2d(ts[0], a["kernel_size"], a["stride"], a["padding"], a["dilation"])
        return TF().avg_pool2d(ts[0], a["kernel_size"], a["stride"], a["padding"],
                               count_include_pad=a["count_include_pad"])
    return run


def _adaptive_ref(ins, attrs):
    x = ins[0].astype(F64)
    (oh, ow), (h, w) = attrs["output_size"], x.shape[2:]
    y = np.empty(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):  # PyTorch's bins: [floor(i*H/o), ceil((i+1)*H/o))
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            y[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return [y.astype(ins[0].dtype)]


def _torch_adaptive(ts, a):
    return TF().adaptive_avg_pool2d(ts[0], a["output_size"])


def per_channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def bn_ref(ins, attrs):
    x, w, b, mean, var = (a.astype(F64) for a in ins)
    c = lambda v: per_channel(v, x.ndim)  # noqa: E731
    y = (x - c(mean)) / np.sqrt(c(var) + attrs.get("eps", 1e-5)) * c(w) + c(b)
    return [y.astype(ins[0].dtype)]


def torch_batch_norm(ts, a):
    x, w, b, mean, var = ts
    return TF().batch_norm(x, mean, var, w, b, training=False, eps=a["eps"])


def bn_train_ref(ins, attrs):
    x, w, b, rmean, rvar = (a.astype(F64) for a in ins)
    eps, momentum = attrs.get("eps", 1e-5), attrs.get("momentum", 0.1)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    count = x.size // x.shape[1]
    c = lambda v: per_channel(v, x.ndim)  # noqa: E731
    mean = x.mean(axis=axes)
    var = ((x - c(mean)) ** 2).mean(axis=axes)  # biased: normalises the batch
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x - c(mean)) * c(invstd) * c(w) + c(b)
    new_mean = (1 - momentum) * rmean + momentum * mean
    new_var = (1 - momentum) * rvar + momentum * var * count / (count - 1)  # running var is unbiased
    return [a.astype(ins[0].dtype) for a in (y, mean, invstd, new_mean, new_var)]


def torch_batch_norm_train(ts, a):
    x, w, b, rm, rv = ts
    rm, rv = rm.clone(), rv.clone()  # updated in place by torch
    y, mean, invstd = T().native_batch_norm(x, w, b, rm, rv, True, a["momentum"], a["eps"])
    return [y, mean, invstd, rm, rv]


def _dropout_check(ins, attrs, outs):
    x, (y, mask) = ins[0], outs
    p = attrs.get("p", 0.5)
    assert y.dtype == mask.dtype == x.dtype and y.shape == mask.shape == x.shape
    scale = x.dtype.type(1.0 / (1.0 - p))
    assert np.all((mask == 0) | (mask == scale)), "mask values must be 0 or 1/(1-p)"
    np.testing.assert_array_equal(y, x * mask)
    if p == 0:
        assert np.all(mask == 1)
    elif x.size >= 64:  # keeping or dropping all 64+ values is vanishingly unlikely
        assert 0 < np.count_nonzero(mask) < x.size


def _softmax_ref(log):
    def ref(ins, attrs):
        x, dim = np.atleast_1d(ins[0].astype(F64)), attrs["dim"]  # a 0-d input is one class
        z = x - x.max(axis=dim, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=dim, keepdims=True))
        return [(z - lse if log else np.exp(z - lse)).reshape(ins[0].shape).astype(ins[0].dtype)]
    return ref


def _torch_softmax(name):
    return lambda ts, a: getattr(T(), name)(ts[0], a["dim"])  # torch.softmax, torch.log_softmax


def _one_hot_ref(ins, attrs):
    eye = np.eye(attrs["num_classes"])
    return [eye[ins[0]].astype(np.dtype(attrs.get("dtype", "float32")))]


def _torch_one_hot(ts, a):
    return TF().one_hot(ts[0], a["num_classes"]).to(getattr(T(), a["dtype"]))


def bn_inputs(shape, dtype=F32, contiguous=True):
    c = shape[1]
    x = randn(*shape, dtype=dtype) * 2 + 0.5
    params = [uniform(0.5, 1.5, c, dtype=dtype), randn(c, dtype=dtype), randn(c, dtype=dtype) * 0.1,
              uniform(0.5, 2.0, c, dtype=dtype)]
    return [x if contiguous else fortran(x)] + params


def _embedding_ref(ins, attrs):
    indices, weight = ins
    return [np.take(weight, indices, axis=0)]  # PyTorch's F.embedding: the selected rows, copied


def _embedding():
    """(indices, weight): indices lead, so their first dim becomes the symbolic batch dim."""
    r = _embedding_ref
    return OpInfo("embedding", torch=lambda ts, a: TF().embedding(ts[0], ts[1], padding_idx=a["padding_idx"]), samples=[
        S([ints(0, 7, 3, 5), randn(7, 4)], r, "2d-indices"),
        # padding_idx's row gets no gradient by definition (PyTorch's), which finite differences cannot see
        S([np.array([2, 0, 5, 2]), randn(7, 3)], r, "1d-indices-padding", {"padding_idx": 2}, grad=False),
        S([np.array([[1, 1, 1], [0, 6, 1]]), randn(7, 2)], r, "repeated-rows"),
        S([ints(0, 5, 2, 3, 2), randn(5, 3, dtype=F64)], r, "3d-indices-f64"),
        S([strided(ints(0, 6, 3, 4)), fortran(randn(6, 3))], r, "noncontig"),
        S([ints(0, 9, 1, 4), randn(9, 5)], r, "batch1"),
        S([np.array(3), randn(5, 2)], r, "0d-index", dynamic=False),  # else the weight's rows would be N
    ])


def nn_table():
    conv, mm, lin = conv2d_ref, _matmul_ref, linear_ref
    t = []
    t.append(OpInfo("matmul", torch=lambda ts, a: T().matmul(*ts), samples=[
        S([randn(3, 4), randn(4, 5)], mm, "2d"),
        S([randn(2, 3, 4), randn(4, 5)], mm, "batched-2d-rhs"),
        S([randn(2, 3, 4), randn(1, 4, 2)], mm, "batch-broadcast"),
        S([randn(4), randn(4, 3)], mm, "1d-lhs"),
        S([randn(3, 4), randn(4)], mm, "1d-rhs"),
        S([randn(4), randn(4)], mm, "1d-1d"),
        S([randn(3, 4, dtype=F64), randn(4, 2, dtype=F64)], mm, "f64"),
        S([fortran(randn(3, 4)), fortran(randn(4, 5))], mm, "noncontig"),
        S([randn(1, 3, 4), strided(randn(4, 2))], mm, "batch1"),
        S([ints(-3, 4, 3, 4), ints(-3, 4, 4, 2)], mm, "int64", grad=False),
    ]))
    t.append(OpInfo("linear", torch=lambda ts, a: TF().linear(*ts), samples=[
        S([randn(3, 4), randn(5, 4), randn(5)], lin, "bias"),
        S([randn(3, 4), randn(5, 4)], lin, "no-bias"),
        S([randn(2, 3, 4), randn(5, 4), randn(5)], lin, "3d-input"),
        S([randn(4), randn(2, 4), randn(2)], lin, "1d-input", dynamic=False),
        S([randn(3, 4, dtype=F64), randn(2, 4, dtype=F64), randn(2, dtype=F64)], lin, "f64"),
        S([randn(3, 4), fortran(randn(5, 4)), strided(randn(5))], lin, "noncontig-weight"),
        S([randn(1, 4), randn(6, 4), randn(6)], lin, "batch1"),
    ]))
    x = randn(2, 3, 6, 6)
    t.append(OpInfo("conv2d", torch=torch_conv2d, samples=[
        S([x, randn(4, 3, 3, 3), randn(4)], conv, "3x3-bias"),
        S([x, randn(4, 3, 3, 3)], conv, "no-bias"),
        S([x, randn(4, 3, 3, 3), randn(4)], conv, "stride2", {"stride": (2, 2)}),
        S([x, randn(4, 3, 3, 3), randn(4)], conv, "padding1", {"padding": (1, 1)}),
        S([x, randn(4, 3, 3, 3), randn(4)], conv, "dilation2", {"dilation": (2, 2)}),
        S([x, randn(4, 3, 2, 3), randn(4)], conv, "asymmetric",
          {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)}),
        S([randn(2, 4, 5, 5), randn(6, 2, 3, 3), randn(6)], conv, "groups2", {"groups": 2, "padding": (1, 1)}),
        S([randn(2, 3, 5, 5), randn(3, 1, 3, 3), randn(3)], conv, "depthwise", {"groups": 3}),
        S([x, randn(5, 3, 1, 1), randn(5)], conv, "1x1"),
        S([randn(2, 2, 7, 7), randn(3, 2, 3, 3), randn(3)], conv, "stride-pad-dilation",
          {"stride": (2, 2), "padding": (2, 2), "dilation": (2, 2)}),
        S([randn(2, 3, 5, 5, dtype=F64), randn(4, 3, 3, 3, dtype=F64), randn(4, dtype=F64)], conv, "f64",
          {"padding": (1, 1)}),
        S([fortran(x), fortran(randn(4, 3, 3, 3)), randn(4)], conv, "noncontig-transposed"),
        S([flipped(x), randn(4, 3, 3, 3), randn(4)], conv, "noncontig-negative-strides", {"stride": (2, 1)}),
        S([randn(1, 3, 4, 4), randn(2, 3, 3, 3), randn(2)], conv, "batch1", {"padding": (1, 1)}),
        # depthwise has its own kernels: stride 1 (wide rows of the padded image) and strided windows
        S([randn(2, 4, 6, 5), randn(4, 1, 3, 3), randn(4)], conv, "depthwise-pad1-bias", {"groups": 4, "padding": (1, 1)}),
        S([randn(2, 3, 7, 7), randn(3, 1, 3, 3)], conv, "depthwise-stride2-pad1",
          {"groups": 3, "stride": (2, 2), "padding": (1, 1)}),
        S([randn(2, 3, 9, 8), randn(3, 1, 3, 2), randn(3)], conv, "depthwise-dilated-asymmetric",
          {"groups": 3, "padding": (2, 1), "dilation": (2, 2)}),
    ]))
    mp, ap = pool_ref("max"), pool_ref("avg")
    d = distinct(2, 3, 6, 6)
    t.append(OpInfo("max_pool2d", torch=torch_pool("max"), samples=[
        S([d], mp, "k2s2", {"kernel_size": (2, 2), "stride": (2, 2)}),
        S([d], mp, "k3s1p1", {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
        S([d], mp, "asymmetric", {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0)}),
        S([distinct(2, 2, 7, 7)], mp, "dilation2", {"kernel_size": (2, 2), "stride": (1, 1), "dilation": (2, 2)}),
        S([-np.abs(distinct(1, 2, 4, 4)) - 1], mp, "negative-values-padded",
          {"kernel_size": (2, 2), "stride": (2, 2), "padding": (1, 1)}),
        S([distinct(2, 3, 4, 4, dtype=F64)], mp, "f64", {"kernel_size": (2, 2), "stride": (2, 2)}),
        S([fortran(d)], mp, "noncontig-transposed", {"kernel_size": (2, 2), "stride": (2, 2)}),
        S([flipped(d)], mp, "noncontig-negative-strides", {"kernel_size": (3, 3), "stride": (2, 2)}),
        S([distinct(1, 2, 5, 5)], mp, "batch1", {"kernel_size": (2, 2), "stride": (1, 1)}),
    ]))
    t.append(OpInfo("avg_pool2d", torch=torch_pool("avg"), samples=[
        S([x], ap, "k2s2", {"kernel_size": (2, 2), "stride": (2, 2)}),
        S([x], ap, "k3s2p1-include-pad", {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
        S([x], ap, "k3s2p1-exclude-pad",
          {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}),
        S([x], ap, "asymmetric-exclude-pad",
          {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1), "count_include_pad": False}),
        S([randn(2, 3, 5, 5, dtype=F64)], ap, "f64", {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
        S([fortran(x)], ap, "noncontig-transposed", {"kernel_size": (2, 2), "stride": (2, 2)}),
        S([strided(x)], ap, "noncontig-strided", {"kernel_size": (3, 3), "stride": (3, 3)}),
        S([randn(1, 2, 4, 4)], ap, "batch1", {"kernel_size": (2, 2), "stride": (1, 1)}),
    ]))
    t.append(OpInfo("adaptive_avg_pool2d", torch=_torch_adaptive, samples=[
        S([x], _adaptive_ref, "even-3x3", {"output_size": (3, 3)}),
        S([randn(2, 3, 5, 7)], _adaptive_ref, "uneven-3x4", {"output_size": (3, 4)}),
        S([x], _adaptive_ref, "global-1x1", {"output_size": (1, 1)}),
        S([randn(2, 2, 5, 4)], _adaptive_ref, "2x1", {"output_size": (2, 1)}),
        S([randn(2, 2, 3, 3)], _adaptive_ref, "upsample-5x4", {"output_size": (5, 4)}),
        S([randn(2, 3, 5, 5, dtype=F64)], _adaptive_ref, "f64", {"output_size": (2, 3)}),
        S([fortran(x)], _adaptive_ref, "noncontig", {"output_size": (4, 4)}),
        S([randn(1, 3, 4, 4)], _adaptive_ref, "batch1", {"output_size": (2, 2)}),
    ]))
    t.append(OpInfo("batch_norm", torch=torch_batch_norm, samples=[
        S(bn_inputs((2, 3, 4, 4)), bn_ref, "4d"),
        S(bn_inputs((4, 3)), bn_ref, "2d"),
        S(bn_inputs((2, 3, 5)), bn_ref, "3d-eps", {"eps": 1e-3}),
        S(bn_inputs((2, 3, 4, 4), F64), bn_ref, "f64"),
        S(bn_inputs((2, 3, 4, 4), contiguous=False), bn_ref, "noncontig"),
        S(bn_inputs((1, 3, 3, 3)), bn_ref, "batch1"),
    ]))
    t.append(OpInfo("batch_norm_train", torch=torch_batch_norm_train, samples=[
        S(bn_inputs((2, 3, 4, 4)), bn_train_ref, "4d"),
        S(bn_inputs((5, 3)), bn_train_ref, "2d"),
        S(bn_inputs((2, 3, 4)), bn_train_ref, "3d-momentum-eps", {"momentum": 0.3, "eps": 1e-3}),
        S(bn_inputs((2, 3, 4, 4), F64), bn_train_ref, "f64"),
        S(bn_inputs((2, 3, 4, 4), contiguous=False), bn_train_ref, "noncontig"),
        S(bn_inputs((1, 3, 3, 3)), bn_train_ref, "batch1"),
    ]))
    random_mask = "random mask: PyTorch's RNG differs; the samples check the mask's properties instead"
    t.append(OpInfo("dropout", no_torch=random_mask, samples=[
        S([randn(8, 8)], None, "p0.5", {"p": 0.5}, check=_dropout_check, grad=False),
        # grad=True: gradient checks replay the same mask (the plan's RNG state is reset)
        S([randn(4, 16, dtype=F64)], None, "p0.2-f64", {"p": 0.2}, check=_dropout_check),
        S([randn(3, 5)], None, "p0-keeps-all", {"p": 0.0}, check=_dropout_check, grad=False),
        S([fortran(randn(8, 8))], None, "noncontig", {"p": 0.3}, check=_dropout_check, grad=False),
        S([randn(1, 64)], None, "batch1-default-p", check=_dropout_check, grad=False),
        S([randn()], None, "0d", {"p": 0.5}, check=_dropout_check, grad=False),
    ]))
    for op, log in (("softmax", False), ("log_softmax", True)):
        r = _softmax_ref(log)
        t.append(OpInfo(op, torch=_torch_softmax(op), samples=[
            S([randn(3, 5)], r, "last-dim", {"dim": -1}),
            S([randn(3, 5)], r, "dim0", {"dim": 0}),
            S([randn(2, 3, 4)], r, "3d-dim1", {"dim": 1}),
            S([randn(3, 4) * 30 + 50], r, "large-values", {"dim": 1}),
            S([randn(2, 5, dtype=F64)], r, "f64", {"dim": 1}),
            S([fortran(randn(4, 3))], r, "noncontig", {"dim": 1}),
            S([randn(1, 6)], r, "batch1", {"dim": -1}),
            S([randn()], r, "0d", {"dim": 0}),
        ]))
    t.append(_embedding())
    oh = _one_hot_ref
    t.append(OpInfo("one_hot", torch=_torch_one_hot, samples=[
        S([np.array([0, 3, 1, 2, 3])], oh, "f32", {"num_classes": 4}, grad=False),
        S([ints(0, 5, 2, 3)], oh, "2d-f64", {"num_classes": 5, "dtype": "float64"}, grad=False),
        S([ints(0, 3, 4)], oh, "int64", {"num_classes": 3, "dtype": "int64"}, grad=False),
        S([ints(0, 3, 4)], oh, "bool", {"num_classes": 3, "dtype": "bool"}, grad=False),
        S([strided(ints(0, 4, 6))], oh, "noncontig", {"num_classes": 4}, grad=False),
        S([np.array([2])], oh, "batch1", {"num_classes": 3}, grad=False),
        S([np.array(2)], oh, "0d", {"num_classes": 3}, grad=False),
    ]))
    return t
