"""Vision layers, graphc vs PyTorch eager on the same data and weights, measured in one run:
forward + backward (a loss ``sum(layer(x * s) * g)``, gradients w.r.t. the layer's parameters
and the scalar s, so the backward runs through the layer to its input) of

- InstanceNorm2d:     ``nn.InstanceNorm2d(16, affine=True)`` (a composite: mean, var, rsqrt);
- MaxPool2d ceil:     ``nn.MaxPool2d(3, 2, ceil_mode=True)`` (9 strided maxima, the backward a
                      first-maximum mask per offset);
- PReLU:              ``nn.PReLU(16)`` (a composite: where(x > 0, x, w * x));
- AdaptiveMaxPool2d:  ``nn.AdaptiveMaxPool2d(5)`` (overlapping bins from 32: one gather per bin
                      offset; the backward a bincount scatter-add);

on a (8, 16, 32, 32) float32 image. graphc compiles each step once (``gc.compile`` of a function
calling ``loss.backward()``), PyTorch runs it eagerly. Before timing, the largest relative
difference of the loss and the gradients is printed. Calls are timed in interleaved rounds
(graphc, then PyTorch, ``--calls`` calls per round); each column is the median round's time per
call (ms); the ratio is graphc / PyTorch (lower: graphc is faster). Every library runs on one
thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = 1 unless set).

Run: .venv/bin/python benchmarks/vision_layers.py [--rounds 7] [--calls 5] [--only Pool]

Not a test: the numbers depend on the machine and on what else runs on it; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy and torch load
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import graphc as gc  # noqa: E402
from graphc import nn  # noqa: E402
from graphc.apps.bench_harness import blas_line  # noqa: E402

import torch  # noqa: E402

THREADS = int(os.environ["OMP_NUM_THREADS"])
torch.set_num_threads(THREADS)
SHAPE = (8, 16, 32, 32)

WORKLOADS = {
    "InstanceNorm2d": lambda lib: lib.nn.InstanceNorm2d(16, affine=True),
    "MaxPool2d ceil": lambda lib: lib.nn.MaxPool2d(3, 2, ceil_mode=True),
    "PReLU": lambda lib: lib.nn.PReLU(16),
    "AdaptiveMaxPool2d": lambda lib: lib.nn.AdaptiveMaxPool2d(5),
}


class Scaled(nn.Module):
    """The layer after a scalar parameter s: the backward reaches the input while x stays a plan input."""

    def __init__(self, layer):
        super().__init__()
        self.s, self.layer = nn.Parameter(gc.ones(1)), layer

    def forward(self, x):
        return self.layer(x * self.s)


def setup(name, x, g, rng):
    ours = Scaled(WORKLOADS[name](gc))
    for p in ours.layer.parameters():  # non-default weights, the same on both sides
        p.numpy()[...] = rng.uniform(0.5, 1.5, p.shape)
    theirs = WORKLOADS[name](torch)
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


def timed_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure(fns: dict, args) -> dict:
    """Median ms per call of each fn, in interleaved rounds after a warm-up (3 calls or 0.3 s)."""
    for fn in fns.values():
        start = time.perf_counter()
        for i in range(100):
            fn()
            if i >= 2 and time.perf_counter() - start > 0.3:
                break
    times = {name: [] for name in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            times[name].append(timed_call(fn, args.calls))
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=5, help="calls per round")
    parser.add_argument("--only", default="", help="run the workloads whose name contains this")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    print(f"vision layers, forward + backward, float32 {SHAPE}, CPU, {THREADS} thread(s); "
          f"median of {args.rounds} interleaved rounds x {args.calls} calls")
    print(blas_line())
    print(f"{'workload':<19}{'max diff':>10}{'graphc ms':>11}{'torch ms':>10}{'ratio':>8}")
    for name in WORKLOADS:
        if args.only not in name:
            continue
        with torch.no_grad():
            out = tuple(WORKLOADS[name](torch)(torch.tensor(x)).shape)
        g = rng.standard_normal(out).astype(np.float32)
        ours, theirs, diff = setup(name, x, g, rng)
        ms = measure({"graphc": ours, "torch": theirs}, args)
        print(f"{name:<19}{diff:>10.1e}{ms['graphc']:>11.2f}{ms['torch']:>10.2f}{ms['graphc'] / ms['torch']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
