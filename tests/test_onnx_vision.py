"""ONNX export of the vision layers (graphc/onnx/vision_export.py; the composites through the ops
they are made of) run in onnxruntime at two batch sizes against graphc's eager outputs, and a
round trip: the exported file imported back (gc.load) gives the same outputs.

Tolerance: onnxruntime's float32 kernels (exp, pow, reductions in their own order) against
graphc's: 1e-5 of the output's scale.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn

pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
TOL = 1e-5


class _Layers(nn.Module):
    """Every vision layer once, each output returned."""

    def __init__(self, indices: bool = True):
        super().__init__()
        self.indices = indices
        self.inorm = nn.InstanceNorm2d(3, affine=True)
        self.inorm_stats = nn.InstanceNorm2d(3, track_running_stats=True)
        self.lrn = nn.LocalResponseNorm(3, alpha=0.1)
        self.acts = nn.ModuleList([nn.PReLU(3), nn.PReLU(), nn.ELU(0.5), nn.SELU(), nn.CELU(0.7), nn.Mish(),
                                   nn.Softsign(), nn.Tanhshrink(), nn.Threshold(0.2, -1.0), nn.Hardsigmoid(),
                                   nn.LogSigmoid(), nn.Softmin(1), nn.Softmax2d()])
        self.pools = nn.ModuleList([nn.MaxPool2d(3, 2, 1, ceil_mode=True), nn.MaxPool2d(2, 1, dilation=2),
                                    nn.AvgPool2d(3, 2, 1, ceil_mode=True),
                                    nn.AvgPool2d(3, 2, 1, count_include_pad=False),
                                    nn.AvgPool2d(2, divisor_override=3), nn.LPPool2d(2, 3, 2),
                                    nn.AdaptiveMaxPool2d(1), nn.AdaptiveMaxPool2d((4, 2))])
        self.with_indices = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.adaptive_indices = nn.AdaptiveMaxPool2d(2, return_indices=True)
        with gc.no_grad():
            self.inorm.weight.copy_(gc.tensor(np.array([0.5, 1.5, -1.0], np.float32)))
            self.inorm_stats.running_mean.copy_(gc.tensor(np.array([0.1, -0.2, 0.3], np.float32)))
            self.inorm_stats.running_var.copy_(gc.tensor(np.array([0.5, 2.0, 1.5], np.float32)))
            self.acts[0].weight.copy_(gc.tensor(np.array([0.1, 0.3, -0.2], np.float32)))

    def forward(self, x):
        outs = [self.inorm(x), self.inorm_stats(x), self.lrn(x)]
        outs += [act(x) for act in self.acts] + [pool(x) for pool in self.pools]
        if not self.indices:
            return tuple(outs)
        y, idx = self.with_indices(x)
        a, a_idx = self.adaptive_indices(x)
        return (*outs, y, idx, self.unpool(y, idx), a, a_idx)


def _input(rng, batch):
    return (rng.standard_normal((batch, 3, 8, 8)) * 2).astype(np.float32)


def _assert_close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL * scale, err_msg=what)


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
@pytest.mark.parametrize("indices", [True, False], ids=["with-indices", "round-trip"])
def test_export_runs_in_onnxruntime_and_round_trips(indices, tmp_path):
    """Every layer in onnxruntime; without the index outputs also imported back (MaxPool's
    Indices count over the whole tensor in ONNX, and graphc's per-plane ones need the batch
    offsets, which a symbolic batch does not give the importer)."""
    import onnxruntime as ort

    model = _Layers(indices).eval()
    rng = np.random.default_rng(8)
    path = str(tmp_path / "vision.onnx")
    gc.export(model, (_input(rng, 2),), path)
    session = ort.InferenceSession(path)
    plan = None if indices else gc.load(path)
    for batch in (2, 3):
        x = _input(rng, batch)
        want = [t.numpy() for t in model(gc.tensor(x))]
        got = session.run(None, {session.get_inputs()[0].name: x})
        assert len(got) == len(want)
        for i, (a, b) in enumerate(zip(got, want)):
            _assert_close(a, b, f"onnxruntime output {i}")
        if plan is not None:
            for i, (c, b) in enumerate(zip(plan(x), want)):
                _assert_close(c, b, f"imported output {i}")


def test_export_refuses_what_onnx_cannot_say(tmp_path):
    model = nn.Sequential(nn.AdaptiveMaxPool2d(3)).eval()  # 8 -> 3: overlapping bins
    with pytest.raises(gc.GraphcError, match="bins overlap"):
        gc.export(model, (np.zeros((1, 2, 8, 8), np.float32),), str(tmp_path / "m.onnx"))
