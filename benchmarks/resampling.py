"""Padding and resampling, graphc vs PyTorch eager on the same data, measured in one run:
forward + backward (a loss ``sum(op(x) * g)``, gradients w.r.t. the image, and for grid_sample
the grid too) of

- reflect pad:   ``F.pad(x, (2, 2, 2, 2), mode="reflect")``;
- nearest x2:    ``F.interpolate(x, scale_factor=2)`` (two constant 0/1 matmuls);
- bilinear x2:   ``F.interpolate(x, scale_factor=2, mode="bilinear")`` (two constant matmuls);
- bicubic x1.5:  ``F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True)``;
- pixel shuffle: ``F.pixel_shuffle(x, 2)``;
- grid_sample:   ``F.grid_sample(x, grid)`` bilinear, zeros padding, a same-size grid;

on a (8, 16, 32, 32) float32 image. graphc compiles each step once (``gc.compile`` of a function
calling ``loss.backward()``; the loss is ``sum(op(x * s, grid * t) * g)`` with scalar parameters s, t, so
the backward runs through the op while the image stays a plan input), PyTorch runs it eagerly. Before
timing, the largest relative differences of the loss and the gradients of s and t are printed. Calls are timed in
interleaved rounds (graphc, then PyTorch, ``--calls`` calls per round); each column is the median
round's time per call (ms); the ratio is graphc / PyTorch (lower: graphc is faster). Every library
runs on one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = 1 unless set).

Run: .venv/bin/python benchmarks/resampling.py [--rounds 7] [--calls 5] [--only bilinear]

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
import graphc.nn.functional as gF  # noqa: E402
from graphc import nn  # noqa: E402
from graphc.apps.bench_harness import blas_line, interleaved_ms  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as tF  # noqa: E402

THREADS = int(os.environ["OMP_NUM_THREADS"])
torch.set_num_threads(THREADS)
SHAPE = (8, 16, 32, 32)

WORKLOADS = {
    "reflect pad": lambda F, x, grid: F.pad(x, (2, 2, 2, 2), mode="reflect"),
    "nearest x2": lambda F, x, grid: F.interpolate(x, scale_factor=2),
    "bilinear x2": lambda F, x, grid: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "bicubic x1.5": lambda F, x, grid: F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True),
    "pixel shuffle": lambda F, x, grid: F.pixel_shuffle(x, 2),
    "grid_sample": lambda F, x, grid: F.grid_sample(x, grid, align_corners=False),
}


class Scales(nn.Module):
    """One scalar per input, so that the backward pass runs through the op to both inputs while
    the inputs stay plan inputs (batch symbolic): the loss is ``sum(op(x * s, grid * t) * g)``."""

    def __init__(self):
        super().__init__()
        self.s, self.t = nn.Parameter(gc.ones(1)), nn.Parameter(gc.ones(1))


def setup(name, x, grid, g):
    op = WORKLOADS[name]
    ours = Scales()

    def step(x, grid, g):
        ours.s.grad = ours.t.grad = None
        loss = (op(gF, x * ours.s, grid * ours.t) * g).sum()
        loss.backward()
        return loss
    plan = gc.compile(step, example_inputs=(x, grid, g))
    tx, tgrid, tg = torch.tensor(x), torch.tensor(grid), torch.tensor(g)
    ts, tt = torch.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)

    def torch_step():
        ts.grad = tt.grad = None
        loss = (op(tF, tx * ts, tgrid * tt) * tg).sum()
        loss.backward()
        return loss
    loss, ref = float(plan(x, grid, g)), float(torch_step().detach())
    diffs = [abs(loss - ref) / max(abs(ref), 1.0), abs(float(ours.s.grad.numpy()[0]) - float(ts.grad[0])) / max(abs(float(ts.grad[0])), 1.0)]
    if name == "grid_sample":
        diffs.append(abs(float(ours.t.grad.numpy()[0]) - float(tt.grad[0])) / max(abs(float(tt.grad[0])), 1.0))
    return (lambda: plan(x, grid, g)), torch_step, max(diffs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=5, help="calls per round")
    parser.add_argument("--only", default="", help="run the workloads whose name contains this")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (SHAPE[0], SHAPE[2], SHAPE[3], 2)).astype(np.float32)
    print(f"padding and resampling, forward + backward, float32 {SHAPE}, CPU, {THREADS} thread(s); "
          f"median of {args.rounds} interleaved rounds x {args.calls} calls")
    print(blas_line())
    print(f"{'workload':<15}{'max diff':>10}{'graphc ms':>11}{'torch ms':>10}{'ratio':>8}")
    for name in WORKLOADS:
        if args.only not in name:
            continue
        out = tuple(WORKLOADS[name](tF, torch.tensor(x), torch.tensor(grid)).shape)
        g = rng.standard_normal(out).astype(np.float32)
        ours, theirs, diff = setup(name, x, grid, g)
        ms = interleaved_ms({"graphc": ours, "torch": theirs}, args.rounds, args.calls)
        print(f"{name:<15}{diff:>10.1e}{ms['graphc']:>11.2f}{ms['torch']:>10.2f}{ms['graphc'] / ms['torch']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
