"""torchvision and timm classifiers exported by ``torch.onnx.export`` with a dynamic batch dim,
imported by graphc and checked against PyTorch, and timed against onnxruntime.

Two steps, because torchvision needs a torch build that graphc's test environment does not
install (CI pins torch 2.13.0, and PyPI's torchvision does not import beside it):

1. ``export`` (in an environment with torch, torchvision, timm and onnxscript, e.g. a venv with
   ``pip install torch==2.14.1 torchvision==0.29.1 timm onnx onnxscript``) writes, for each model
   with random weights, ``<name>.onnx`` (the TorchScript exporter, ``dynamo=False``, with the batch
   as a dynamic axis, opset 17) and ``<name>.dynamo.onnx`` (the default dynamo exporter, with a
   dynamic batch ``Dim``), plus PyTorch's float32 outputs at batch 1 and 8 (``<name>.npz``)::

       python benchmarks/onnx_zoo.py export /tmp/zoo [names...]

2. ``check`` (with graphc and onnxruntime) imports every file, runs it at batch 1 and 8, and
   reports the largest difference from PyTorch (absolute, and relative to the logits' scale),
   and the median time per call against onnxruntime's in the same process::

       python benchmarks/onnx_zoo.py check /tmp/zoo [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# name -> (constructor, input size); torchvision's and timm's own definitions
MODELS = {
    "resnet18": (lambda tv, timm: tv.resnet18(), 224),
    "resnet50": (lambda tv, timm: tv.resnet50(), 224),
    "mobilenet_v2": (lambda tv, timm: tv.mobilenet_v2(), 224),
    "mobilenet_v3_small": (lambda tv, timm: tv.mobilenet_v3_small(), 224),
    "efficientnet_b0": (lambda tv, timm: tv.efficientnet_b0(), 224),
    "convnext_tiny": (lambda tv, timm: tv.convnext_tiny(), 224),
    "densenet121": (lambda tv, timm: tv.densenet121(), 224),
    "googlenet": (lambda tv, timm: tv.googlenet(aux_logits=False, init_weights=True), 224),  # ceil_mode max pools
    "inception_v3": (lambda tv, timm: tv.inception_v3(aux_logits=False, init_weights=True), 299),
    "squeezenet1_0": (lambda tv, timm: tv.squeezenet1_0(), 224),
    "shufflenet_v2_x1_0": (lambda tv, timm: tv.shufflenet_v2_x1_0(), 224),
    "regnet_y_400mf": (lambda tv, timm: tv.regnet_y_400mf(), 224),
    "mnasnet0_5": (lambda tv, timm: tv.mnasnet0_5(), 224),
    "vgg11_bn": (lambda tv, timm: tv.vgg11_bn(), 224),
    "vit_b_16": (lambda tv, timm: tv.vit_b_16(), 224),
    "swin_t": (lambda tv, timm: tv.swin_t(), 224),
    "timm_vit_tiny": (lambda tv, timm: timm.create_model("vit_tiny_patch16_224"), 224),
    "timm_deit_small": (lambda tv, timm: timm.create_model("deit_small_patch16_224"), 224),
    "timm_convnext_atto": (lambda tv, timm: timm.create_model("convnext_atto"), 224),
    "timm_efficientnet_b0": (lambda tv, timm: timm.create_model("efficientnet_b0"), 224),
}
BATCHES = (1, 8)


def calibrated(model, size: int):
    """The model in eval mode with BatchNorm statistics from one training-mode pass over random
    images: with torchvision's initial running stats (mean 0, var 1) deep nets' logits vanish to
    1e-15 or blow up, and a comparison of such logits says nothing. Zero-initialised heads
    (torchvision's ViT) get small random weights for the same reason."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.momentum = None  # a cumulative average: one pass sets the statistics
        if isinstance(module, torch.nn.Linear) and not module.weight.detach().any():
            torch.nn.init.normal_(module.weight, std=0.02)  # ViT heads start at zero: all logits would be 0
    model.train()
    with torch.no_grad():
        model(torch.randn(16, 3, size, size))
    return model.eval()


def export(folder: str, names: list) -> None:
    import torch
    import timm
    import torchvision.models as tv

    os.makedirs(folder, exist_ok=True)
    for name in names:
        make, size = MODELS[name]
        torch.manual_seed(0)
        model = calibrated(make(tv, timm), size)
        rng = np.random.default_rng(0)
        inputs = {b: rng.standard_normal((b, 3, size, size)).astype(np.float32) for b in BATCHES}
        with torch.no_grad():
            outs = {b: model(torch.from_numpy(x)).numpy() for b, x in inputs.items()}
            exact = {b: model.double()(torch.from_numpy(x).double()).numpy() for b, x in inputs.items()}
            model.float()
        np.savez(os.path.join(folder, f"{name}.npz"), **{f"x{b}": x for b, x in inputs.items()},
                 **{f"y{b}": y for b, y in outs.items()}, **{f"y64_{b}": y for b, y in exact.items()})
        example = (torch.from_numpy(inputs[8][:2]),)  # torch.export specializes a batch of 1
        started = time.perf_counter()
        torch.onnx.export(model, example, os.path.join(folder, f"{name}.onnx"), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        try:
            torch.onnx.export(model, example, os.path.join(folder, f"{name}.dynamo.onnx"), dynamo=True,
                              input_names=["x"], output_names=["logits"],
                              dynamic_shapes=({0: torch.export.Dim("N", min=1, max=1024)},), external_data=False)
        except Exception as e:  # noqa: BLE001  (an exporter failure is reported, the other file stays)
            print(f"{name}: the dynamo exporter failed: {type(e).__name__}: {str(e)[:200]}")
        print(f"{name}: exported in {time.perf_counter() - started:.1f} s")


def _median_time(run, repeat: int) -> float:
    run()  # the first call builds what is cached (a graphc program per batch size)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def check(folder: str, repeat: int) -> int:
    import onnxruntime

    import graphc as gc

    failures = 0
    print("rel: the largest difference from PyTorch float32, over max(1, |logits|); vs f64: graphc's and PyTorch "
          "float32's own distance from PyTorch float64, the same way")
    print(f"{'model':<26} {'batch':>5} {'rel':>8} {'vs f64':>17} {'graphc ms':>10} {'ort ms':>8} {'ratio':>6}")
    for name in MODELS:
        reference = os.path.join(folder, f"{name}.npz")
        if not os.path.exists(reference):
            continue
        data = np.load(reference)
        for suffix in ("", ".dynamo"):
            path = os.path.join(folder, f"{name}{suffix}.onnx")
            if not os.path.exists(path):
                continue
            label = name + suffix
            try:
                started = time.perf_counter()
                plan = gc.load(path)
                load_s = time.perf_counter() - started
                session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                feed = session.get_inputs()[0].name
                for b in BATCHES:
                    x, want, exact = data[f"x{b}"], data[f"y{b}"], data[f"y64_{b}"]
                    got = np.asarray(plan(x))
                    scale = max(1.0, float(np.abs(want).max()))
                    rel = float(np.abs(got - want).max()) / scale
                    ours64, torch64 = (float(np.abs(v - exact).max()) / scale for v in (got, want))
                    ours = _median_time(lambda: plan(x), repeat)
                    theirs = _median_time(lambda: session.run(None, {feed: x}), repeat)
                    failures += rel > 1e-5
                    print(f"{label:<26} {b:>5} {rel:>8.1e} {ours64:>8.1e} {torch64:>8.1e} {ours * 1e3:>10.1f} "
                          f"{theirs * 1e3:>8.1f} {ours / theirs:>6.2f}" + ("  OVER 1e-5" if rel > 1e-5 else ""))
                print(f"{label:<26} import {load_s:.2f} s")
            except gc.GraphcError as e:
                failures += 1
                print(f"{label:<26} REFUSED: {' '.join(str(e).split())[:300]}")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("export", "check"))
    parser.add_argument("folder")
    parser.add_argument("names", nargs="*", default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.step == "export":
        export(args.folder, args.names)
        return 0
    return 1 if check(args.folder, args.repeat) else 0


if __name__ == "__main__":
    sys.exit(main())
