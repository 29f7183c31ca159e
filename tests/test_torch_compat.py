"""PyTorch-compatibility shims (issue #34): torch.device/cuda/backends, torch.onnx.export,
Module.to's forms, factory device/dtype in constructors, legacy tensor constructors."""
from __future__ import annotations

import io

import numpy as np
import pytest

import graphc as gc
from graphc import nn

torch = pytest.importorskip("torch")


def test_device_and_cuda_queries():
    assert gc.cuda.is_available() is False and gc.cuda.device_count() == 0  # no cupy / GPU here
    d = gc.device("cuda" if gc.cuda.is_available() else "cpu")
    assert d == "cpu" and d.type == "cpu"
    assert gc.cuda.manual_seed(0) is None and gc.cuda.manual_seed_all(0) is None
    assert gc.backends.mps.is_available() is False
    assert gc.zeros(2).is_cuda is False and gc.zeros(2).device == gc.device("cpu")


def test_cuda_seed_does_not_touch_graphc_stream():
    gc.manual_seed(3)
    a = gc.randn(4).numpy()
    gc.manual_seed(3)
    gc.cuda.manual_seed_all(123)
    assert np.array_equal(gc.randn(4).numpy(), a)  # as PyTorch: a CUDA seed leaves the CPU stream alone


def test_cuda_available_with_a_fake_cupy_device(monkeypatch):
    import sys
    import types

    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    assert gc.cuda.is_available() and gc.cuda.device_count() == 2


def test_backends_flags_are_settable():
    for name in ("benchmark", "deterministic", "enabled"):
        before = getattr(gc.backends.cudnn, name)
        assert before == getattr(torch.backends.cudnn, name) or name == "benchmark"
        setattr(gc.backends.cudnn, name, not before)
        assert getattr(gc.backends.cudnn, name) is (not before)
        setattr(gc.backends.cudnn, name, before)
    gc.backends.cuda.matmul.allow_tf32 = False


@pytest.mark.parametrize("form", ["positional", "keyword", "dtype_only", "tensor"])
def test_module_to_forms(form):
    m = nn.Linear(3, 2)
    t = torch.nn.Linear(3, 2)
    call = {"positional": (("cpu", gc.float64), {}), "keyword": ((), {"device": "cpu", "dtype": gc.float64}),
            "dtype_only": ((gc.float64,), {}), "tensor": ((gc.zeros(1, dtype=gc.float64),), {})}[form]
    tcall = {"positional": (("cpu", torch.float64), {}), "keyword": ((), {"device": "cpu", "dtype": torch.float64}),
             "dtype_only": ((torch.float64,), {}), "tensor": ((torch.zeros(1, dtype=torch.float64),), {})}[form]
    assert m.to(*call[0], **call[1]) is m
    t.to(*tcall[0], **tcall[1])
    assert m.weight.dtype is gc.float64 and t.weight.dtype == torch.float64
    assert m.to(gc.device("cpu")).weight.device == "cpu"
    with pytest.raises(gc.GraphcError, match="floating point"):
        m.to(gc.int64)


CASES = [  # (graphc class, args with device "cpu" and dtype float64 positionally where PyTorch has them)
    ("Linear", (3, 4, True, "cpu", "float64")),
    ("Conv2d", (2, 4, 3, 1, 0, 1, 1, True, "zeros", "cpu", "float64")),
    ("Conv1d", (2, 4, 3, 1, 0, 1, 1, True, "zeros", "cpu", "float64")),
    ("ConvTranspose2d", (2, 4, 3, 1, 0, 0, 1, True, 1, "zeros", "cpu", "float64")),
    ("Embedding", (5, 3, None, None, 2.0, False, False, None, False, "cpu", "float64")),
    ("LayerNorm", (4, 1e-5, True, True, "cpu", "float64")),
    ("BatchNorm2d", (4, 1e-5, 0.1, True, True, "cpu", "float64")),
    ("BatchNorm1d", (4, 1e-5, 0.1, True, True, "cpu", "float64")),
    ("GroupNorm", (2, 4, 1e-5, True, "cpu", "float64")),
    ("InstanceNorm2d", (4, 1e-5, 0.1, True, True, "cpu", "float64")),
    ("PReLU", (1, 0.25, "cpu", "float64")),
    ("LSTM", (3, 4, 1, True, False, 0.0, False, 0, "cpu", "float64")),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_constructors_take_positional_device_and_dtype(name, args):
    mine = getattr(nn, name)(*[getattr(gc, a) if a == "float64" else a for a in args])
    theirs = getattr(torch.nn, name)(*[getattr(torch, a) if a == "float64" else a for a in args])
    ours = {k: v.dtype.name for k, v in mine.state_dict().items()}
    expected = {k: str(v.dtype).replace("torch.", "") for k, v in theirs.state_dict().items()}
    assert ours == expected


def test_constructor_keywords_and_cuda_without_gpu():
    assert nn.Linear(2, 2, device="cpu", dtype=gc.float64).weight.dtype is gc.float64
    assert nn.BatchNorm2d(3, bias=False).bias is None and torch.nn.BatchNorm2d(3, bias=False).bias is None
    with pytest.raises(gc.DeviceError):
        nn.Linear(2, 2, device="cuda")


def test_legacy_tensor_constructors():
    assert gc.Tensor(2, 3).shape == tuple(torch.Tensor(2, 3).shape) and gc.Tensor(2, 3).dtype is gc.float32
    for mine, theirs in ((gc.Tensor, torch.Tensor), (gc.FloatTensor, torch.FloatTensor),
                         (gc.DoubleTensor, torch.DoubleTensor), (gc.LongTensor, torch.LongTensor),
                         (gc.BoolTensor, torch.BoolTensor)):
        for args in (([1, 0, 2],), ((3, 1),), (2, 3), (4,)):
            a, b = mine(*args), theirs(*args)
            assert a.shape == tuple(b.shape) and a.dtype.name == str(b.dtype).replace("torch.", "")
            if len(args) == 1 and not isinstance(args[0], int):
                assert a.numpy().tolist() == b.tolist()
    assert isinstance(gc.LongTensor([1]), gc.LongTensor) and not isinstance(gc.zeros(1), gc.LongTensor)
    assert gc.get_default_dtype() is gc.float32 and str(torch.get_default_dtype()) == "torch.float32"
    with pytest.raises(gc.GraphcError, match="default dtype"):
        gc.set_default_dtype(gc.float64)


def test_pytorch_idiom_snippet_runs_with_graphc(monkeypatch):
    for name in ("benchmark", "deterministic"):  # the snippet sets them: put them back afterwards
        monkeypatch.setattr(gc.backends.cudnn, name, getattr(gc.backends.cudnn, name))
    source = '''
import graphc as torch
import graphc.nn as nn
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
w = torch.Tensor(4, 3)
nn.init.xavier_uniform_(w)
model = nn.Sequential(nn.Linear(3, 4, True, device, torch.float32), nn.LayerNorm(4, device=device),
                      nn.ReLU(), nn.Linear(4, 2)).to(device)
x = torch.FloatTensor([[1.0, 2.0, 3.0]]).to(device)
labels = torch.LongTensor([1])
out = model(x)
loss = nn.functional.cross_entropy(out, labels)
model = model.to(device, torch.float64)
result = (tuple(out.shape), out.is_cuda, model[0].weight.dtype, float(loss) > 0)
'''
    scope = {}
    exec(compile(source, "snippet.py", "exec"), scope)
    assert scope["result"] == ((1, 2), False, gc.float64, True)


def _model():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(1),
                         nn.Linear(4 * 5 * 6, 3)).eval()


@pytest.mark.parametrize("to_file", [True, False], ids=["path", "file_object"])
def test_onnx_export_runs_in_onnxruntime(tmp_path, to_file):
    ort = pytest.importorskip("onnxruntime")
    model, x = _model(), gc.randn(2, 3, 5, 6)
    target = tmp_path / "m.onnx"
    f = str(target) if to_file else io.BytesIO()
    gc.onnx.export(model, (x,), f, input_names=["image"], output_names=["logits"], opset_version=17,
                   dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    data = target.read_bytes() if to_file else f.getvalue()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["image"] and session.get_inputs()[0].shape[0] == "batch"
    assert [o.name for o in session.get_outputs()] == ["logits"]
    x5 = np.random.default_rng(0).standard_normal((5, 3, 5, 6)).astype(np.float32)
    got = session.run(["logits"], {"image": x5})[0]
    np.testing.assert_allclose(got, model(gc.tensor(x5)).numpy(), rtol=1e-4, atol=1e-5)


def test_onnx_export_dynamic_axes_beyond_batch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    path = tmp_path / "seq.onnx"
    gc.onnx.export(model, gc.randn(2, 5, 4), str(path), input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": [0, 1]})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape[:2] == ["batch", "seq"]
    x = np.ones((3, 7, 4), np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], model(gc.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("keyword,value", [("export_params", False), ("keep_initializers_as_inputs", True),
                                           ("export_modules_as_functions", True), ("dynamic_shapes", {"x": {}})])
def test_onnx_export_refuses_unsupported_values_by_name(keyword, value):
    with pytest.raises(gc.GraphcError, match=keyword):
        gc.onnx.export(nn.Linear(2, 2), gc.zeros(1, 2), io.BytesIO(), **{keyword: value})


def test_onnx_export_refuses_unknown_names():
    with pytest.raises(gc.GraphcError, match="dynamic_axes names 'z'"):
        gc.onnx.export(nn.Linear(2, 2), gc.zeros(2, 2), io.BytesIO(), input_names=["x"], dynamic_axes={"z": [0]})
    with pytest.raises(gc.GraphcError, match="unknown keyword 'bogus'"):
        gc.onnx.export(nn.Linear(2, 2), gc.zeros(2, 2), io.BytesIO(), bogus=1)
