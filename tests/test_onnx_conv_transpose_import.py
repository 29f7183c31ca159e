"""ONNX import of ConvTranspose (graphc/onnx/conv_transpose_readers.py): hand-built models over
every attribute against onnxruntime, and graphc's own exports (ConvTranspose, unfold/fold, padded
convs) loaded back. (onnx's own convtranspose cases run in tests/test_onnx_backend_suite.py.)

Tolerance: float32 sums may run in another order than onnxruntime's MLAS (measured here: 0.0 on
the hand-built cases, values up to 9.5); checked at 1e-5 of max(1, |output|) for other BLAS builds.
"""
from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
RTOL = 1e-5


def close(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=RTOL * scale,
                               err_msg=what)


# ---- hand-built models against onnxruntime --------------------------------------------------------

def conv_transpose_model(x_shape, w_shape, bias=True, batch_dim="N", **attrs):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    w = rng.standard_normal(w_shape).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W")]
    names = ["X", "W"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(
            np.float32), "B"))
        names.append("B")
    node = helper.make_node("ConvTranspose", names, ["Y"], **attrs)
    graph = helper.make_graph([node], "ct", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                           [batch_dim, *x_shape[1:]])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, rng.standard_normal(x_shape).astype(np.float32)


HAND = {
    "pads-asymmetric": dict(x_shape=(2, 3, 4, 5), w_shape=(3, 2, 3, 3), strides=[2, 2], pads=[1, 0, 0, 2]),
    "pads-output-padding": dict(x_shape=(2, 2, 4, 4), w_shape=(2, 3, 4, 4), strides=[2, 3], pads=[1, 1, 1, 1],
                                output_padding=[1, 2]),
    "output-shape-crop": dict(x_shape=(1, 2, 3, 4), w_shape=(2, 2, 3, 3), strides=[2, 2], output_shape=[6, 8]),
    "output-shape-grow": dict(x_shape=(1, 2, 3, 4), w_shape=(2, 2, 3, 3), strides=[3, 2], output_shape=[10, 10]),
    "same-upper": dict(x_shape=(2, 2, 3, 4), w_shape=(2, 2, 4, 3), strides=[2, 2], auto_pad="SAME_UPPER"),
    "same-lower": dict(x_shape=(2, 2, 3, 4), w_shape=(2, 2, 3, 3), strides=[2, 3], auto_pad="SAME_LOWER"),
    "valid": dict(x_shape=(2, 2, 3, 4), w_shape=(2, 2, 3, 3), strides=[2, 1], auto_pad="VALID"),
    "groups-dilations-kernel-shape": dict(x_shape=(2, 4, 3, 3), w_shape=(4, 3, 2, 3), group=2, dilations=[2, 1],
                                          strides=[1, 2], kernel_shape=[2, 3]),
    "depthwise-no-bias": dict(x_shape=(2, 3, 4, 4), w_shape=(3, 1, 3, 3), group=3, strides=[2, 2], bias=False),
    "1d": dict(x_shape=(2, 3, 7), w_shape=(3, 2, 4), strides=[3], pads=[1, 2], output_padding=[1], dilations=[2]),
    "1d-output-shape": dict(x_shape=(2, 3, 5), w_shape=(3, 2, 3), strides=[2], output_shape=[12]),
}


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_built_model_matches_onnxruntime(name, tmp_path):
    import onnxruntime as ort

    model, x = conv_transpose_model(**HAND[name])
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    session = ort.InferenceSession(str(path))
    plan = gc.load(path)
    for batch in (x.shape[0], 3):  # the batch dim is symbolic: one plan runs both
        xb = np.resize(x, (batch,) + x.shape[1:])
        close(plan(xb), session.run(None, {"X": xb})[0], name)


def test_negative_start_pads_are_refused(tmp_path):
    model, _ = conv_transpose_model((1, 2, 3, 3), (2, 2, 3, 3), pads=[-1, 0, 0, 0])
    path = tmp_path / "neg.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(gc.GraphcError, match="start below zero"):
        gc.load(path)


class _Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)
        self.up1 = nn.ConvTranspose1d(6, 2, 3, stride=2, padding=1, output_padding=1, dilation=2)
        self.conv = nn.Conv2d(6, 6, 3, padding="same", padding_mode="replicate")
        self.unfold, self.fold = nn.Unfold(3, padding=1, stride=2), nn.Fold((10, 10), 3, padding=1, stride=2)

    def forward(self, x):
        y = self.conv(self.up(x))
        return y, self.fold(self.unfold(y)), self.up1(y.reshape(y.shape[0], 6, 100))


def test_graphc_export_loads_back(tmp_path):
    model = _Up().eval()
    rng = np.random.default_rng(7)
    path = str(tmp_path / "up.onnx")
    gc.export(model, (rng.standard_normal((2, 4, 5, 5)).astype(np.float32),), path)
    plan = gc.load(path)
    for batch in (2, 5):
        x = rng.standard_normal((batch, 4, 5, 5)).astype(np.float32)
        got = plan(x)
        for g, want in zip(got, model(gc.tensor(x))):
            close(g, want.numpy())
