"""Recurrent and attention modules export to ONNX (scans as ``Scan``, zero initial states as
``ConstantOfShape`` of the run-time batch, attention as standard ops) and onnxruntime runs
them to graphc's numbers at sequence lengths other than the example's."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
pytestmark = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")


class Classifier(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.rnn = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)

    def forward(self, x):
        return self.encoder(x)


@pytest.mark.parametrize("model, width", [(lambda: Classifier("LSTM"), 3), (lambda: Classifier("GRU"), 3),
                                          (lambda: Classifier("RNN"), 3), (Encoder, 8)],
                         ids=["lstm", "gru", "rnn", "transformer_encoder"])
def test_onnxruntime_runs_sequence_models_at_any_length(tmp_path, model, width):
    import onnxruntime

    gc.manual_seed(0)
    module = model().eval()
    path = tmp_path / "m.onnx"
    gc.export(module, (np.ones((2, 5, width), np.float32),), path, dynamic_dims={"x": {1: "T"}})
    session = onnxruntime.InferenceSession(str(path))
    rng = np.random.default_rng(0)
    for length in (5, 9):
        x = rng.standard_normal((3, length, width)).astype(np.float32)
        got = session.run(None, {session.get_inputs()[0].name: x})[0]
        # onnxruntime's own GEMMs and tanh/sigmoid/softmax: float32 rounding, carried through the recurrence
        np.testing.assert_allclose(got, module(gc.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
