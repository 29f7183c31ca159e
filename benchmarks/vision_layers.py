"""Vision and generative layers (issue 33), graphc vs PyTorch eager on the same data and
weights, measured in one run: forward + backward (a loss ``sum(layer(x * s) * g)``, gradients
w.r.t. the layer's parameters and the scalar s, so the backward runs through the layer to its
input) of every layer the issue added: transposed and padded convolutions, unfold/fold,
padding in every mode, upsampling in every mode, pixel (un)shuffle, grid sampling, instance,
group, layer and local-response norms, the new activations, and pooling with ceil_mode,
count_include_pad, divisor_override, indices and unpooling, adaptive max, LP, 1-D pools.

Images are (8, 16, 32, 32) float32, sequences (8, 16, 256). graphc compiles each step once
(``gc.compile`` of a function calling ``loss.backward()``), PyTorch runs it eagerly. Before
timing, the largest relative difference of the loss and the gradients is printed. Calls are
timed in interleaved rounds (graphc, then PyTorch, ``--calls`` calls per round); each column is
the median round's time per call (ms); the ratio is graphc / PyTorch (lower: graphc is
faster). Every library runs on one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
MKL_NUM_THREADS = 1 unless set).

Run: .venv/bin/python benchmarks/vision_layers.py [--rounds 5] [--calls 3] [--only Pool]

Not a test: the numbers depend on the machine and on what else runs on it; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy and torch load
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import graphc as gc  # noqa: E402
from graphc import nn  # noqa: E402
from graphc.apps.bench_harness import blas_line, interleaved_ms  # noqa: E402

import torch  # noqa: E402

THREADS = int(os.environ["OMP_NUM_THREADS"])
torch.set_num_threads(THREADS)
SHAPE, SEQ = (8, 16, 32, 32), (8, 16, 256)
THETA = np.array([[0.9, -0.2, 0.05], [0.15, 1.1, -0.1]], np.float32)  # a rotation, scale and shift


def _unpool(lib):
    class PoolUnpool(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool, self.unpool = lib.nn.MaxPool2d(2, return_indices=True), lib.nn.MaxUnpool2d(2)

        def forward(self, x):
            return self.unpool(*self.pool(x))
    return PoolUnpool()


def _grid(lib):
    class AffineSample(lib.nn.Module):
        def forward(self, x):
            n = x.shape[0]
            theta = (x[:, :2, :1, :3] * 0).reshape(n, 2, 3) + lib.tensor(THETA)  # (N, 2, 3), N symbolic
            grid = lib.nn.functional.affine_grid(theta, (n, 16, 32, 32), align_corners=False)
            return lib.nn.functional.grid_sample(x, grid, align_corners=False)
    return AffineSample()


def _fold(lib):
    return lib.nn.Sequential(lib.nn.Unfold(3, padding=1), lib.nn.Fold((32, 32), 3, padding=1))


WORKLOADS = {  # name: (the layer from torch or graphc, input shape)
    "ConvTranspose2d": (lambda lib: lib.nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), SHAPE),
    "ConvTranspose1d": (lambda lib: lib.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1), SEQ),
    "Conv2d reflect": (lambda lib: lib.nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"), SHAPE),
    "Conv2d same 4x4": (lambda lib: lib.nn.Conv2d(16, 16, 4, padding="same"), SHAPE),
    "Conv1d circular": (lambda lib: lib.nn.Conv1d(16, 16, 5, padding=2, padding_mode="circular"), SEQ),
    "Unfold+Fold": (_fold, SHAPE),
    "ReflectionPad2d": (lambda lib: lib.nn.ReflectionPad2d(2), SHAPE),
    "ReplicationPad2d": (lambda lib: lib.nn.ReplicationPad2d(2), SHAPE),
    "ZeroPad2d": (lambda lib: lib.nn.ZeroPad2d((1, 2, 3, 0)), SHAPE),
    "ReflectionPad1d": (lambda lib: lib.nn.ReflectionPad1d(3), SEQ),
    "Upsample nearest": (lambda lib: lib.nn.Upsample(scale_factor=2, mode="nearest"), SHAPE),
    "Upsample bilinear": (lambda lib: lib.nn.Upsample(scale_factor=2, mode="bilinear"), SHAPE),
    "Upsample bicubic": (lambda lib: lib.nn.Upsample(scale_factor=1.5, mode="bicubic"), SHAPE),
    "PixelShuffle": (lambda lib: lib.nn.PixelShuffle(2), SHAPE),
    "PixelUnshuffle": (lambda lib: lib.nn.PixelUnshuffle(2), SHAPE),
    "affine_grid+grid_sample": (_grid, SHAPE),
    "InstanceNorm2d": (lambda lib: lib.nn.InstanceNorm2d(16, affine=True), SHAPE),
    "InstanceNorm1d": (lambda lib: lib.nn.InstanceNorm1d(16, affine=True), SEQ),
    "GroupNorm": (lambda lib: lib.nn.GroupNorm(4, 16), SHAPE),
    "LayerNorm CHW": (lambda lib: lib.nn.LayerNorm([16, 32, 32]), SHAPE),
    "LocalResponseNorm": (lambda lib: lib.nn.LocalResponseNorm(5), SHAPE),
    "PReLU": (lambda lib: lib.nn.PReLU(16), SHAPE),
    "ELU": (lambda lib: lib.nn.ELU(), SHAPE),
    "SELU": (lambda lib: lib.nn.SELU(), SHAPE),
    "CELU": (lambda lib: lib.nn.CELU(0.7), SHAPE),
    "Mish": (lambda lib: lib.nn.Mish(), SHAPE),
    "Softsign": (lambda lib: lib.nn.Softsign(), SHAPE),
    "Tanhshrink": (lambda lib: lib.nn.Tanhshrink(), SHAPE),
    "Threshold": (lambda lib: lib.nn.Threshold(0.1, 20.0), SHAPE),
    "Hardsigmoid": (lambda lib: lib.nn.Hardsigmoid(), SHAPE),
    "LogSigmoid": (lambda lib: lib.nn.LogSigmoid(), SHAPE),
    "Softmin": (lambda lib: lib.nn.Softmin(dim=1), SHAPE),
    "Softmax2d": (lambda lib: lib.nn.Softmax2d(), SHAPE),
    "MaxPool2d ceil": (lambda lib: lib.nn.MaxPool2d(3, 2, ceil_mode=True), SHAPE),
    "AvgPool2d excl. pad": (lambda lib: lib.nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), SHAPE),
    "AvgPool2d divisor": (lambda lib: lib.nn.AvgPool2d(2, divisor_override=3), SHAPE),
    "MaxPool2d+MaxUnpool2d": (_unpool, SHAPE),
    "AdaptiveMaxPool2d": (lambda lib: lib.nn.AdaptiveMaxPool2d(5), SHAPE),
    "AdaptiveMaxPool1d": (lambda lib: lib.nn.AdaptiveMaxPool1d(10), SEQ),
    "LPPool2d": (lambda lib: lib.nn.LPPool2d(2, 3, stride=2), SHAPE),
    "MaxPool1d": (lambda lib: lib.nn.MaxPool1d(3, 2), SEQ),
    "AvgPool1d": (lambda lib: lib.nn.AvgPool1d(3, 2), SEQ),
}


class Scaled(nn.Module):
    """The layer after a scalar parameter s: the backward reaches the input while x stays a plan input."""

    def __init__(self, layer):
        super().__init__()
        self.s, self.layer = nn.Parameter(gc.ones(1)), layer

    def forward(self, x):
        return self.layer(x * self.s)


def setup(name, x, g, rng):
    ours = Scaled(WORKLOADS[name][0](gc))
    for p in ours.layer.parameters():  # non-default weights, the same on both sides
        p.numpy()[...] = rng.uniform(0.5, 1.5, p.shape)
    theirs = WORKLOADS[name][0](torch)
    theirs.load_state_dict({k: torch.tensor(np.array(v)) for k, v in ours.layer.state_dict().items()})
    ts = torch.ones(1, requires_grad=True)

    def step(x, g):
        for p in ours.parameters():
            p.grad = None
        loss = (ours(x) * g).sum()
        loss.backward()
        return loss
    plan = gc.compile(step, example_inputs=(x, g))
    tx, tg = torch.tensor(x), torch.tensor(g)

    def torch_step():
        ts.grad = None
        for p in theirs.parameters():
            p.grad = None
        loss = (theirs(tx * ts) * tg).sum()
        loss.backward()
        return loss
    loss, ref = float(plan(x, g)), float(torch_step().detach())
    diffs = [abs(loss - ref) / max(abs(ref), 1.0)]
    pairs = [(ours.s.grad.numpy(), ts.grad.numpy())]
    pairs += [(p.grad.numpy(), q.grad.numpy()) for p, q in zip(ours.layer.parameters(), theirs.parameters())]
    for a, b in pairs:
        diffs.append(float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1.0))
    return (lambda: plan(x, g)), torch_step, max(diffs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=3, help="calls per round")
    parser.add_argument("--only", default="", help="run the workloads whose name contains this")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"vision and generative layers, forward + backward, float32 images {SHAPE} and sequences {SEQ}, CPU, "
          f"{THREADS} thread(s); median of {args.rounds} interleaved rounds x {args.calls} calls")
    print(blas_line())
    print(f"{'workload':<24}{'max diff':>10}{'graphc ms':>11}{'torch ms':>10}{'ratio':>8}")
    for name, (build, shape) in WORKLOADS.items():
        if args.only not in name:
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        with torch.no_grad():
            out = tuple(build(torch)(torch.tensor(x)).shape)
        g = rng.standard_normal(out).astype(np.float32)
        ours, theirs, diff = setup(name, x, g, rng)
        ms = interleaved_ms({"graphc": ours, "torch": theirs}, args.rounds, args.calls)
        print(f"{name:<24}{diff:>10.1e}{ms['graphc']:>11.2f}{ms['torch']:>10.2f}{ms['graphc'] / ms['torch']:>8.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
