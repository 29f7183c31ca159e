"""The op table's neural-network and backward ops (conv2d, pooling, batch norm, ... and the
``*_grad`` ops autodiff emits). Import ``OP_TABLE`` from ``op_table``, which builds the whole table;
this module takes its helpers from there.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, S, distinct, flipped, fortran, ints, nonzero, promote, randn, slice_ref, strided, uniform


# ---- neural-network ops ---------------------------------------------------------------------

def _matmul_ref(ins, attrs):
    a, b = ins
    return [np.asarray(np.matmul(a.astype(F64), b.astype(F64))).astype(promote(a, b))]


def _linear_ref(ins, attrs):
    x, w = ins[0].astype(F64), ins[1].astype(F64)
    y = np.einsum("...i,oi->...o", x, w)
    if len(ins) == 3:
        y = y + ins[2].astype(F64)
    return [y.astype(promote(*ins))]


def _windows(x, kernel, stride, padding, dilation, pad_value):
    """Yield ``(i, j, window)`` for every output position (a plain loop; sizes are tiny)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    for i in range(oh):
        for j in range(ow):
            yield i, j, xp[:, :, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _conv2d_ref(ins, attrs):
    x, w = ins[0].astype(F64), ins[1].astype(F64)
    bias = ins[2].astype(F64) if len(ins) == 3 else np.zeros(w.shape[0])
    groups = attrs.get("groups", 1)
    o, cg, kh, kw = w.shape
    per_group = o // groups
    out = {}
    for i, j, win in _windows(x, (kh, kw), _pair(attrs.get("stride", 1)), _pair(attrs.get("padding", 0)),
                              _pair(attrs.get("dilation", 1)), 0.0):
        for oc in range(o):
            g = oc // per_group
            out[i, j, oc] = np.einsum("nchw,chw->n", win[:, g * cg:(g + 1) * cg], w[oc]) + bias[oc]
    oh, ow = max(k[0] for k in out) + 1, max(k[1] for k in out) + 1
    y = np.empty((x.shape[0], o, oh, ow))
    for (i, j, oc), v in out.items():
        y[:, oc, i, j] = v
    return [y.astype(promote(*ins))]


def _pool_ref(kind):
    def ref(ins, attrs):
        x = ins[0].astype(F64)
        k, s, p = _pair(attrs["kernel_size"]), _pair(attrs["stride"]), _pair(attrs.get("padding", 0))
        d = _pair(attrs.get("dilation", 1))
        ones = np.ones((1, 1) + x.shape[2:])
        cells = {}
        pad_value = -np.inf if kind == "max" else 0.0
        for (i, j, win), (_, _, real) in zip(_windows(x, k, s, p, d, pad_value), _windows(ones, k, s, p, d, 0.0)):
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


def _per_channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _bn_ref(ins, attrs):
    x, w, b, mean, var = (a.astype(F64) for a in ins)
    c = lambda v: _per_channel(v, x.ndim)  # noqa: E731
    y = (x - c(mean)) / np.sqrt(c(var) + attrs.get("eps", 1e-5)) * c(w) + c(b)
    return [y.astype(ins[0].dtype)]


def _bn_train_ref(ins, attrs):
    x, w, b, rmean, rvar = (a.astype(F64) for a in ins)
    eps, momentum = attrs.get("eps", 1e-5), attrs.get("momentum", 0.1)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    count = x.size // x.shape[1]
    c = lambda v: _per_channel(v, x.ndim)  # noqa: E731
    mean = x.mean(axis=axes)
    var = ((x - c(mean)) ** 2).mean(axis=axes)  # biased: normalises the batch
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x - c(mean)) * c(invstd) * c(w) + c(b)
    new_mean = (1 - momentum) * rmean + momentum * mean
    new_var = (1 - momentum) * rvar + momentum * var * count / (count - 1)  # running var is unbiased
    return [a.astype(ins[0].dtype) for a in (y, mean, invstd, new_mean, new_var)]


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


def _one_hot_ref(ins, attrs):
    eye = np.eye(attrs["num_classes"])
    return [eye[ins[0]].astype(np.dtype(attrs.get("dtype", "float32")))]


def _bn_inputs(shape, dtype=F32, contiguous=True):
    c = shape[1]
    x = randn(*shape, dtype=dtype) * 2 + 0.5
    params = [uniform(0.5, 1.5, c, dtype=dtype), randn(c, dtype=dtype), randn(c, dtype=dtype) * 0.1,
              uniform(0.5, 2.0, c, dtype=dtype)]
    return [x if contiguous else fortran(x)] + params


def _embedding_ref(ins, attrs):
    indices, weight = ins
    return [np.take(weight, indices, axis=0)]  # PyTorch's F.embedding: the selected rows, copied


def _embedding_samples():
    """(indices, weight): indices lead, so their first dim becomes the symbolic batch dim."""
    r = _embedding_ref
    return [
        S([ints(0, 7, 3, 5), randn(7, 4)], r, "2d-indices"),
        # padding_idx's row gets no gradient by definition (PyTorch's), which finite differences cannot see
        S([np.array([2, 0, 5, 2]), randn(7, 3)], r, "1d-indices-padding", {"padding_idx": 2}, grad=False),
        S([np.array([[1, 1, 1], [0, 6, 1]]), randn(7, 2)], r, "repeated-rows"),
        S([ints(0, 5, 2, 3, 2), randn(5, 3, dtype=F64)], r, "3d-indices-f64"),
        S([strided(ints(0, 6, 3, 4)), fortran(randn(6, 3))], r, "noncontig"),
        S([ints(0, 9, 1, 4), randn(9, 5)], r, "batch1"),
        S([np.array(3), randn(5, 2)], r, "0d-index", dynamic=False),  # else the weight's rows would be N
    ]


def nn_table():
    conv, mm, lin = _conv2d_ref, _matmul_ref, _linear_ref
    t = {}
    t["matmul"] = [
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
        S([ints(-3, 4, 3, 4), randn(4, 2)], mm, "int64-f32-promotes"),
    ]
    t["linear"] = [
        S([randn(3, 4), randn(5, 4), randn(5)], lin, "bias"),
        S([randn(3, 4), randn(5, 4)], lin, "no-bias"),
        S([randn(2, 3, 4), randn(5, 4), randn(5)], lin, "3d-input"),
        S([randn(4), randn(2, 4), randn(2)], lin, "1d-input", dynamic=False),
        S([randn(3, 4, dtype=F64), randn(2, 4, dtype=F64), randn(2, dtype=F64)], lin, "f64"),
        S([randn(3, 4), fortran(randn(5, 4)), strided(randn(5))], lin, "noncontig-weight"),
        S([randn(1, 4), randn(6, 4), randn(6)], lin, "batch1"),
    ]
    x = randn(2, 3, 6, 6)
    t["conv2d"] = [
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
    ]
    mp, ap = _pool_ref("max"), _pool_ref("avg")
    d = distinct(2, 3, 6, 6)
    t["max_pool2d"] = [
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
    ]
    t["avg_pool2d"] = [
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
    ]
    t["adaptive_avg_pool2d"] = [
        S([x], _adaptive_ref, "even-3x3", {"output_size": (3, 3)}),
        S([randn(2, 3, 5, 7)], _adaptive_ref, "uneven-3x4", {"output_size": (3, 4)}),
        S([x], _adaptive_ref, "global-1x1", {"output_size": (1, 1)}),
        S([randn(2, 2, 5, 4)], _adaptive_ref, "2x1", {"output_size": (2, 1)}),
        S([randn(2, 2, 3, 3)], _adaptive_ref, "upsample-5x4", {"output_size": (5, 4)}),
        S([randn(2, 3, 5, 5, dtype=F64)], _adaptive_ref, "f64", {"output_size": (2, 3)}),
        S([fortran(x)], _adaptive_ref, "noncontig", {"output_size": (4, 4)}),
        S([randn(1, 3, 4, 4)], _adaptive_ref, "batch1", {"output_size": (2, 2)}),
    ]
    t["batch_norm"] = [
        S(_bn_inputs((2, 3, 4, 4)), _bn_ref, "4d"),
        S(_bn_inputs((4, 3)), _bn_ref, "2d"),
        S(_bn_inputs((2, 3, 5)), _bn_ref, "3d-eps", {"eps": 1e-3}),
        S(_bn_inputs((2, 3, 4, 4), F64), _bn_ref, "f64"),
        S(_bn_inputs((2, 3, 4, 4), contiguous=False), _bn_ref, "noncontig"),
        S(_bn_inputs((1, 3, 3, 3)), _bn_ref, "batch1"),
    ]
    t["batch_norm_train"] = [
        S(_bn_inputs((2, 3, 4, 4)), _bn_train_ref, "4d"),
        S(_bn_inputs((5, 3)), _bn_train_ref, "2d"),
        S(_bn_inputs((2, 3, 4)), _bn_train_ref, "3d-momentum-eps", {"momentum": 0.3, "eps": 1e-3}),
        S(_bn_inputs((2, 3, 4, 4), F64), _bn_train_ref, "f64"),
        S(_bn_inputs((2, 3, 4, 4), contiguous=False), _bn_train_ref, "noncontig"),
        S(_bn_inputs((1, 3, 3, 3)), _bn_train_ref, "batch1"),
    ]
    t["dropout"] = [
        S([randn(8, 8)], None, "p0.5", {"p": 0.5}, check=_dropout_check, grad=False),
        # grad=True: gradient checks replay the same mask (the plan's RNG state is reset)
        S([randn(4, 16, dtype=F64)], None, "p0.2-f64", {"p": 0.2}, check=_dropout_check),
        S([randn(3, 5)], None, "p0-keeps-all", {"p": 0.0}, check=_dropout_check, grad=False),
        S([fortran(randn(8, 8))], None, "noncontig", {"p": 0.3}, check=_dropout_check, grad=False),
        S([randn(1, 64)], None, "batch1-default-p", check=_dropout_check, grad=False),
        S([randn()], None, "0d", {"p": 0.5}, check=_dropout_check, grad=False),
    ]
    for op, log in (("softmax", False), ("log_softmax", True)):
        r = _softmax_ref(log)
        t[op] = [
            S([randn(3, 5)], r, "last-dim", {"dim": -1}),
            S([randn(3, 5)], r, "dim0", {"dim": 0}),
            S([randn(2, 3, 4)], r, "3d-dim1", {"dim": 1}),
            S([randn(3, 4) * 30 + 50], r, "large-values", {"dim": 1}),
            S([randn(2, 5, dtype=F64)], r, "f64", {"dim": 1}),
            S([fortran(randn(4, 3))], r, "noncontig", {"dim": 1}),
            S([randn(1, 6)], r, "batch1", {"dim": -1}),
            S([randn()], r, "0d", {"dim": 0}),
        ]
    t["embedding"] = _embedding_samples()
    oh = _one_hot_ref
    t["one_hot"] = [
        S([np.array([0, 3, 1, 2, 3])], oh, "f32", {"num_classes": 4}, grad=False),
        S([ints(0, 5, 2, 3)], oh, "2d-f64", {"num_classes": 5, "dtype": "float64"}, grad=False),
        S([ints(0, 3, 4)], oh, "int64", {"num_classes": 3, "dtype": "int64"}, grad=False),
        S([ints(0, 3, 4)], oh, "bool", {"num_classes": 3, "dtype": "bool"}, grad=False),
        S([strided(ints(0, 4, 6))], oh, "noncontig", {"num_classes": 4}, grad=False),
        S([np.array([2])], oh, "batch1", {"num_classes": 3}, grad=False),
        S([np.array(2)], oh, "0d", {"num_classes": 3}, grad=False),
    ]
    return t


# ---- backward ops (what autodiff emits) --------------------------------------------------------

def _act_grad_ref(kind):
    def ref(ins, attrs):
        g, y = (a.astype(F64) for a in ins)
        slope = {"relu": lambda: (y > 0).astype(F64), "sigmoid": lambda: y * (1 - y), "tanh": lambda: 1 - y * y}
        return [(g * slope[kind]()).astype(promote(*ins))]
    return ref


def _reduce_grad_ref(ins, attrs):
    g, shape = ins[0].astype(F64), tuple(attrs["shape"])
    dims = sorted(d % len(shape) for d in attrs["dims"])
    if not attrs["keepdim"]:
        for d in dims:
            g = np.expand_dims(g, d)
    out = np.broadcast_to(g, shape)
    if attrs["mean"]:
        out = out / np.prod([shape[d] for d in dims])
    return [out.astype(ins[0].dtype)]


def _slice_grad_ref(ins, attrs):
    """Scatter through np.ix_ index lists into zeros of the input shape."""
    g, shape, drop = ins[0], tuple(attrs["shape"]), set(attrs.get("drop", ()))
    idx = [[start % shape[axis]] if axis in drop else np.arange(shape[axis])[start:stop:step]
           for axis, (start, stop, step) in enumerate(attrs["slices"])]
    out = np.zeros(shape, g.dtype)
    out[np.ix_(*idx)] = g.reshape([len(i) for i in idx])
    return [out]


def _window_attrs(attrs):
    return (_pair(attrs.get("stride", 1)), _pair(attrs.get("padding", 0)), _pair(attrs.get("dilation", 1)),
            attrs.get("groups", 1))


def _conv_grad_input_ref(ins, attrs):
    """Scatter every output position's gradient back through the kernel (the adjoint loop)."""
    g, w = ins[0].astype(F64), ins[1].astype(F64)
    (sh, sw), (ph, pw), (dh, dw), groups = _window_attrs(attrs)
    n, c, h, wd = attrs["input_shape"]
    o, cg, kh, kw = w.shape
    gx = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            for oc in range(o):
                grp = oc // (o // groups)
                gx[:, grp * cg:(grp + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                   j * sw:j * sw + dw * (kw - 1) + 1:dw] += g[:, oc, i, j, None, None, None] * w[oc]
    return [gx[:, :, ph:ph + h, pw:pw + wd].astype(ins[0].dtype)]


def _conv_grad_weight_ref(ins, attrs):
    g, x = ins[0].astype(F64), ins[1].astype(F64)
    stride, padding, dilation, groups = _window_attrs(attrs)
    o, cg, kh, kw = attrs["weight_shape"]
    gw = np.zeros((o, cg, kh, kw))
    for i, j, win in _windows(x, (kh, kw), stride, padding, dilation, 0.0):
        for oc in range(o):
            grp = oc // (o // groups)
            gw[oc] += np.einsum("n,nchw->chw", g[:, oc, i, j], win[:, grp * cg:(grp + 1) * cg])
    return [gw.astype(ins[0].dtype)]


def _max_pool_grad_ref(ins, attrs):
    """Each window's gradient goes to its maximum (inputs have no ties)."""
    g, x = ins[0].astype(F64), ins[1].astype(F64)
    (kh, kw), (sh, sw), (ph, pw) = _pair(attrs["kernel_size"]), _pair(attrs["stride"]), _pair(attrs.get("padding", 0))
    dh, dw = _pair(attrs.get("dilation", 1))
    n, c, h, w = x.shape
    gx = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    nn_, cc = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    for i, j, win in _windows(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), -np.inf):
        ki, kj = np.divmod(win.reshape(n, c, -1).argmax(axis=-1), kw)
        np.add.at(gx, (nn_, cc, i * sh + ki * dh, j * sw + kj * dw), g[:, :, i, j])
    return [gx[:, :, ph:ph + h, pw:pw + w].astype(ins[0].dtype)]


def _avg_pool_grad_ref(ins, attrs):
    g = ins[0].astype(F64)
    (kh, kw), (sh, sw), (ph, pw) = _pair(attrs["kernel_size"]), _pair(attrs["stride"]), _pair(attrs.get("padding", 0))
    n, c, h, w = attrs["input_shape"]
    real = np.pad(np.ones((h, w)), ((ph, ph), (pw, pw)))
    gx = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
            count = kh * kw if attrs.get("count_include_pad", True) else real[rows, cols].sum()
            gx[:, :, rows, cols] += g[:, :, i, j, None, None] / count
    return [gx[:, :, ph:ph + h, pw:pw + w].astype(ins[0].dtype)]


def _adaptive_grad_ref(ins, attrs):
    g = ins[0].astype(F64)
    (h, w), (oh, ow) = attrs["input_size"], g.shape[2:]
    gx = np.zeros(g.shape[:2] + (h, w))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            gx[:, :, h0:h1, w0:w1] += g[:, :, i, j, None, None] / ((h1 - h0) * (w1 - w0))
    return [gx.astype(ins[0].dtype)]


def _bn_grad_ref(ins, attrs):
    g, x, w, mean, invstd = (a.astype(F64) for a in ins)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    m = x.size // x.shape[1]
    c = lambda v: _per_channel(v, x.ndim)  # noqa: E731
    xhat = (x - c(mean)) * c(invstd)
    gb = g.sum(axis=axes)
    gw = (g * xhat).sum(axis=axes)
    gx = c(w * invstd) * (g - c(gb) / m - xhat * c(gw) / m)
    return [gx.astype(ins[1].dtype), gw.astype(ins[2].dtype), gb.astype(ins[2].dtype)]


def _bn_grad_inputs(shape, dtype=F32, contiguous=True):
    x = randn(*shape, dtype=F64) * 2 + 0.5
    axes = tuple(i for i in range(len(shape)) if i != 1)
    mean, invstd = x.mean(axis=axes), 1.0 / np.sqrt(x.var(axis=axes) + 1e-5)
    g = randn(*shape, dtype=dtype)
    arrays = [g, x.astype(dtype), uniform(0.5, 1.5, shape[1], dtype=dtype), mean.astype(dtype), invstd.astype(dtype)]
    if not contiguous:
        arrays[:2] = [fortran(arrays[0]), strided(arrays[1])]
    return arrays


def _conv_grad_samples(ref, second, attrs_key):
    """conv2d_grad_input (second = weight) / conv2d_grad_weight (second = x) samples."""
    cases = [  # (x shape, w shape, attrs, desc)
        ((2, 3, 6, 6), (4, 3, 3, 3), {}, "3x3"),
        ((2, 3, 7, 7), (4, 3, 3, 3), {"stride": (2, 2)}, "stride2"),
        ((2, 3, 6, 6), (4, 3, 3, 3), {"stride": (2, 2)}, "stride2-uncovered-edge"),
        ((2, 3, 5, 5), (4, 3, 3, 3), {"padding": (1, 1)}, "padding1"),
        ((2, 2, 7, 7), (3, 2, 3, 3), {"dilation": (2, 2), "padding": (1, 2)}, "dilation2"),
        ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": (1, 1)}, "groups2"),
        ((2, 3, 6, 5), (4, 3, 2, 3), {"stride": (1, 2), "padding": (1, 0)}, "asymmetric"),
        ((2, 3, 5, 5), (4, 3, 3, 3), {}, "f64"),
        ((2, 3, 5, 5), (4, 3, 3, 3), {"padding": (1, 1)}, "noncontig"),
        ((1, 3, 4, 4), (2, 3, 3, 3), {"padding": (1, 1)}, "batch1"),
    ]
    samples = []
    for xs, ws, attrs, desc in cases:
        dt = F64 if desc == "f64" else F32
        y = _conv2d_ref([np.zeros(xs), np.zeros(ws)], attrs)[0]
        g, other = randn(*y.shape, dtype=dt), randn(*(ws if second == "w" else xs), dtype=dt)
        if desc == "noncontig":
            g, other = fortran(g), flipped(other)
        full = {**attrs, attrs_key: xs if second == "w" else ws}
        traced = {**full, attrs_key: ("N",) + xs[1:]} if second == "w" else None
        samples.append(S([g, other], ref, desc, full, traced_attrs=traced))
    return samples


def _embedding_grad_ref(ins, attrs):
    g, indices = ins[0].astype(F64), ins[1]
    out = np.zeros((attrs["num_embeddings"], g.shape[-1]))
    for index, row in zip(indices.reshape(-1), g.reshape(-1, g.shape[-1])):  # repeated rows add up
        out[index] += row
    if attrs.get("padding_idx") is not None:
        out[attrs["padding_idx"]] = 0.0
    return [out.astype(ins[0].dtype)]


def _embedding_grad_samples():
    r = _embedding_grad_ref
    return [
        S([randn(3, 5, 4), ints(0, 7, 3, 5)], r, "2d-indices", {"num_embeddings": 7}),
        S([randn(4, 3), np.array([2, 0, 2, 5])], r, "padding-row-zero", {"num_embeddings": 6, "padding_idx": 2}),
        S([randn(2, 3, 2), np.array([[1, 1, 1], [0, 6, 1]])], r, "repeated-rows-add", {"num_embeddings": 7}),
        S([randn(2, 3, 2, 3, dtype=F64), ints(0, 5, 2, 3, 2)], r, "f64", {"num_embeddings": 5, "padding_idx": 0}),
        S([fortran(randn(3, 4)), strided(ints(0, 6, 3))], r, "noncontig", {"num_embeddings": 6}),
        S([randn(1, 4, 5), ints(0, 9, 1, 4)], r, "batch1", {"num_embeddings": 9}),
        S([randn(2), np.array(3)], r, "0d-index", {"num_embeddings": 4}, dynamic=False),
    ]


def backward_table():
    t = {}
    for kind in ("relu", "sigmoid", "tanh"):
        r = _act_grad_ref(kind)
        y = (lambda *s, dtype=F32: nonzero(*s, dtype=dtype)) if kind == "relu" else \
            (lambda *s, dtype=F32: uniform(-0.9, 0.9, *s, dtype=dtype)) if kind == "tanh" else \
            (lambda *s, dtype=F32: uniform(0.05, 0.95, *s, dtype=dtype))
        t[f"{kind}_grad"] = [
            S([randn(3, 4), y(3, 4)], r, "2d"),
            S([randn(2, 3, 4, dtype=F64), y(2, 3, 4, dtype=F64)], r, "f64"),
            S([fortran(randn(4, 3)), strided(y(4, 3))], r, "noncontig"),
            S([randn(1, 5), y(1, 5)], r, "batch1"),
            S([randn(), y()], r, "0d"),
        ]
    rg = _reduce_grad_ref
    t["reduce_grad"] = [
        S([randn(2, 4)], rg, "sum-dim1", {"shape": (2, 3, 4), "dims": (1,), "keepdim": False, "mean": False},
          traced_attrs={"shape": ("N", 3, 4), "dims": (1,), "keepdim": False, "mean": False}),
        S([randn(2, 1, 4)], rg, "mean-dim1-keepdim", {"shape": (2, 3, 4), "dims": (1,), "keepdim": True, "mean": True},
          traced_attrs={"shape": ("N", 3, 4), "dims": (1,), "keepdim": True, "mean": True}),
        S([randn(3)], rg, "mean-dims02", {"shape": (2, 3, 4), "dims": (0, 2), "keepdim": False, "mean": True},
          dynamic=False),
        S([np.array(1.5, F32)], rg, "sum-all", {"shape": (2, 3), "dims": (0, 1), "keepdim": False, "mean": False}),
        S([randn(3, dtype=F64)], rg, "f64-neg-dim", {"shape": (3, 5), "dims": (-1,), "keepdim": False, "mean": True},
          traced_attrs={"shape": ("N", 5), "dims": (-1,), "keepdim": False, "mean": True}),
        S([strided(randn(3, 1))], rg, "noncontig", {"shape": (3, 4), "dims": (1,), "keepdim": True, "mean": False},
          traced_attrs={"shape": ("N", 4), "dims": (1,), "keepdim": True, "mean": False}),
        S([randn(1)], rg, "batch1", {"shape": (1, 4), "dims": (1,), "keepdim": False, "mean": True},
          traced_attrs={"shape": ("N", 4), "dims": (1,), "keepdim": False, "mean": True}),
    ]
    full = (None, None, 1)
    slice_cases = [  # (input shape, slices, drop, desc, dtype)
        ((3, 5), [full, (1, 3, 1)], (), "range", F32),
        ((3, 5), [full, (None, None, 2)], (), "step2", F32),
        ((3, 5), [full, (4, 0, -2)], (), "negative-step", F32),
        ((3, 5), [full, (-1, None, 1)], (1,), "int-index-dropped", F32),
        ((3, 5), [full, (3, 1, 1)], (), "empty", F32),
        ((2, 3, 4), [full, (0, 1, 1), (1, None, 2)], (1,), "f64-3d", F64),
        ((3, 5), [full, (1, None, 2)], (), "noncontig", F32),
        ((1, 5), [full, (None, None, 3)], (), "batch1", F32),
    ]
    t["slice_grad"] = []
    for shape, slices, drop, desc, dt in slice_cases:
        out_shape = slice_ref([np.zeros(shape)], {"slices": slices, "drop": drop})[0].shape
        g = randn(*out_shape, dtype=dt)
        attrs = {"slices": slices, "drop": drop, "shape": shape}
        t["slice_grad"].append(S([fortran(g) if desc == "noncontig" else g], _slice_grad_ref, desc, attrs,
                                 traced_attrs={**attrs, "shape": ("N",) + shape[1:]}))
    # x[2] of a vector: the gradient arriving is 0-d
    t["slice_grad"].append(S([randn()], _slice_grad_ref, "0d-from-index", {"slices": [(2, None, 1)], "drop": (0,),
                                                                           "shape": (5,)}, dynamic=False))
    t["conv2d_grad_input"] = _conv_grad_samples(_conv_grad_input_ref, "w", "input_shape")
    t["conv2d_grad_weight"] = _conv_grad_samples(_conv_grad_weight_ref, "x", "weight_shape")
    mp = []
    for xs, attrs, desc, dt in [
        ((2, 3, 6, 6), {"kernel_size": (2, 2), "stride": (2, 2)}, "k2s2", F32),
        ((2, 2, 5, 5), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}, "overlapping-padded", F32),
        ((2, 2, 7, 6), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)},
         "asymmetric-dilated", F32),
        ((2, 3, 4, 4), {"kernel_size": (2, 2), "stride": (1, 1)}, "f64", F64),
        ((2, 3, 6, 6), {"kernel_size": (3, 3), "stride": (2, 2)}, "noncontig", F32),
        ((1, 2, 4, 4), {"kernel_size": (2, 2), "stride": (2, 2)}, "batch1", F32),
    ]:
        x = distinct(*xs, dtype=dt)
        y = _pool_ref("max")([x], attrs)[0]
        g = randn(*y.shape, dtype=dt)
        if desc == "noncontig":
            g, x = fortran(g), flipped(x)
        mp.append(S([g, x, y], _max_pool_grad_ref, desc, attrs, grad=False))  # the y == x test is not smooth
    t["max_pool2d_grad"] = mp
    ap = []
    for xs, attrs, desc, dt in [
        ((2, 3, 6, 6), {"kernel_size": (2, 2), "stride": (2, 2)}, "k2s2", F32),
        ((2, 2, 5, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}, "include-pad", F32),
        ((2, 2, 5, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False},
         "exclude-pad", F32),
        ((2, 2, 5, 6), {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1), "count_include_pad": False},
         "asymmetric-exclude-pad", F32),
        ((2, 3, 4, 4), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}, "f64", F64),
        ((2, 3, 6, 6), {"kernel_size": (3, 3), "stride": (3, 3)}, "noncontig", F32),
        ((1, 2, 4, 4), {"kernel_size": (2, 2), "stride": (1, 1)}, "batch1", F32),
    ]:
        y_shape = _pool_ref("avg")([np.zeros(xs)], attrs)[0].shape
        g = randn(*y_shape, dtype=dt)
        full_attrs = {**attrs, "input_shape": xs}
        ap.append(S([fortran(g) if desc == "noncontig" else g], _avg_pool_grad_ref, desc, full_attrs,
                    traced_attrs={**full_attrs, "input_shape": ("N",) + xs[1:]}))
    t["avg_pool2d_grad"] = ap
    ag = _adaptive_grad_ref
    t["adaptive_avg_pool2d_grad"] = [
        S([randn(2, 3, 3, 3)], ag, "even", {"input_size": (6, 6)}),
        S([randn(2, 3, 3, 4)], ag, "uneven", {"input_size": (5, 7)}),
        S([randn(2, 3, 1, 1)], ag, "global", {"input_size": (4, 5)}),
        S([randn(2, 2, 5, 4)], ag, "from-upsample", {"input_size": (3, 3)}),
        S([randn(2, 3, 2, 3, dtype=F64)], ag, "f64", {"input_size": (5, 5)}),
        S([fortran(randn(2, 3, 4, 4))], ag, "noncontig", {"input_size": (6, 6)}),
        S([randn(1, 3, 2, 2)], ag, "batch1", {"input_size": (4, 4)}),
    ]
    t["embedding_grad"] = _embedding_grad_samples()
    t["batch_norm_train_grad"] = [
        S(_bn_grad_inputs((2, 3, 4, 4)), _bn_grad_ref, "4d"),
        S(_bn_grad_inputs((5, 3)), _bn_grad_ref, "2d"),
        S(_bn_grad_inputs((2, 3, 4)), _bn_grad_ref, "3d"),
        S(_bn_grad_inputs((2, 3, 4, 4), F64), _bn_grad_ref, "f64"),
        S(_bn_grad_inputs((2, 3, 4, 4), contiguous=False), _bn_grad_ref, "noncontig"),
        S(_bn_grad_inputs((1, 3, 3, 3)), _bn_grad_ref, "batch1"),
    ]
    return t


# ---- fused ops (what the fusion passes emit): references compose the unfused ones -------------

def _linear_relu_ref(ins, attrs):
    return [np.maximum(_linear_ref(ins, attrs)[0], 0)]


def _split_conv_bn(ins):
    """(x, w, [b], gamma, beta, running_mean, running_var) -> (conv inputs, bn params)."""
    return list(ins[:-4]), list(ins[-4:])


def _conv_bn_ref(ins, attrs):
    conv, bn = _split_conv_bn(ins)
    y = _bn_ref([_conv2d_ref(conv, attrs)[0]] + bn, attrs)[0]
    return [np.maximum(y, 0) if attrs.get("relu", False) else y]


def _conv_bn_train_ref(ins, attrs):
    conv, bn = _split_conv_bn(ins)
    conv_out = _conv2d_ref(conv, attrs)[0]
    y, *stats = _bn_train_ref([conv_out] + bn, attrs)
    return [np.maximum(y, 0) if attrs.get("relu", False) else y, conv_out] + stats


def _conv_bn_train_grad_ref(ins, attrs):
    g, x, w, conv_out, y, gamma, mean, invstd = ins
    if attrs["relu"]:
        g = (g * (y > 0)).astype(g.dtype)
    g_conv, g_gamma, g_beta = _bn_grad_ref([g, conv_out, gamma, mean, invstd], attrs)
    outs = [_conv_grad_input_ref([g_conv, w], {**attrs, "input_shape": x.shape})[0]] if attrs["input_grad"] else []
    outs.append(_conv_grad_weight_ref([g_conv, x], {**attrs, "weight_shape": w.shape})[0])
    if attrs["has_bias"]:
        outs.append(g_conv.astype(F64).sum(axis=(0, 2, 3)).astype(g_conv.dtype))
    return outs + [g_gamma, g_beta]


def _linear_relu_inputs(x_shape, out_features, bias=True, dtype=F32):
    """Draw until no pre-activation is within 0.05 of relu's kink."""
    while True:
        ins = [randn(*x_shape, dtype=dtype), randn(out_features, x_shape[-1], dtype=dtype)]
        ins += [randn(out_features, dtype=dtype)] if bias else []
        if np.abs(_linear_ref(ins, {})[0]).min() > 0.05:
            return ins


def _conv_bn_inputs(x_shape, w_shape, bias, dtype=F32):
    ins = [randn(*x_shape, dtype=dtype), randn(*w_shape, dtype=dtype)]
    ins += [randn(w_shape[0], dtype=dtype)] if bias else []
    return ins + _bn_inputs((1, w_shape[0]), dtype)[1:]


def _conv_bn_grad_inputs(x_shape, w_shape, attrs, relu, dtype=F32):
    """(g, x, w, conv_out, y, gamma, mean, invstd) with conv_out, y and the statistics consistent."""
    x, w = randn(*x_shape, dtype=dtype), randn(*w_shape, dtype=dtype)
    conv_out = _conv2d_ref([x, w], attrs)[0]
    gamma, beta = uniform(0.5, 1.5, w_shape[0], dtype=dtype), randn(w_shape[0], dtype=dtype)
    y, mean, invstd, _, _ = _bn_train_ref([conv_out, gamma, beta, np.zeros_like(gamma), np.ones_like(gamma)], {})
    return [randn(*y.shape, dtype=dtype), x, w, conv_out, np.maximum(y, 0) if relu else y, gamma, mean, invstd]


def fused_table():
    t = {}
    lr = _linear_relu_ref
    t["linear_relu"] = [
        S(_linear_relu_inputs((3, 4), 5), lr, "bias"),
        S(_linear_relu_inputs((3, 4), 5, bias=False), lr, "no-bias"),
        S(_linear_relu_inputs((2, 3, 4), 5), lr, "3d-input"),
        S(_linear_relu_inputs((3, 4), 2, dtype=F64), lr, "f64"),
        S([fortran(a) if a.ndim > 1 else a for a in _linear_relu_inputs((3, 4), 5)], lr, "noncontig"),
        S(_linear_relu_inputs((1, 4), 6), lr, "batch1"),
    ]
    pad, grp = {"padding": (1, 1)}, {"groups": 2, "stride": (2, 2)}

    def conv_relu_ref(ins, attrs):
        return [np.maximum(out, 0).astype(out.dtype) for out in _conv2d_ref(ins, attrs)]

    t["conv2d_relu"] = [
        S([randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4)], conv_relu_ref, "bias-pad", pad),
        S([randn(2, 3, 5, 5), randn(4, 3, 3, 3)], conv_relu_ref, "no-bias"),
        S([randn(2, 4, 6, 6), randn(6, 2, 3, 3), randn(6)], conv_relu_ref, "groups-stride", grp),
        S([randn(2, 3, 4, 4, dtype=F64), randn(4, 3, 3, 3, dtype=F64), randn(4, dtype=F64)], conv_relu_ref, "f64", pad),
        S([flipped(randn(2, 3, 5, 5)), randn(4, 3, 3, 3)], conv_relu_ref, "noncontig", pad),
        S([randn(1, 3, 4, 4), randn(2, 3, 3, 3), randn(2)], conv_relu_ref, "batch1", pad),
    ]
    for op, ref in (("conv_bn", _conv_bn_ref), ("conv_bn_train", _conv_bn_train_ref)):
        extra = {"momentum": 0.3} if op == "conv_bn_train" else {}
        t[op] = [
            S(_conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=False), ref, "no-bias"),
            S(_conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=True), ref, "bias-relu", {**pad, "relu": True}),
            S(_conv_bn_inputs((2, 4, 6, 6), (6, 2, 3, 3), bias=True), ref, "groups-stride-eps",
              {**grp, "eps": 1e-3, **extra}),
            S(_conv_bn_inputs((2, 3, 4, 4), (4, 3, 3, 3), bias=True, dtype=F64), ref, "f64", {**pad, "relu": True}),
            S([flipped(a) if a.ndim == 4 else a for a in _conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=True)],
              ref, "noncontig", pad),
            S(_conv_bn_inputs((1, 3, 4, 4), (2, 3, 3, 3), bias=False), ref, "batch1", {**pad, "relu": True}),
        ]
    cg = _conv_bn_train_grad_ref
    flags = lambda relu, input_grad=True, has_bias=False: {"relu": relu, "input_grad": input_grad,  # noqa: E731
                                                           "has_bias": has_bias}
    t["conv_bn_train_grad"] = [
        S(_conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), {}, False), cg, "plain", flags(False)),
        S(_conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), pad, True), cg, "relu-bias",
          {**pad, **flags(True, True, True)}, grad=False),  # the y > 0 mask jumps where y == 0
        S(_conv_bn_grad_inputs((2, 4, 6, 6), (6, 2, 3, 3), grp, False), cg, "groups-no-input-grad",
          {**grp, **flags(False, False, True)}),
        S(_conv_bn_grad_inputs((2, 3, 4, 4), (4, 3, 3, 3), pad, False, F64), cg, "f64", {**pad, **flags(False)}),
        S([fortran(a) if a.ndim > 1 else a for a in _conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), {}, False)],
          cg, "noncontig", flags(False, True, True)),
        S(_conv_bn_grad_inputs((1, 3, 4, 4), (2, 3, 3, 3), pad, False), cg, "batch1", {**pad, **flags(False)}),
    ]
    return t
