"""ONNX export (``gc.export(model, inputs, "m.onnx")``): checked by onnx's own checker, default
domain only, run by onnxruntime (when installed; CI installs it) to graphc's outputs.

Tolerance: onnxruntime's kernels (MLAS GEMMs, its own convolutions, its BN folding) add in
another order than numpy/OpenBLAS: float32 results agree to 1e-5 of the output's scale.
"""
from __future__ import annotations

import builtins
import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from test_pytorch_models import BUILDERS, eval_setup, logits_only

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
RTOL = 1e-5  # module docstring


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return (self.conv2(self.bn1(self.conv1(x)).relu()) + x).relu()


def families():
    gc.manual_seed(0)
    return {
        "mlp": (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), (4, 8)),
        "cnn_bn": (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(4, 6, 3), nn.ReLU6(), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(6, 3)), (2, 1, 10, 10)),
        "residual": (nn.Sequential(Residual(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)), (2, 4, 6, 6)),
        "sigmoid_tanh": (nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid(), nn.LeakyReLU(0.2),
                                       nn.Linear(8, 5), nn.LogSoftmax(dim=1)), (4, 8)),
    }


def perturb_bn(model, rng):
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            c = module.num_features
            module.running_mean.data = rng.standard_normal(c).astype(np.float32)
            module.running_var.data = rng.uniform(0.5, 2.0, c).astype(np.float32)


def exported(name, tmp_path):
    """``(plan, onnx path, example input)`` for a model family or a PyTorch-idiom model file."""
    if name in BUILDERS:
        model, _, x = eval_setup(name)
        model = logits_only(model) if name == "gpt" else model
    else:
        model, shape = families()[name]
        perturb_bn(model, np.random.default_rng(1))
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    path = tmp_path / f"{name}.onnx"
    return gc.export(model, (x,), path), path, x


def batch_like(x: np.ndarray, batch: int, rng) -> np.ndarray:
    """A fresh input of ``batch`` rows shaped like ``x``: normal floats, or tokens in x's range."""
    if x.dtype.kind == "f":
        return rng.standard_normal((batch, *x.shape[1:])).astype(x.dtype)
    return rng.integers(0, int(x.max()) + 1, (batch, *x.shape[1:])).astype(x.dtype)


NAMES = ["mlp", "cnn_bn", "residual", "sigmoid_tanh", "resnet", "resnet_groupnorm", "mobilenetv2", "mnist", "gpt"]


@pytest.mark.parametrize("name", NAMES)
def test_export_passes_the_full_checker_in_the_default_domain(name, tmp_path):
    plan, path, _ = exported(name, tmp_path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert {n.domain for n in model.graph.node} == {""}
    assert [o.version for o in model.opset_import if o.domain == ""] == [17]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"  # the batch dim is dynamic
    assert {i.name for i in model.graph.initializer} >= set(plan.graph.constants)  # weights as initializers
    fused = {"linear_relu", "conv2d_relu"} & {n.op for n in plan.graph.nodes}
    assert not fused or "Relu" in {n.op_type for n in model.graph.node}  # fused ops written back as parts


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")
def test_onnxruntime_runs_the_export_to_graphcs_outputs(name, tmp_path):
    import onnxruntime

    plan, path, x = exported(name, tmp_path)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for batch in (1, x.shape[0], 3 * x.shape[0] + 1):
        xb = batch_like(x, batch, rng)
        want = np.asarray(plan(xb))
        got = session.run(None, {plan.graph.inputs[0].name: xb})[0]
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, err_msg=f"batch {batch}")


def test_node_names_carry_module_paths_and_doc_strings_source_lines(tmp_path):
    _, path, _ = exported("residual", tmp_path)
    nodes = onnx.load(str(path)).graph.node
    conv = [n for n in nodes if n.op_type == "Conv"]
    assert conv[0].name.startswith("0.conv1") and conv[1].name.startswith("0.conv2")
    assert all(n.doc_string.startswith("test_onnx_export.py:") for n in conv)


def test_export_of_a_saved_inference_plan_and_opset(tmp_path):
    plan, _, x = exported("mlp", tmp_path)
    gc.export(plan, None, tmp_path / "again.onnx", opset=13)
    model = onnx.load(str(tmp_path / "again.onnx"))
    assert [o.version for o in model.opset_import] == [13]
    with pytest.raises(gc.GraphcError, match="opset 30 is not supported"):
        gc.export(plan, None, tmp_path / "bad.onnx", opset=30)
    with pytest.raises(gc.GraphcError, match="opset applies to ONNX files"):
        gc.export(nn.Linear(2, 2), (np.zeros((1, 2), np.float32),), tmp_path / "m.graphc", opset=17)


def test_ops_without_an_onnx_form_are_refused_naming_the_op_and_line(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AdaptiveAvgPool2d(2))  # only output size 1 has an ONNX op
    with pytest.raises(gc.GraphcError, match=r"adaptive_avg_pool2d to \(2, 2\) has no ONNX op") as info:
        gc.export(model, (np.zeros((2, 1, 8, 8), np.float32),), tmp_path / "g.onnx")
    assert "1 (AdaptiveAvgPool2d) at test_onnx_export.py:" in str(info.value)
    assert not (tmp_path / "g.onnx").exists()


def test_missing_onnx_package_names_the_extra(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_onnx(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "onnx" or name.startswith("onnx.")):  # not graphc.onnx, imported relatively
            raise ImportError("No module named 'onnx'")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    with pytest.raises(gc.GraphcError, match=r"pip install 'graphc\[onnx\]'"):
        gc.export(nn.Linear(2, 2), (np.zeros((1, 2), np.float32),), tmp_path / "m.onnx")


def test_cli_convert_writes_an_onnx_file_from_a_saved_plan(tmp_path):
    import subprocess
    import sys

    plan, _, x = exported("cnn_bn", tmp_path)
    plan.save(tmp_path / "m.graphc")
    cmd = [sys.executable, "-m", "graphc", "convert", str(tmp_path / "m.graphc"), str(tmp_path / "c.onnx")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    onnx.checker.check_model(onnx.load(str(tmp_path / "c.onnx")), full_check=True)
    bad = subprocess.run(cmd[:-1] + [str(tmp_path / "c.txt")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "writes ONNX files (.onnx) or plan files (.graphc)" in bad.stderr


def test_every_edge_has_a_shape_and_outputs_need_no_identity(tmp_path):
    """Netron labels each edge with its value_info shape; the last node writes the output name."""
    plan, path, _ = exported("cnn_bn", tmp_path)
    graph = onnx.load(str(path)).graph
    assert graph.node[-1].op_type != "Identity" and graph.node[-1].output[0] == graph.output[0].name
    shaped = {v.name for v in graph.value_info}
    computed = {n.output[0] for n in graph.node} - {o.name for o in graph.output}
    graphc_values = {v.name for n in plan.graph.nodes for v in n.outputs}
    assert computed & graphc_values <= shaped and len(shaped) == len(plan.graph.nodes) - 1
    assert graph.value_info[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_a_value_broadcast_to_a_symbolic_dim_it_lacks_reads_the_dim_at_run_time(tmp_path):
    """``gc.empty(x.size(0), 1).fill_(v)``: a scalar expanded to ``[N, 1]`` (Expand's 1 would keep
    the scalar's 1), next to a symbolic dim the input has (written as 1)."""
    ort = pytest.importorskip("onnxruntime")

    class Filled(nn.Module):
        def forward(self, x):
            return gc.empty(x.size(0), 1).fill_(2.0) + x[:, :1].expand(x.size(0), 3)

    path = tmp_path / "filled.onnx"
    gc.export(Filled(), (np.zeros((4, 4), np.float32),), path)
    session = ort.InferenceSession(str(path))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_array_equal(got, 2.0 + np.repeat(x[:, :1], 3, axis=1))
