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
