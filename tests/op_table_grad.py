"""The op table's ops that graphc's passes emit: autodiff's ``*_grad`` ops and the fusion passes'
fused ops (linear_relu, conv_bn, ...), one ``OpInfo`` entry per op (see op_table.py). PyTorch's
side is autograd or aten's backward kernels, and for fused ops the unfused functions in
sequence. Import ``OP_INFO`` from ``op_table``, which builds the whole table; this module takes
its helpers from there and from op_table_nn.
"""
from __future__ import annotations

import numpy as np

from op_table import (F32, F64, TF, OpInfo, S, T, distinct, flipped, fortran, ints, nonzero, promote, randn, slice_ref,
                      strided, torch_slice, uniform)
from op_table_nn import (bn_inputs, bn_ref, bn_train_ref, conv2d_ref, linear_ref, pair, per_channel, pool_ref,
                         torch_batch_norm, torch_batch_norm_train, torch_conv2d, torch_pool, windows)


# ---- backward ops (what autodiff emits) --------------------------------------------------------

def torch_vjp(forward, x_shape):
    """PyTorch autograd's vector-Jacobian product of ``forward(x, ts, a)`` at ``x`` = zeros of
    ``x_shape(ts, a)``, with the cotangent ``ts[0]`` (the backward op's first input)."""
    def run(ts, a):
        x = T().zeros(tuple(x_shape(ts, a)), dtype=ts[0].dtype, requires_grad=True)
        return T().autograd.grad(forward(x, ts, a), x, ts[0])[0]
    return run


def _act_grad_ref(kind):
    def ref(ins, attrs):
        g, y = (a.astype(F64) for a in ins)
        slope = {"relu": lambda: (y > 0).astype(F64), "sigmoid": lambda: y * (1 - y), "tanh": lambda: 1 - y * y}
        return [(g * slope[kind]()).astype(promote(*ins))]
    return ref


def _torch_act_grad(kind):
    """aten's threshold_backward (relu), sigmoid_backward, tanh_backward: (g, y) like the op."""
    def run(ts, a):
        aten = T().ops.aten
        return aten.threshold_backward(ts[0], ts[1], 0) if kind == "relu" else \
            getattr(aten, f"{kind}_backward")(ts[0], ts[1])
    return run


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


_torch_reduce_grad = torch_vjp(lambda x, ts, a: (T().mean if a["mean"] else T().sum)(
    x, dim=tuple(a["dims"]), keepdim=a["keepdim"]), lambda ts, a: a["shape"])


def _slice_grad_ref(ins, attrs):
    """Scatter through np.ix_ index lists into zeros of the input shape."""
    g, shape, drop = ins[0], tuple(attrs["shape"]), set(attrs.get("drop", ()))
    idx = [[start % shape[axis]] if axis in drop else np.arange(shape[axis])[start:stop:step]
           for axis, (start, stop, step) in enumerate(attrs["slices"])]
    out = np.zeros(shape, g.dtype)
    out[np.ix_(*idx)] = g.reshape([len(i) for i in idx])
    return [out]


_torch_slice_grad = torch_vjp(lambda x, ts, a: torch_slice([x], a), lambda ts, a: a["shape"])


def _window_attrs(attrs):
    return (pair(attrs.get("stride", 1)), pair(attrs.get("padding", 0)), pair(attrs.get("dilation", 1)),
            attrs.get("groups", 1))


def _torch_window(a):
    return {k: a[k] for k in ("stride", "padding", "dilation", "groups")}


def _torch_conv_grad_input(ts, a):
    return T().nn.grad.conv2d_input(a["input_shape"], ts[1], ts[0], **_torch_window(a))


def _torch_conv_grad_weight(ts, a):
    return T().nn.grad.conv2d_weight(ts[1], a["weight_shape"], ts[0], **_torch_window(a))


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
    for i, j, win in windows(x, (kh, kw), stride, padding, dilation, 0.0):
        for oc in range(o):
            grp = oc // (o // groups)
            gw[oc] += np.einsum("n,nchw->chw", g[:, oc, i, j], win[:, grp * cg:(grp + 1) * cg])
    return [gw.astype(ins[0].dtype)]


def _max_pool_grad_ref(ins, attrs):
    """Each window's gradient goes to its maximum (inputs have no ties)."""
    g, x = ins[0].astype(F64), ins[1].astype(F64)
    (kh, kw), (sh, sw), (ph, pw) = pair(attrs["kernel_size"]), pair(attrs["stride"]), pair(attrs.get("padding", 0))
    dh, dw = pair(attrs.get("dilation", 1))
    n, c, h, w = x.shape
    gx = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    nn_, cc = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    for i, j, win in windows(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), -np.inf):
        ki, kj = np.divmod(win.reshape(n, c, -1).argmax(axis=-1), kw)
        np.add.at(gx, (nn_, cc, i * sh + ki * dh, j * sw + kj * dw), g[:, :, i, j])
    return [gx[:, :, ph:ph + h, pw:pw + w].astype(ins[0].dtype)]


def _torch_max_pool_grad(ts, a):
    x = ts[1].clone().requires_grad_(True)
    return T().autograd.grad(torch_pool("max")([x], a), x, ts[0])[0]


def _avg_pool_grad_ref(ins, attrs):
    g = ins[0].astype(F64)
    (kh, kw), (sh, sw), (ph, pw) = pair(attrs["kernel_size"]), pair(attrs["stride"]), pair(attrs.get("padding", 0))
    n, c, h, w = attrs["input_shape"]
    real = np.pad(np.ones((h, w)), ((ph, ph), (pw, pw)))
    gx = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
            count = kh * kw if attrs.get("count_include_pad", True) else real[rows, cols].sum()
            gx[:, :, rows, cols] += g[:, :, i, j, None, None] / count
    return [gx[:, :, ph:ph + h, pw:pw + w].astype(ins[0].dtype)]


_torch_avg_pool_grad = torch_vjp(lambda x, ts, a: torch_pool("avg")([x], a), lambda ts, a: a["input_shape"])


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


_torch_adaptive_grad = torch_vjp(lambda x, ts, a: TF().adaptive_avg_pool2d(x, ts[0].shape[2:]),
                                 lambda ts, a: ts[0].shape[:2] + tuple(a["input_size"]))


def _bn_grad_ref(ins, attrs):
    g, x, w, mean, invstd = (a.astype(F64) for a in ins)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    m = x.size // x.shape[1]
    c = lambda v: per_channel(v, x.ndim)  # noqa: E731
    xhat = (x - c(mean)) * c(invstd)
    gb = g.sum(axis=axes)
    gw = (g * xhat).sum(axis=axes)
    gx = c(w * invstd) * (g - c(gb) / m - xhat * c(gw) / m)
    return [gx.astype(ins[1].dtype), gw.astype(ins[2].dtype), gb.astype(ins[2].dtype)]


def torch_bn_grad(ts, a):
    g, x, w, mean, invstd = ts
    return T().ops.aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True, 1e-5, [True, True, True])


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
        ((2, 4, 6, 5), (4, 1, 3, 3), {"groups": 4, "padding": (1, 1)}, "depthwise-pad1"),
        ((2, 3, 7, 7), (3, 1, 3, 3), {"groups": 3, "stride": (2, 2), "padding": (1, 1)}, "depthwise-stride2"),
        ((2, 3, 9, 8), (3, 1, 3, 2), {"groups": 3, "padding": (2, 1), "dilation": (2, 2)}, "depthwise-dilated"),
        ((2, 3, 5, 4), (4, 3, 1, 1), {}, "1x1"),  # pointwise: one GEMM per image, no im2col
    ]
    samples = []
    for xs, ws, attrs, desc in cases:
        dt = F64 if desc == "f64" else F32
        y = conv2d_ref([np.zeros(xs), np.zeros(ws)], attrs)[0]
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


def _embedding_grad():
    r = _embedding_grad_ref
    return OpInfo("embedding_grad", torch=lambda ts, a: T().ops.aten.embedding_dense_backward(
        ts[0], ts[1], a["num_embeddings"], -1 if a["padding_idx"] is None else a["padding_idx"], False), samples=[
        S([randn(3, 5, 4), ints(0, 7, 3, 5)], r, "2d-indices", {"num_embeddings": 7}),
        S([randn(4, 3), np.array([2, 0, 2, 5])], r, "padding-row-zero", {"num_embeddings": 6, "padding_idx": 2}),
        S([randn(2, 3, 2), np.array([[1, 1, 1], [0, 6, 1]])], r, "repeated-rows-add", {"num_embeddings": 7}),
        S([randn(2, 3, 2, 3, dtype=F64), ints(0, 5, 2, 3, 2)], r, "f64", {"num_embeddings": 5, "padding_idx": 0}),
        S([fortran(randn(3, 4)), strided(ints(0, 6, 3))], r, "noncontig", {"num_embeddings": 6}),
        S([randn(1, 4, 5), ints(0, 9, 1, 4)], r, "batch1", {"num_embeddings": 9}),
        S([randn(2), np.array(3)], r, "0d-index", {"num_embeddings": 4}, dynamic=False),
    ])


def backward_table():
    t = []
    for kind in ("relu", "sigmoid", "tanh"):
        r = _act_grad_ref(kind)
        y = (lambda *s, dtype=F32: nonzero(*s, dtype=dtype)) if kind == "relu" else \
            (lambda *s, dtype=F32: uniform(-0.9, 0.9, *s, dtype=dtype)) if kind == "tanh" else \
            (lambda *s, dtype=F32: uniform(0.05, 0.95, *s, dtype=dtype))
        t.append(OpInfo(f"{kind}_grad", torch=_torch_act_grad(kind), samples=[
            S([randn(3, 4), y(3, 4)], r, "2d"),
            S([randn(2, 3, 4, dtype=F64), y(2, 3, 4, dtype=F64)], r, "f64"),
            S([fortran(randn(4, 3)), strided(y(4, 3))], r, "noncontig"),
            S([randn(1, 5), y(1, 5)], r, "batch1"),
            S([randn(), y()], r, "0d"),
        ]))
    rg = _reduce_grad_ref
    t.append(OpInfo("reduce_grad", torch=_torch_reduce_grad, samples=[
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
    ]))
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
    sg = []
    for shape, slices, drop, desc, dt in slice_cases:
        out_shape = slice_ref([np.zeros(shape)], {"slices": slices, "drop": drop})[0].shape
        g = randn(*out_shape, dtype=dt)
        attrs = {"slices": slices, "drop": drop, "shape": shape}
        sg.append(S([fortran(g) if desc == "noncontig" else g], _slice_grad_ref, desc, attrs,
                    traced_attrs={**attrs, "shape": ("N",) + shape[1:]}))
    # x[2] of a vector: the gradient arriving is 0-d
    sg.append(S([randn()], _slice_grad_ref, "0d-from-index", {"slices": [(2, None, 1)], "drop": (0,), "shape": (5,)},
                dynamic=False))
    t.append(OpInfo("slice_grad", torch=_torch_slice_grad, samples=sg))
    t.append(OpInfo("conv2d_grad_input", torch=_torch_conv_grad_input,
                    samples=_conv_grad_samples(_conv_grad_input_ref, "w", "input_shape")))
    t.append(OpInfo("conv2d_grad_weight", torch=_torch_conv_grad_weight,
                    samples=_conv_grad_samples(_conv_grad_weight_ref, "x", "weight_shape")))
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
        y = pool_ref("max")([x], attrs)[0]
        g = randn(*y.shape, dtype=dt)
        if desc == "noncontig":
            g, x = fortran(g), flipped(x)
        mp.append(S([g, x, y], _max_pool_grad_ref, desc, attrs, grad=False))  # the y == x test is not smooth
    t.append(OpInfo("max_pool2d_grad", torch=_torch_max_pool_grad, samples=mp))
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
        y_shape = pool_ref("avg")([np.zeros(xs)], attrs)[0].shape
        g = randn(*y_shape, dtype=dt)
        full_attrs = {**attrs, "input_shape": xs}
        ap.append(S([fortran(g) if desc == "noncontig" else g], _avg_pool_grad_ref, desc, full_attrs,
                    traced_attrs={**full_attrs, "input_shape": ("N",) + xs[1:]}))
    t.append(OpInfo("avg_pool2d_grad", torch=_torch_avg_pool_grad, samples=ap))
    ag = _adaptive_grad_ref
    t.append(OpInfo("adaptive_avg_pool2d_grad", torch=_torch_adaptive_grad, samples=[
        S([randn(2, 3, 3, 3)], ag, "even", {"input_size": (6, 6)}),
        S([randn(2, 3, 3, 4)], ag, "uneven", {"input_size": (5, 7)}),
        S([randn(2, 3, 1, 1)], ag, "global", {"input_size": (4, 5)}),
        S([randn(2, 2, 5, 4)], ag, "from-upsample", {"input_size": (3, 3)}),
        S([randn(2, 3, 2, 3, dtype=F64)], ag, "f64", {"input_size": (5, 5)}),
        S([fortran(randn(2, 3, 4, 4))], ag, "noncontig", {"input_size": (6, 6)}),
        S([randn(1, 3, 2, 2)], ag, "batch1", {"input_size": (4, 4)}),
    ]))
    t.append(_embedding_grad())
    t.append(OpInfo("batch_norm_train_grad", torch=torch_bn_grad, samples=[
        S(_bn_grad_inputs((2, 3, 4, 4)), _bn_grad_ref, "4d"),
        S(_bn_grad_inputs((5, 3)), _bn_grad_ref, "2d"),
        S(_bn_grad_inputs((2, 3, 4)), _bn_grad_ref, "3d"),
        S(_bn_grad_inputs((2, 3, 4, 4), F64), _bn_grad_ref, "f64"),
        S(_bn_grad_inputs((2, 3, 4, 4), contiguous=False), _bn_grad_ref, "noncontig"),
        S(_bn_grad_inputs((1, 3, 3, 3)), _bn_grad_ref, "batch1"),
    ]))
    return t


# ---- fused ops (what the fusion passes emit): references compose the unfused ones -------------

def _linear_relu_ref(ins, attrs):
    return [np.maximum(linear_ref(ins, attrs)[0], 0)]


def _split_conv_bn(ins):
    """(x, w, [b], gamma, beta, running_mean, running_var) -> (conv inputs, bn params)."""
    return list(ins[:-4]), list(ins[-4:])


def _conv_bn_ref(ins, attrs):
    conv, bn = _split_conv_bn(ins)
    y = bn_ref([conv2d_ref(conv, attrs)[0]] + bn, attrs)[0]
    return [np.maximum(y, 0) if attrs.get("relu", False) else y]


def _torch_conv_bn(ts, a):
    y = torch_batch_norm([torch_conv2d(ts[:-4], a)] + list(ts[-4:]), a)
    return T().relu(y) if a["relu"] else y


def _conv_bn_train_ref(ins, attrs):
    conv, bn = _split_conv_bn(ins)
    conv_out = conv2d_ref(conv, attrs)[0]
    y, *stats = bn_train_ref([conv_out] + bn, attrs)
    return [np.maximum(y, 0) if attrs.get("relu", False) else y, conv_out] + stats


def _torch_conv_bn_train(ts, a):
    conv_out = torch_conv2d(ts[:-4], a)
    y, *stats = torch_batch_norm_train([conv_out] + list(ts[-4:]), a)
    return [T().relu(y) if a["relu"] else y, conv_out] + stats


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


def _torch_conv_bn_train_grad(ts, a):
    g, x, w, conv_out, y, gamma, mean, invstd = ts
    if a["relu"]:
        g = T().ops.aten.threshold_backward(g, y, 0)
    g_conv, g_gamma, g_beta = torch_bn_grad([g, conv_out, gamma, mean, invstd], a)
    grad = T().nn.grad
    outs = [grad.conv2d_input(x.shape, w, g_conv, **_torch_window(a))] if a["input_grad"] else []
    outs.append(grad.conv2d_weight(x, w.shape, g_conv, **_torch_window(a)))
    if a["has_bias"]:
        outs.append(g_conv.sum(dim=(0, 2, 3)))
    return outs + [g_gamma, g_beta]


def _linear_relu_inputs(x_shape, out_features, bias=True, dtype=F32):
    """Draw until no pre-activation is within 0.05 of relu's kink."""
    while True:
        ins = [randn(*x_shape, dtype=dtype), randn(out_features, x_shape[-1], dtype=dtype)]
        ins += [randn(out_features, dtype=dtype)] if bias else []
        if np.abs(linear_ref(ins, {})[0]).min() > 0.05:
            return ins


def _conv_bn_inputs(x_shape, w_shape, bias, dtype=F32):
    ins = [randn(*x_shape, dtype=dtype), randn(*w_shape, dtype=dtype)]
    ins += [randn(w_shape[0], dtype=dtype)] if bias else []
    return ins + bn_inputs((1, w_shape[0]), dtype)[1:]


def _conv_bn_grad_inputs(x_shape, w_shape, attrs, relu, dtype=F32):
    """(g, x, w, conv_out, y, gamma, mean, invstd) with conv_out, y and the statistics consistent."""
    x, w = randn(*x_shape, dtype=dtype), randn(*w_shape, dtype=dtype)
    conv_out = conv2d_ref([x, w], attrs)[0]
    gamma, beta = uniform(0.5, 1.5, w_shape[0], dtype=dtype), randn(w_shape[0], dtype=dtype)
    y, mean, invstd, _, _ = bn_train_ref([conv_out, gamma, beta, np.zeros_like(gamma), np.ones_like(gamma)], {})
    return [randn(*y.shape, dtype=dtype), x, w, conv_out, np.maximum(y, 0) if relu else y, gamma, mean, invstd]


# ---- the attention core: references in float64 from the definition -------------------------------

_ATTENTION_RNG = np.random.default_rng(20250321)  # its own stream: these rows leave the others' inputs as they were


def _att_randn(*shape, dtype=F32):
    return _ATTENTION_RNG.standard_normal(shape).astype(dtype)


def _att_inputs(lead, length, source, embed, value_dim, dtype=F32):
    return [_att_randn(*lead, length, embed, dtype=dtype), _att_randn(*lead, source, embed, dtype=dtype),
            _att_randn(*lead, source, value_dim, dtype=dtype)]


def _att_weights(ins, attrs):
    """softmax(q @ k.T * scale + mask) in float64; rows that keep no key are zeros."""
    q, k = ins[0].astype(F64), ins[1].astype(F64)
    s = (q @ np.swapaxes(k, -1, -2)) * attrs["scale"]
    keep = np.ones(s.shape, bool)
    if len(ins) > 3 and ins[3].dtype == np.bool_:
        keep = np.broadcast_to(ins[3], s.shape)
    elif len(ins) > 3:
        s = s + ins[3].astype(F64)
    if attrs.get("is_causal"):
        keep = np.broadcast_to(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s.shape)
    s = np.where(keep, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def _attention_ref(ins, attrs):
    return [(_att_weights(ins, attrs) @ ins[2].astype(F64)).astype(ins[0].dtype)]


def _torch_attention(ts, a):
    mask = ts[3] if len(ts) > 3 else None
    return TF().scaled_dot_product_attention(ts[0], ts[1], ts[2], attn_mask=mask, is_causal=a["is_causal"],
                                             scale=a["scale"])


def _attention_grad_ref(ins, attrs):
    g, q, k, v = (a.astype(F64) for a in ins[:4])
    fwd = [ins[1], ins[2], ins[3]] + list(ins[4:])
    p = _att_weights(fwd, attrs)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    outs = [ds @ k * attrs["scale"], np.swapaxes(ds, -1, -2) @ q * attrs["scale"], np.swapaxes(p, -1, -2) @ g]
    if attrs.get("mask_grad"):
        outs.append(ds)
    return [o.astype(ins[1].dtype) for o in outs]


def _torch_attention_grad(ts, a):
    g, q, k, v = ts[:4]
    leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
    mask = ts[4] if len(ts) > 4 else None
    if a["mask_grad"]:  # the op gives the scores' cotangent (autodiff sums it to the mask's shape): the full mask's
        mask = mask.expand(tuple(q.shape[:-1]) + (k.shape[-2],)).contiguous().requires_grad_(True)
        leaves.append(mask)
    out = TF().scaled_dot_product_attention(*leaves[:3], attn_mask=mask, is_causal=a["is_causal"], scale=a["scale"])
    return list(T().autograd.grad(out, leaves, g))


def _att_grad_inputs(fwd):
    """(g, q, k, v[, mask]): the forward's inputs after a cotangent of its output's shape."""
    q, v = fwd[0], fwd[2]
    return [_att_randn(*q.shape[:-1], v.shape[-1], dtype=q.dtype)] + list(fwd)


def _attention_samples():
    a = {"scale": 0.5}
    no_key = _ATTENTION_RNG.random((5, 6)) < 0.6
    no_key[1] = False  # a query that keeps no key: zeros
    no_key[2, 0] = True
    # -1e30, not -inf (the recorded references' fingerprints take finite inputs; tests/test_fused_attention.py
    # has -inf masks): exps that underflow to 0, and a row where all do (uniform weights, as PyTorch's)
    add = np.where(_ATTENTION_RNG.random((2, 1, 5, 6)) < 0.3, -1e30, _att_randn(2, 1, 5, 6)).astype(F32)
    add[0, 0, 3] = -1e30
    perm = [np.swapaxes(x, 1, 2) for x in _att_inputs((2, 5), 3, 3, 4, 3)]  # (N, H, L, E) views of (N, L, H, E)
    big = [x * 30 for x in _att_inputs((2, 3), 5, 6, 4, 3)]  # scores past the unshifted softmax's range
    return {
        "plain": S(_att_inputs((2, 3), 5, 6, 4, 3), _attention_ref, "plain", a),
        "causal": S(_att_inputs((2, 2), 4, 6, 3, 2), _attention_ref, "causal", {"scale": 0.7, "is_causal": True}),
        "bool-mask": S(_att_inputs((2, 3), 5, 6, 4, 3) + [no_key], _attention_ref, "bool-mask", a),
        "float-mask": S(_att_inputs((2, 3), 5, 6, 4, 3) + [_att_randn(2, 1, 5, 6)], _attention_ref, "float-mask", a),
        "huge-mask": S(_att_inputs((2, 3), 5, 6, 4, 3) + [add], _attention_ref, "huge-mask", a, grad=False),
        "f64": S(_att_inputs((2, 2), 4, 5, 3, 2, dtype=F64), _attention_ref, "f64", {"scale": 0.3}),
        "rank2": S(_att_inputs((), 4, 5, 3, 2), _attention_ref, "rank2", a, dynamic=False),
        "noncontig": S(perm, _attention_ref, "noncontig", {"scale": 0.5}),
        "large-scores": S(big, _attention_ref, "large-scores", {"scale": 0.5}, grad=False),
        "batch1": S(_att_inputs((1, 2), 3, 3, 4, 4), _attention_ref, "batch1", a),
    }


def attention_table():
    forward = _attention_samples()
    t = [OpInfo("attention", torch=_torch_attention, samples=list(forward.values()))]
    grads = []
    for desc in ("plain", "causal", "bool-mask", "float-mask", "f64", "noncontig", "batch1"):
        fwd = forward[desc]
        attrs = {"scale": fwd.attrs["scale"], "is_causal": fwd.attrs.get("is_causal", False),
                 "mask_grad": desc == "float-mask"}
        grads.append(S(_att_grad_inputs(fwd.inputs), _attention_grad_ref, desc, attrs))
    t.append(OpInfo("attention_grad", torch=_torch_attention_grad, samples=grads))
    return t


def fused_table():
    t = []
    lr = _linear_relu_ref
    t.append(OpInfo("linear_relu", torch=lambda ts, a: T().relu(TF().linear(*ts)), samples=[
        S(_linear_relu_inputs((3, 4), 5), lr, "bias"),
        S(_linear_relu_inputs((3, 4), 5, bias=False), lr, "no-bias"),
        S(_linear_relu_inputs((2, 3, 4), 5), lr, "3d-input"),
        S(_linear_relu_inputs((3, 4), 2, dtype=F64), lr, "f64"),
        S([fortran(a) if a.ndim > 1 else a for a in _linear_relu_inputs((3, 4), 5)], lr, "noncontig"),
        S(_linear_relu_inputs((1, 4), 6), lr, "batch1"),
    ]))
    pad, grp = {"padding": (1, 1)}, {"groups": 2, "stride": (2, 2)}

    def conv_relu_ref(ins, attrs):
        return [np.maximum(out, 0).astype(out.dtype) for out in conv2d_ref(ins, attrs)]

    t.append(OpInfo("conv2d_relu", torch=lambda ts, a: T().relu(torch_conv2d(ts, a)), samples=[
        S([randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4)], conv_relu_ref, "bias-pad", pad),
        S([randn(2, 3, 5, 5), randn(4, 3, 3, 3)], conv_relu_ref, "no-bias"),
        S([randn(2, 4, 6, 6), randn(6, 2, 3, 3), randn(6)], conv_relu_ref, "groups-stride", grp),
        S([randn(2, 3, 4, 4, dtype=F64), randn(4, 3, 3, 3, dtype=F64), randn(4, dtype=F64)], conv_relu_ref, "f64", pad),
        S([flipped(randn(2, 3, 5, 5)), randn(4, 3, 3, 3)], conv_relu_ref, "noncontig", pad),
        S([randn(1, 3, 4, 4), randn(2, 3, 3, 3), randn(2)], conv_relu_ref, "batch1", pad),
    ]))
    for op, ref, torch in (("conv_bn", _conv_bn_ref, _torch_conv_bn),
                           ("conv_bn_train", _conv_bn_train_ref, _torch_conv_bn_train)):
        extra = {"momentum": 0.3} if op == "conv_bn_train" else {}
        t.append(OpInfo(op, torch=torch, samples=[
            S(_conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=False), ref, "no-bias"),
            S(_conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=True), ref, "bias-relu", {**pad, "relu": True}),
            S(_conv_bn_inputs((2, 4, 6, 6), (6, 2, 3, 3), bias=True), ref, "groups-stride-eps",
              {**grp, "eps": 1e-3, **extra}),
            S(_conv_bn_inputs((2, 3, 4, 4), (4, 3, 3, 3), bias=True, dtype=F64), ref, "f64", {**pad, "relu": True}),
            S([flipped(a) if a.ndim == 4 else a for a in _conv_bn_inputs((2, 3, 5, 5), (4, 3, 3, 3), bias=True)],
              ref, "noncontig", pad),
            S(_conv_bn_inputs((1, 3, 4, 4), (2, 3, 3, 3), bias=False), ref, "batch1", {**pad, "relu": True}),
        ]))
    cg = _conv_bn_train_grad_ref
    flags = lambda relu, input_grad=True, has_bias=False: {"relu": relu, "input_grad": input_grad,  # noqa: E731
                                                           "has_bias": has_bias}
    t.append(OpInfo("conv_bn_train_grad", torch=_torch_conv_bn_train_grad, samples=[
        S(_conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), {}, False), cg, "plain", flags(False)),
        S(_conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), pad, True), cg, "relu-bias",
          {**pad, **flags(True, True, True)}, grad=False),  # the y > 0 mask jumps where y == 0
        S(_conv_bn_grad_inputs((2, 4, 6, 6), (6, 2, 3, 3), grp, False), cg, "groups-no-input-grad",
          {**grp, **flags(False, False, True)}),
        S(_conv_bn_grad_inputs((2, 3, 4, 4), (4, 3, 3, 3), pad, False, F64), cg, "f64", {**pad, **flags(False)}),
        S([fortran(a) if a.ndim > 1 else a for a in _conv_bn_grad_inputs((2, 3, 5, 5), (4, 3, 3, 3), {}, False)],
          cg, "noncontig", flags(False, True, True)),
        S(_conv_bn_grad_inputs((1, 3, 4, 4), (2, 3, 3, 3), pad, False), cg, "batch1", {**pad, **flags(False)}),
    ]))
    return t
