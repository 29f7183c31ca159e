"""ONNX import of the vision ops (graphc/onnx/vision_readers.py and the older readers of
InstanceNormalization, HardSigmoid, GlobalMaxPool, GlobalAveragePool): onnx's own backend node
cases, generated from the case definitions onnx ships, against their expected outputs. What
graphc does not import is listed in EXCUSED with the reason and the error it gives.

Tolerance: onnx's reference computes in numpy in its own order (float32): at most a few float32
ulps apart; checked at RTOL = 1e-5 of max(1, |output|). float16 cases at 2e-3.
"""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc
import onnx_backend_cases

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")

RTOL = 1e-5
HALF_ATOL = 2e-3
MODULES = ("averagepool", "celu", "elu", "globalaveragepool", "globalmaxpool", "hardsigmoid", "instancenorm",
           "lppool", "lrn", "maxpool", "maxunpool", "mish", "prelu", "selu", "softplus", "softsign",
           "thresholdedrelu")
PREFIXES = ("test_averagepool", "test_celu", "test_elu", "test_globalaveragepool", "test_globalmaxpool",
            "test_hardsigmoid", "test_instancenorm", "test_lppool", "test_lrn", "test_maxpool", "test_maxunpool",
            "test_mish", "test_prelu", "test_selu", "test_softplus", "test_softsign", "test_thresholdedrelu")

_3D = "3-D pooling: graphc pools over (H, W) (1-D as a height-1 image)"
_DILATED_AVG = "AveragePool/LpPool with dilations; graphc's avg_pool2d has none"
_ASYMMETRIC = r"asymmetric padding .* graphc pads both sides of a dim alike"
_BF16 = "bfloat16 inputs: graphc holds no bfloat16 dtype"
EXCUSED = {
    **{name: (_3D, r"pooling a rank-5 input|rank-5") for name in (
        "test_averagepool_3d_default", "test_averagepool_3d_dilations_small", "test_maxpool_3d_default",
        "test_maxpool_3d_dilations", "test_maxpool_3d_dilations_use_ref_impl",
        "test_maxpool_3d_dilations_use_ref_impl_large", "test_lppool_3d_default",
        *(f"test_averagepool_3d_dilations_large_count_include_pad_is_{i}_ceil_mode_is_{c}"
          for i in (0, 1) for c in ("False", "True")))},
    **{name: (_DILATED_AVG, "dilations") for name in ("test_averagepool_2d_dilations", "test_lppool_2d_dilations")},
    **{name: ("SAME_UPPER/SAME_LOWER with an odd total padding pads one side more", _ASYMMETRIC) for name in (
        "test_averagepool_2d_same_lower", "test_averagepool_2d_same_upper", "test_maxpool_2d_same_lower",
        "test_maxpool_2d_same_upper", "test_lppool_2d_same_lower", "test_lppool_2d_same_upper")},
    **{name: (_BF16, "bfloat16|element type 16") for name in ("test_celu_bfloat16", "test_celu_bfloat16_expanded")},
    **{name: ("Celu-28 (float16 and bfloat16 added): graphc imports opsets up to 25, and Celu-12 is float32 only",
              "opset 28") for name in ("test_celu_float16", "test_celu_float16_expanded")},
    "test_maxpool_2d_uint8": ("integer MaxPool: graphc's pooling computes in float (tests/test_dtypes_ops.py "
                              "KNOWN_REFUSALS)", "floating-point input, got uint8"),
    "test_maxunpool_export_with_output_shape": (
        "output_shape is a graph input (known only at run time); graphc fixes shapes when the plan is built "
        "(as an initializer it imports)", "output_shape must be a constant"),
}
ROUNDED = {"test_averagepool_2d_ceil_last_window_starts_on_pad": 1e-4}  # expected written to 4 decimals
OPSET_12 = ("test_celu", "test_celu_expanded")  # Celu-28 only added types: read as the float32 Celu-12


def backend_cases() -> dict:
    """``name -> (model bytes, inputs, outputs)`` of onnx's cases for these ops (tests/onnx_backend_cases.py)."""
    return onnx_backend_cases.backend_cases(PREFIXES, MODULES)

CASES = sorted(backend_cases())


def close(got, want, what, atol=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    finite = want[np.isfinite(want)] if want.dtype.kind == "f" else want
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL,
                               atol=RTOL * scale if atol is None else atol, err_msg=what)


def test_every_family_has_cases_and_the_excuses_are_real():
    assert set(EXCUSED) <= set(CASES)
    for prefix in PREFIXES:
        if prefix != "test_instancenorm":
            assert any(c.startswith(prefix) for c in CASES if c not in EXCUSED), prefix


@pytest.mark.parametrize("name", CASES)
def test_onnx_backend_case(name, tmp_path):
    model, inputs, expected = backend_cases()[name]
    if name in OPSET_12:
        proto = onnx.ModelProto.FromString(model)
        for opset in proto.opset_import:
            if opset.domain in ("", "ai.onnx"):
                opset.version = 22
        model = proto.SerializeToString()
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model)
    if name in EXCUSED:
        with pytest.raises(gc.GraphcError, match=EXCUSED[name][1]):
            gc.load(path)(*inputs)
        return
    got = gc.load(path)(*inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(expected)
    half = any(np.asarray(x).dtype == np.float16 for x in inputs)
    for g, w in zip(got, expected):
        close(g, w, name, HALF_ATOL if half else ROUNDED.get(name))
