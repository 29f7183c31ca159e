"""``gc.export(..., opset=N)`` for every opset graphc writes (13-28): each model family's frozen
plan, written at each opset, passes onnx's full checker, runs in onnxruntime to graphc's outputs,
and imports back (gc.load) to the same outputs.

The families cover every ONNX op the writer emits: MLP, CNN with BN/ReLU6/pools, residual,
sigmoid/tanh/log-softmax, the PyTorch-idiom ResNet and GPT files, control flow (If, Loop, Scan),
the vision layers (pools with ceil_mode, LRN, PReLU...; MaxPool's indices import back only at a
static batch, so they are left out here), padding and resampling (Pad modes, Resize,
DepthToSpace/SpaceToDepth), and LSTM/Transformer encoders.

Tolerance: onnxruntime's float32 kernels add in another order than numpy's (MLAS GEMMs, its own
exp/tanh): 1e-5 of the output's scale, as tests/test_onnx_export.py. The import back runs
graphc's own kernels on the same graph: also checked at 1e-5 (a Gemm may come back as MatMul +
Add, summed in another order).
"""
from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from graphc.onnx.export import OPSETS, graph_to_onnx  # noqa: E402
from test_onnx_control import MODELS as CONTROL  # noqa: E402
from test_onnx_export import batch_like, exported  # noqa: E402
from test_onnx_vision import _Layers  # noqa: E402

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
TOL = 1e-5  # module docstring


class Resampler(nn.Module):
    def forward(self, x):
        y = F.pad(x, (1, 2, 2, 1), mode="reflect")
        y = F.pad(y, (1, 1, 1, 1), mode="replicate")
        y = F.interpolate(y, size=(12, 16), mode="bilinear")
        return F.pixel_shuffle(F.pixel_unshuffle(y, 2), 2)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, batch_first=True)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True), 1)

    def forward(self, x):
        return self.encoder(self.rnn(x)[0])


def _own(name):
    gc.manual_seed(0)
    rng = np.random.default_rng(4)
    if name in CONTROL:
        make, shape, _ = CONTROL[name]
        return make(), rng.standard_normal(shape).astype(np.float32)
    model, shape = {"vision": (_Layers(indices=False), (2, 3, 8, 8)), "resample": (Resampler(), (2, 3, 6, 8)),
                    "recurrent": (Recurrent().eval(), (2, 5, 3))}[name]
    return model, rng.standard_normal(shape).astype(np.float32)


FAMILIES = ["mlp", "cnn_bn", "residual", "sigmoid_tanh", "resnet", "gpt", "cond", "while", "scan_dim1", "vision",
            "resample", "recurrent"]


@functools.lru_cache(maxsize=None)
def plan_of(name, folder):
    if name in ("mlp", "cnn_bn", "residual", "sigmoid_tanh", "resnet", "gpt"):
        import pathlib

        plan, _, x = exported(name, pathlib.Path(folder))
        return plan, x
    model, x = _own(name)
    return gc.export(model, (x,), f"{folder}/{name}.graphc"), x


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("opsets"))


def outputs(result) -> list:
    return [np.asarray(r) for r in (result if isinstance(result, (tuple, list)) else [result])]


def close(got, want, what):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, w.shape, g.dtype, w.dtype)
        scale = max(1.0, float(np.abs(w).max())) if w.size and w.dtype.kind == "f" else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=TOL * scale, err_msg=what)


def test_the_opsets_are_13_to_28():
    assert list(OPSETS) == list(range(13, 29))


@pytest.mark.parametrize("opset", list(OPSETS))
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_at_every_opset(name, opset, folder, tmp_path):
    if opset > onnx.defs.onnx_opset_version():
        with pytest.raises(gc.GraphcError, match="newer than the installed onnx"):
            graph_to_onnx(plan_of(name, folder)[0].graph, opset)
        return
    plan, x = plan_of(name, folder)
    model = graph_to_onnx(plan.graph, opset)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain == ""] == [opset]
    path = tmp_path / f"{name}_{opset}.onnx"
    path.write_bytes(model.SerializeToString())
    xb = batch_like(x, 2 * x.shape[0] + 1, np.random.default_rng(opset))  # another batch size than the example's
    want = outputs(plan(xb))
    close(outputs(gc.load(path)(xb)), want, f"{name} at opset {opset}, imported back")
    if HAVE_ORT:
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        close(outputs(session.run(None, {session.get_inputs()[0].name: xb})), want, f"{name} at opset {opset}, ORT")


def test_an_opset_outside_13_to_28_is_refused(folder):
    plan, _ = plan_of("mlp", folder)
    for opset in (12, 29):
        with pytest.raises(gc.GraphcError, match=rf"opset {opset} is not supported; graphc writes opsets 13-28"):
            graph_to_onnx(plan.graph, opset)
