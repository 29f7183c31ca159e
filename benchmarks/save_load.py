"""Plan file throughput: ``plan.save`` / ``gc.load`` of a training plan (an MLP 784-H-H-10 with
Adam: parameters and both moments, 67 MiB at H=2048) against safetensors' ``save_file`` /
``load_file`` of the same arrays, when the ``safetensors`` package is installed.

Run: .venv/bin/python benchmarks/save_load.py [--hidden 2048] [--rounds 9] [--dir DIR]

Rounds are interleaved (graphc, then safetensors, the order alternating every round) and the
medians are printed with the ratios graphc / safetensors (lower is better). ``plan.save`` is
atomic and durable (a temporary file, fsync, ``os.replace``, fsync of the folder) and
``save_file`` is neither, so "safetensors durable" also times ``save_file`` followed by the
same fsync and rename: the difference is the cost of durability, not of the format. Not a
test: the numbers depend on the disk and on what else runs on the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import graphc as gc
from graphc import nn, optim

try:
    from safetensors.numpy import load_file, save_file
except ImportError:  # graphc's own numbers only
    load_file = save_file = None


def make_plan(hidden: int = 2048, batch: int = 32):
    """A training plan with Adam after one step (its moments are then non-zero)."""
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=batch).astype(np.int64)
    plan = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters(), 1e-3))
    plan(x, y)
    return plan


def _durable_save_file(arrays: dict, path: str) -> None:
    """``save_file`` with plan.save's durability: a temporary file, fsync, rename, folder fsync."""
    tmp = path + ".tmp"
    save_file(arrays, tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1e3


def measure(hidden: int = 2048, rounds: int = 9, folder: str | None = None) -> dict:
    """Median milliseconds of each operation (``None`` where safetensors is missing) and the file size."""
    plan = make_plan(hidden)
    arrays = {name: np.asarray(a) for name, a in plan.state.items()}  # contiguous already
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        plan_path, st_path = os.path.join(tmp, "plan.graphc"), os.path.join(tmp, "plan.safetensors")
        plan.save(plan_path)  # a first round trip: warms up, and checks that the arrays come back
        loaded = gc.load(plan_path)
        assert all(np.array_equal(loaded.state[k], v) for k, v in arrays.items())
        graphc_ops = {"graphc save": lambda: plan.save(plan_path), "graphc load": lambda: gc.load(plan_path)}
        st_ops = {}
        if save_file is not None:
            st_ops = {"safetensors save": lambda: save_file(arrays, st_path),
                      "safetensors load": lambda: load_file(st_path),
                      "safetensors durable save": lambda: _durable_save_file(arrays, st_path)}
            st_ops["safetensors save"]()
        times = {name: [] for name in [*graphc_ops, *st_ops]}
        for r in range(rounds):
            groups = [graphc_ops, st_ops] if r % 2 == 0 else [st_ops, graphc_ops]
            for group in groups:
                for name, op in group.items():
                    times[name].append(_timed(op))
        result = {name: statistics.median(t) for name, t in times.items()}
        result["MiB"] = os.path.getsize(plan_path) / 2**20
    return result


def report(result: dict) -> str:
    lines = [f"plan file: {result['MiB']:.1f} MiB (MLP with Adam); medians of interleaved rounds"]
    for op in ("save", "load"):
        ours = result[f"graphc {op}"]
        line = f"  {op}: graphc {ours:7.1f} ms"
        theirs = result.get(f"safetensors {op}")
        if theirs is not None:
            line += f"   safetensors {theirs:7.1f} ms   ratio {ours / theirs:4.2f}"
        durable = result.get(f"safetensors durable {op}")
        if durable is not None:
            line += f"   (safetensors + fsync + rename {durable:7.1f} ms, ratio {ours / durable:4.2f})"
        lines.append(line)
    if save_file is None:
        lines.append("  (safetensors is not installed: graphc's own numbers only)")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=2048, help="hidden width H (2048: a 67 MiB file)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (the median is printed)")
    parser.add_argument("--dir", default=None, help="folder for the files (default: the system's temp folder)")
    args = parser.parse_args(argv)
    if args.hidden < 1 or args.rounds < 1:
        parser.error("--hidden and --rounds must be at least 1")
    print(report(measure(args.hidden, args.rounds, args.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
