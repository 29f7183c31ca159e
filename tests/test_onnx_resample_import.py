"""ONNX import of Pad (constant, reflect, edge, wrap), Resize / Upsample, DepthToSpace and
SpaceToDepth (graphc/onnx/resample_readers.py) against onnx's backend node cases, with an explicit
excuse (and the error it must raise) for each case graphc does not import; and graphc's own exports
of padding and resampling models run in onnxruntime and imported back."""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc
import onnx_backend_cases
import graphc.nn.functional as F
from graphc import nn

onnx = pytest.importorskip("onnx")

PREFIXES = ("test_resize_", "test_upsample_", "test_reflect_pad", "test_edge_pad", "test_wrap_pad",
            "test_constant_pad", "test_depthtospace", "test_spacetodepth")

_TF_CROP = "coordinate_transformation_mode='tf_crop_and_resize' is not imported"
EXCUSED = {
    "test_resize_tf_crop_and_resize": ("tf_crop_and_resize (a region of interest) is not imported", _TF_CROP),
    "test_resize_tf_crop_and_resize_extrapolation_value": ("tf_crop_and_resize is not imported", _TF_CROP),
    "test_resize_tf_crop_and_resize_axes_2_3": ("tf_crop_and_resize is not imported", _TF_CROP),
    "test_resize_tf_crop_and_resize_axes_3_2": ("tf_crop_and_resize is not imported", _TF_CROP),
    "test_resize_upsample_sizes_nearest_not_larger": ("keep_aspect_ratio_policy='not_larger' is not imported",
                                                      "keep_aspect_ratio_policy"),
    "test_resize_upsample_sizes_nearest_not_smaller": ("keep_aspect_ratio_policy='not_smaller' is not imported",
                                                       "keep_aspect_ratio_policy"),
    "test_resize_downsample_sizes_nearest_not_larger": ("keep_aspect_ratio_policy='not_larger' is not imported",
                                                        "keep_aspect_ratio_policy"),
    "test_resize_downsample_sizes_nearest_not_smaller": ("keep_aspect_ratio_policy='not_smaller' is not imported",
                                                         "keep_aspect_ratio_policy"),
    "test_resize_downsample_scales_linear_antialias": ("antialias=1 is not imported", "antialias"),
    "test_resize_downsample_scales_cubic_antialias": ("antialias=1 is not imported", "antialias"),
    "test_resize_downsample_sizes_linear_antialias": ("antialias=1 is not imported", "antialias"),
    "test_resize_downsample_sizes_cubic_antialias": ("antialias=1 is not imported", "antialias"),
}


def backend_cases() -> dict:
    """``name -> (model bytes, inputs, outputs)`` of onnx's cases for these ops (tests/onnx_backend_cases.py)."""
    return onnx_backend_cases.backend_cases(PREFIXES, ("pad", "resize", "upsample", "depthtospace", "spacetodepth"))

CASES = sorted(backend_cases())


def test_excuses_are_real():
    assert set(EXCUSED) <= set(CASES)
    for prefix in PREFIXES:
        assert any(c.startswith(prefix) for c in CASES if c not in EXCUSED), prefix


def _frozen(model_bytes: bytes, inputs: list) -> tuple:
    """The case's model with every input after the data (pads, roi, scales, sizes, axes) as an
    initializer: graphc needs them known while importing, as exporters write them."""
    from onnx import numpy_helper
    model = onnx.ModelProto.FromString(model_bytes)
    graph = model.graph
    keep = []
    for k, (inp, value) in enumerate(zip(list(graph.input), inputs)):
        if k == 0:
            keep.append(inp)
            continue
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), inp.name))
    del graph.input[:]
    graph.input.extend(keep)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return model.SerializeToString(), inputs[:1], opset


def _excuse(name, opset, inputs):
    if name in EXCUSED:
        return EXCUSED[name][1]
    if opset > 25 or opset < 11:
        return "ONNX opset .* is not supported"  # graphc imports opsets 11-25 (Upsample: opset 9 only)
    if np.asarray(inputs[0]).dtype == np.int32:
        return "is not a tensor of a dtype graphc holds"  # an int32 data input: graphc holds no int32
    return None


@pytest.mark.parametrize("name", CASES)
def test_onnx_backend_case(name, tmp_path):
    model, inputs, expected = backend_cases()[name]
    model, inputs, opset = _frozen(model, inputs)
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model)
    excuse = _excuse(name, opset, inputs)
    if excuse:
        with pytest.raises(gc.GraphcError, match=excuse):
            gc.load(path)(*inputs)
        return
    got = gc.load(path)(*inputs)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    for g, w in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5, err_msg=name)


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


@pytest.mark.parametrize("name", [c for c in CASES if c.startswith(("test_depthtospace", "test_spacetodepth"))
                                  and not c.endswith("_expanded")])
def test_depth_space_cases_at_opset_13(name, tmp_path):
    """onnx writes its DepthToSpace/SpaceToDepth cases at its newest opset (past graphc's 25); their
    forms are those of opset 13 (plus SpaceToDepth's ``mode`` of opset 28, read as written), so the
    same models declared at 13 are imported and compared."""
    model, inputs, expected = backend_cases()[name]
    model, inputs, _ = _frozen(model, inputs)
    proto = onnx.ModelProto.FromString(model)
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = 13
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(proto.SerializeToString())
    np.testing.assert_array_equal(gc.load(path)(*inputs), expected[0])
