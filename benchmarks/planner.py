"""The memory planner on long plans: a chain of N elementwise nodes (each reads the one before,
so every value is live for one step) built with the IR builder, saved, loaded, and run once.

Run: .venv/bin/python benchmarks/planner.py [--sizes 1000,10000,100000] [--rounds 3] [--profile N]

For each N it prints the median over rounds of: building and saving the file (not graphc's
hot path, shown for scale), ``gc.load``, the first call (which builds the program and plans
its memory), the planner alone (``assign_offsets`` on that program's buffers), and the arena
bytes next to the live peak (the least any arena could need). ``--profile N`` prints a
cProfile of load + first call at that size instead. Not a test: the numbers depend on the
machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

import numpy as np

import graphc as gc
from graphc.executor import Plan
from graphc.executor.memory import Buffer, assign_offsets, live_peak
from graphc.ir import Builder, DType, Graph, TensorType, Value

OPS = ("relu", "neg", "tanh")  # elementwise ops that write into planned buffers


def chain_graph(n: int, width: int = 8) -> Graph:
    """x:[N,width] -> n elementwise nodes in a row -> the last value."""
    g = Graph("chain")
    b = Builder(g, meta={"module": "chain", "module_type": "Chain"})
    v = g.add_input(Value("x", TensorType(("N", width), DType.float32)))
    for i in range(n):
        v = b.emit1(OPS[i % len(OPS)], [v])
    g.outputs = [v]
    return g


def write_chain(n: int, folder: str) -> str:
    path = os.path.join(folder, f"chain{n}.graphc")
    Plan(chain_graph(n), {}).save(path)
    return path


def measure(n: int, folder: str) -> dict:
    start = time.perf_counter()
    path = write_chain(n, folder)
    built = time.perf_counter()
    plan = gc.load(path)
    loaded = time.perf_counter()
    plan(np.ones((1, 8), np.float32))
    called = time.perf_counter()
    program = next(iter(plan._programs.values()))
    copies = [Buffer(b.key, b.nbytes, b.start, b.end) for b in program.buffers]
    planner_start = time.perf_counter()
    arena = assign_offsets(copies)
    planned = time.perf_counter()
    return {"build+save s": built - start, "load s": loaded - built, "first call s": called - loaded,
            "planner s": planned - planner_start, "arena B": arena, "live peak B": live_peak(copies),
            "file B": os.path.getsize(path)}


def profile(n: int, folder: str, top: int = 25) -> None:
    path = write_chain(n, folder)
    profiler = cProfile.Profile()
    profiler.enable()
    plan = gc.load(path)
    plan(np.ones((1, 8), np.float32))
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="profile load + first call at this size")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        if args.profile:
            profile(args.profile, folder)
            return 0
        print(f"{'nodes':>8} " + " ".join(f"{k:>14}" for k in ("build+save s", "load s", "first call s", "planner s",
                                                                "arena B", "live peak B", "file B")))
        for n in (int(s) for s in args.sizes.split(",")):
            rows = [measure(n, folder) for _ in range(args.rounds)]
            medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(f"{n:>8} " + " ".join(f"{v:>14.3f}" if k.endswith(" s") else f"{int(v):>14}"
                                        for k, v in medians.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
