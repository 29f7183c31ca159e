"""ONNX import (``gc.load("m.onnx")``): round trips through graphc's own export, and models
that PyTorch's ``torch.onnx.export`` wrote (each op alone: test_onnx_readers.py; hostile
files: test_onnx_hostile.py).

Tolerances:
- graphc export -> import: the same ops over the same constants run the same kernels, so
  the outputs are identical (exact equality).
- PyTorch's exports: PyTorch's kernels and numpy/OpenBLAS sum in different orders; float32
  results agree to 1e-5 of the output's scale.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import graphc as gc
from test_onnx_export import NAMES, batch_like, exported
from test_pytorch_models import eval_setup, first, torch_twin

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")

HAVE_TORCH = importlib.util.find_spec("torch") is not None
RTOL = 1e-5  # module docstring


def close(got, want, rtol=RTOL):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


# ---- graphc -> ONNX -> graphc -------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_export_then_import_gives_the_same_graph_and_numbers(name, tmp_path):
    plan, path, x = exported(name, tmp_path)
    imported = gc.load(path)
    assert [n.op for n in imported.graph.nodes] == [n.op for n in plan.graph.nodes]  # fusions come back too
    assert [str(v.type) for v in imported.graph.inputs] == [str(v.type) for v in plan.graph.inputs]
    rng = np.random.default_rng(5)
    for batch in (1, x.shape[0], 3 * x.shape[0] + 1):
        xb = batch_like(x, batch, rng)
        np.testing.assert_array_equal(np.asarray(imported(xb)), np.asarray(plan(xb)), err_msg=f"batch {batch}")


@pytest.mark.parametrize("opset", [13, 17, 18, 21])
def test_every_supported_opset_round_trips(opset, tmp_path):
    model, _, x = eval_setup("gpt")  # reductions (axes attr before 18, input after), slices, gathers
    from test_pytorch_models import logits_only

    plan = gc.export(logits_only(model), (x,), tmp_path / "g.onnx", opset=opset)
    np.testing.assert_array_equal(gc.load(tmp_path / "g.onnx")(x), plan(x))


def test_imported_names_and_lines_come_back(tmp_path):
    plan, path, _ = exported("residual", tmp_path)
    imported = gc.load(path)
    convs = [n for n in imported.graph.nodes if n.op.startswith("conv2d")]
    assert [n.meta["module"] for n in convs] == ["0.conv1", "0.conv2"]  # the module paths
    assert all(n.meta["source"].startswith("test_onnx_export.py:") for n in convs)  # the user's lines
    assert set(imported.graph.constants) == set(plan.graph.constants)  # initializer names kept
    text = str(imported.graph)
    assert "0.conv1 (Conv) at test_onnx_export.py:" in text


def test_an_imported_plan_saves_loads_prints_and_draws(tmp_path):
    plan, path, x = exported("cnn_bn", tmp_path)
    imported = gc.load(path)
    assert imported.kind == "inference" and imported.producer.startswith("ONNX opset 17 from graphc")
    imported.save(tmp_path / "m.graphc")
    again = gc.load(tmp_path / "m.graphc")
    np.testing.assert_array_equal(again(x), plan(x))
    from graphc.viz import write

    svg = write(imported, tmp_path / "m.svg", layout="python").read_text()
    assert "conv2d_relu" in svg
    assert "%" in str(imported.graph) and "return" in str(imported.graph)


def cli(*args, cwd):
    done = subprocess.run([sys.executable, "-m", "graphc", *args], cwd=cwd, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def test_cli_draws_inspects_runs_and_converts_onnx_files(tmp_path):
    plan, path, x = exported("mlp", tmp_path)
    assert cli("viz", path.name, "-o", "g.svg", cwd=tmp_path) == (0, "wrote g.svg\n")
    code, text = cli("inspect", path.name, cwd=tmp_path)
    assert code == 0 and "producer: ONNX opset 17 from graphc" in text and "linear_relu" in text
    np.save(tmp_path / "x.npy", x)
    assert cli("run", path.name, "--input", "x.npy", "--output", "y.npy", cwd=tmp_path)[0] == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), plan(x))
    assert cli("convert", path.name, "m.graphc", cwd=tmp_path) == (0, "wrote m.graphc\n")
    np.testing.assert_array_equal(gc.load(tmp_path / "m.graphc")(x), plan(x))
    code, text = cli("convert", path.name, "m.txt", cwd=tmp_path)
    assert code == 2 and "writes ONNX files (.onnx) or plan files (.graphc)" in text and "Traceback" not in text


# ---- PyTorch -> ONNX -> graphc --------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_TORCH, reason="needs PyTorch to write the ONNX files (CI installs it)")
@pytest.mark.filterwarnings("ignore")  # the legacy exporter's deprecation and tracer warnings
@pytest.mark.parametrize("case", ["resnet", "resnet_groupnorm", "mobilenetv2", "mnist", "gpt"])
def test_torch_onnx_export_imports_and_matches_pytorch(case, tmp_path):
    import torch

    _, state, x = eval_setup(case)
    twin = torch_twin(case, state).eval()
    path = tmp_path / f"{case}.onnx"
    with torch.no_grad():  # the TorchScript-based exporter, which needs no onnxscript
        torch.onnx.export(twin, (torch.from_numpy(x),), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    plan = gc.load(path)
    assert plan.graph.inputs[0].type.shape[0] == "N"  # the named dynamic dim is graphc's batch dim
    rng = np.random.default_rng(6)
    for batch in (1, x.shape[0], 3 * x.shape[0] + 1):
        xb = batch_like(x, batch, rng)
        with torch.no_grad():
            want = first(twin(torch.from_numpy(xb))).numpy()
        close(np.asarray(first(plan(xb))), want)


@pytest.mark.skipif(not HAVE_TORCH, reason="needs PyTorch to write the ONNX file (CI installs it)")
@pytest.mark.filterwarnings("ignore")  # the legacy exporter's deprecation warning
def test_a_fixed_batch_export_imports_at_that_batch(tmp_path):
    import torch

    _, state, x = eval_setup("mnist")
    twin = torch_twin("mnist", state).eval()
    with torch.no_grad():
        torch.onnx.export(twin, (torch.from_numpy(x),), str(tmp_path / "m.onnx"), dynamo=False, opset_version=17)
        want = twin(torch.from_numpy(x)).numpy()
    plan = gc.load(tmp_path / "m.onnx")
    assert plan.graph.inputs[0].type.shape[0] == x.shape[0]
    close(plan(x), want)
    with pytest.raises(gc.ShapeError, match="expected f32\\[4,1,28,28\\]"):
        plan(x[:1])


def test_an_imported_plan_runs_on_cupy(tmp_path):
    from test_device import HAVE_CUDA, WHY

    if not HAVE_CUDA:
        pytest.skip(f"GPU test: {WHY}")
    plan, path, x = exported("cnn_bn", tmp_path)
    on_gpu = gc.load(path, device="cuda")
    close(on_gpu.backend.to_numpy(on_gpu(x)), plan(x))
