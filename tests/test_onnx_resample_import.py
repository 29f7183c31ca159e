"""ONNX import of Pad (constant, reflect, edge, wrap), Resize / Upsample, DepthToSpace and
SpaceToDepth (graphc/onnx/resample_readers.py): graphc's own exports of padding and resampling
models run in onnxruntime and imported back. (onnx's own cases of these ops run in
tests/test_onnx_backend_suite.py.)"""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn

onnx = pytest.importorskip("onnx")

class _Resampler(nn.Module):
    def forward(self, x, grid):
        y = F.pad(x, (1, 2, 2, 1), mode="reflect")
        y = F.pad(y, (1, 1, 1, 1), mode="replicate")
        y = F.pad(y, (2, 0, 1, 1), mode="circular")
        y = F.interpolate(y, size=(12, 16), mode="bicubic")
        y = F.pixel_shuffle(F.pixel_unshuffle(y, 2), 2)
        y = F.interpolate(y, scale_factor=0.75, mode="bilinear", align_corners=True)
        return F.grid_sample(y, grid, padding_mode="reflection"), F.grid_sample(y, grid, mode="nearest")


def test_export_runs_in_onnxruntime_and_imports_back(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 6, 8)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 5, 5, 2)).astype(np.float32)
    model = _Resampler()
    path = str(tmp_path / "m.onnx")
    gc.export(model, (x, grid), path)
    x3 = rng.standard_normal((3, 4, 6, 8)).astype(np.float32)
    g3 = rng.uniform(-1.2, 1.2, (3, 5, 5, 2)).astype(np.float32)
    session = ort.InferenceSession(path)
    got = session.run(None, {i.name: v for i, v in zip(session.get_inputs(), (x3, g3))})
    want = [t.numpy() for t in model(gc.tensor(x3), gc.tensor(g3))]
    back = gc.load(path)(x3, g3)
    for a, b, c in zip(got, want, back):
        np.testing.assert_allclose(a, b, atol=1e-5)
        np.testing.assert_allclose(c, b, atol=1e-5)


def _resize_model(attrs, shape, roi=None, scales=None, sizes=None):
    from onnx import TensorProto, helper

    inits = [helper.make_tensor("roi", TensorProto.FLOAT, [len(roi or [])], roi or []),
             helper.make_tensor("scales", TensorProto.FLOAT, [len(scales or [])], scales or [])]
    names = ["x", "roi", "scales"]
    if sizes is not None:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
        names.append("sizes")
    node = helper.make_node("Resize", names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("attrs,kwargs", [
    ({"mode": "linear", "antialias": 1}, {"scales": [1.0, 1.0, 0.4, 0.7]}),
    ({"mode": "cubic", "antialias": 1, "exclude_outside": 1, "axes": [2, 3]}, {"sizes": [3, 4], "scales": None}),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.0},
     {"roi": [0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 0.9, 1.3], "scales": [1.0, 1.0, 1.5, 0.8]}),
    ({"mode": "nearest", "keep_aspect_ratio_policy": "not_smaller", "axes": [2, 3]}, {"sizes": [5, 4]}),
])
def test_resize_modes_match_the_reference_on_a_symbolic_batch(attrs, kwargs):
    """Antialiased linear and cubic downsampling, tf_crop_and_resize with extrapolation outside
    the input, and keep_aspect_ratio_policy, against onnx's reference: float32 weighted sums of
    at most a few dozen taps, so 1e-5."""
    from graphc.onnx.importer import import_model
    from onnx.reference import ReferenceEvaluator

    model = _resize_model(attrs, ["N", 2, 7, 9], **kwargs)
    x = np.random.default_rng(19).standard_normal((3, 2, 7, 9)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = np.asarray(import_model(model)(x))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
