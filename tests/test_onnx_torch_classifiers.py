"""Classifiers written as torchvision and timm write them (tests/torch_classifiers.py), exported
by ``torch.onnx.export`` with a dynamic batch dim, by the TorchScript exporter (opset 17) and by
the default dynamo exporter, imported by ``gc.load`` and compared with PyTorch at batch 1 and 8.

Tolerance: 1e-5 of the logits' scale. PyTorch's float32 kernels and graphc's (numpy/OpenBLAS)
sum convolutions and matmuls in different orders; over these depths float32 rounding stays
near 1e-6 of the scale (measured here: 3e-8 to 1.2e-6), so 1e-5 is the issue's bound with margin,
not a loosened one. benchmarks/onnx_zoo.py runs the real torchvision and timm models.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch", reason="the exports need PyTorch (CI installs torch==2.13.0)")
from torch_classifiers import CLASSIFIERS, calibrated  # noqa: E402

TOL = 1e-5  # module docstring


def _export(model, size: int, path, dynamo: bool):
    """Not under no_grad: there nn.MultiheadAttention takes its fused fast path, which the
    TorchScript exporter cannot write (as torchvision's ViT is exported, with gradients on)."""
    example = torch.randn(2, 3, size, size)
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript (CI installs it)")
        batch = torch.export.Dim("batch", min=1, max=1024)
        torch.onnx.export(model, (example,), str(path), dynamo=True, input_names=["x"], output_names=["y"],
                          dynamic_shapes=({0: batch},), external_data=False)
    else:
        torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


@pytest.mark.filterwarnings("ignore")  # the exporters' deprecation and tracer warnings
@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_exported_classifier_imports_for_every_batch_and_matches_pytorch(name, dynamo, tmp_path):
    model, size = calibrated(name)
    path = tmp_path / f"{name}.onnx"
    _export(model, size, path, dynamo)
    plan = gc.load(path)
    assert plan.graph.inputs[0].type.shape[0] == "N", "the dynamic batch dim should stay symbolic"
    rng = np.random.default_rng(8)
    for batch in (1, 8):
        x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        got = np.asarray(plan(x))
        assert got.shape == want.shape and got.dtype == np.float32
        scale = float(np.abs(want).max())
        assert scale > 1e-2, f"{name}: logits of scale {scale} compare nothing"
        if batch > 1:  # and they depend on the image, not only on the head's bias
            assert float(want.std(0).max()) > 1e-2 * scale, f"{name}: the logits hardly depend on the input"
        error = float(np.abs(got - want).max()) / scale
        assert error <= TOL, f"{name} at batch {batch}: {error:.2e} of the logits' scale"
