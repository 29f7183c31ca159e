"""The cost of a scan step: a tanh RNN (hidden 64, batch 32) over sequences of 16, 64 and 256
steps, forward and forward+backward, three ways on the same weights and data:

- scan:     ``gc.scan`` in the traced function: one ``scan`` node in the compiled plan (its
            backward is one reverse ``scan`` node over the carries the forward saved);
- unrolled: the same cell called in a Python loop inside the traced function: one graph with
            T copies of the step (and T copies of its backward);
- torch:    PyTorch eager running the Python loop (forward under ``torch.no_grad()``).

Run: .venv/bin/python benchmarks/control_flow.py [--lengths 16,64,256] [--rounds 5] [--calls 5]
     [--hidden 64 --batch 32 --features 64]

Both libraries run on one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = 1
unless set in the environment; torch.set_num_threads to match): the matrices are 32 x 64, too
small for threads to pay, and with interleaved calls each library's idle BLAS threads spin
for a while after its call and take the cores from the other (measured on a 2-core machine:
PyTorch's calls made right after graphc had worked ran ~400 times slower for most of a
second). Set the variables to compare with more threads.

Forward+backward is ``loss = (ys ** 2).mean(); loss.backward()`` returning the loss and the
four parameter gradients (no optimizer update), on all three sides. Calls are timed in
interleaved rounds (scan, unrolled, torch, each ``--calls`` calls per round, so that drifts of
a shared machine hit all three alike); each column is the median round's time per call
divided by T (microseconds per step), and the ratios are of those medians (lower is better
for the first named). The second table is what compiling costs: ``gc.compile`` (trace and
passes) and the first call (which builds the program: kernels, memory plan, then runs once),
with the plan's node count and its largest difference from PyTorch's outputs (ys; or the loss
and the gradients), a sanity check that the three compute the same thing. Without PyTorch
only graphc's columns are printed. Not a test: the numbers depend on the machine and on what
else runs on it.
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

try:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
except ImportError:  # graphc's own numbers only
    torch = None


def rnn_cell(lib, features: int, hidden: int):
    """The cell's layers, built with graphc's ``nn`` or ``torch.nn`` (same parameter names)."""
    class Cell(lib.Module):
        def __init__(self):
            super().__init__()
            self.i2h, self.h2h = lib.Linear(features, hidden), lib.Linear(hidden, hidden)

        def forward(self, h, x):
            h = (self.i2h(x) + self.h2h(h)).tanh()
            return h, h
    return Cell()


def scan_forward(cell):
    def forward(xs, h0):
        _, ys = gc.scan(cell, h0, xs, dim=1)
        return ys
    return forward


def unrolled_forward(cell, stack):
    """The Python loop (graphc traced, or torch eager): T calls of the cell."""
    def forward(xs, h0):
        h, ys = h0, []
        for t in range(xs.shape[1]):
            h, y = cell(h, xs[:, t])
            ys.append(y)
        return stack(ys, 1)
    return forward


def with_backward(forward, params):
    """forward, loss, backward; returns the loss and the parameters' gradients."""
    def step(xs, h0):
        for p in params:
            p.grad = None
        loss = (forward(xs, h0) ** 2).mean()
        loss.backward()
        return (loss, *[p.grad for p in params])
    return step


def timed_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compiled(fn, inputs) -> tuple:
    """(plan, gc.compile seconds, first call seconds, first outputs)."""
    start = time.perf_counter()
    plan = gc.compile(fn, example_inputs=inputs)
    traced = time.perf_counter()
    out = plan(*inputs)
    return plan, traced - start, time.perf_counter() - traced, out


def arrays(out) -> list:
    """The outputs (forward: ys; forward+backward: the loss and the gradients) as numpy."""
    return [np.asarray(a.detach() if hasattr(a, "detach") else a) for a in (out if isinstance(out, (tuple, list))
                                                                            else (out,))]


def measure(length: int, args) -> list:
    """Rows for one sequence length: one per pass (forward, forward+backward)."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((args.batch, length, args.features)).astype(np.float32)
    h0 = np.zeros((args.batch, args.hidden), np.float32)
    gc.manual_seed(0)
    cell = rnn_cell(nn, args.features, args.hidden)
    params = list(cell.parameters())
    fns = {"fwd": {"scan": scan_forward(cell), "unrolled": unrolled_forward(cell, gc.stack)}}
    fns["fwd+bwd"] = {k: with_backward(f, params) for k, f in fns["fwd"].items()}
    if torch is not None:
        tcell = rnn_cell(torch.nn, args.features, args.hidden)
        tcell.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in cell.state_dict().items()})
        tforward = unrolled_forward(tcell, torch.stack)
        tstep = with_backward(tforward, list(tcell.parameters()))
        txs, th0 = torch.from_numpy(xs), torch.from_numpy(h0)

        def torch_forward():
            with torch.no_grad():
                return tforward(txs, th0)
        torch_fns = {"fwd": torch_forward, "fwd+bwd": lambda: tstep(txs, th0)}
    rows = []
    for kind, pair in fns.items():
        row = {"T": length, "pass": kind}
        calls = {}
        reference = [a.copy() for a in arrays(torch_fns[kind]())] if torch is not None else None
        for name, fn in pair.items():
            plan, trace_s, first_s, out = compiled(fn, (xs, h0))
            row[f"{name} compile ms"], row[f"{name} first call ms"] = trace_s * 1e3, first_s * 1e3
            row[f"{name} nodes"] = len(plan.graph.nodes)
            if reference is not None:
                row[f"{name} max diff"] = max(float(np.abs(a - r).max()) for a, r in zip(arrays(out), reference))
            calls[name] = (lambda p=plan: p(xs, h0))
        if torch is not None:
            calls["torch"] = torch_fns[kind]
        for fn in calls.values():  # warm-up (programs, buffers, caches, torch's thread pool): 3 calls or 0.2 s
            start = time.perf_counter()
            for i in range(100):
                fn()
                if i >= 2 and time.perf_counter() - start > 0.2:
                    break
        times = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, fn in calls.items():
                times[name].append(timed_call(fn, args.calls))
        for name, t in times.items():
            row[f"{name} us/step"] = statistics.median(t) / length * 1e6
        rows.append(row)
    return rows


def report(rows: list, args) -> str:
    have_torch = "torch us/step" in rows[0]
    lines = [f"tanh RNN cell: hidden {args.hidden}, batch {args.batch}, features {args.features}, float32, CPU; "
             f"median of {args.rounds} interleaved rounds x {args.calls} calls",
             blas_line() + (f"; torch {torch.__version__}, {torch.get_num_threads()} threads"
                                             if have_torch else "; PyTorch not installed: graphc only"),
             "",
             "time per step (us) = time per call / T; ratios of the medians (lower: the first named is faster)"]
    head = f"{'T':>5} {'pass':<8} {'scan':>10} {'unrolled':>10}"
    head += f" {'torch':>10} {'scan/torch':>11} {'unrolled/torch':>15}" if have_torch else ""
    head += f" {'scan/unrolled':>14}"
    lines += [head, "-" * len(head)]
    for r in rows:
        line = f"{r['T']:>5} {r['pass']:<8} {r['scan us/step']:>10.1f} {r['unrolled us/step']:>10.1f}"
        if have_torch:
            line += (f" {r['torch us/step']:>10.1f} {r['scan us/step'] / r['torch us/step']:>11.2f}"
                     f" {r['unrolled us/step'] / r['torch us/step']:>15.2f}")
        line += f" {r['scan us/step'] / r['unrolled us/step']:>14.2f}"
        lines.append(line)
    lines += ["", "compiling (ms): gc.compile (trace + passes), first call (program build + one run); plan nodes"]
    head = (f"{'T':>5} {'pass':<8} {'scan compile':>13} {'first call':>11} {'nodes':>6}"
            f" {'unrolled compile':>17} {'first call':>11} {'nodes':>6} {'compile ratio':>14}")
    head += f" {'max |diff| vs torch':>20}" if have_torch else ""
    lines += [head, "-" * len(head)]
    for r in rows:
        scan_total = r["scan compile ms"] + r["scan first call ms"]
        unrolled_total = r["unrolled compile ms"] + r["unrolled first call ms"]
        line = (f"{r['T']:>5} {r['pass']:<8} {r['scan compile ms']:>13.1f} {r['scan first call ms']:>11.1f}"
                f" {r['scan nodes']:>6} {r['unrolled compile ms']:>17.1f} {r['unrolled first call ms']:>11.1f}"
                f" {r['unrolled nodes']:>6} {unrolled_total / scan_total:>13.1f}x")
        if have_torch:
            line += f" {max(r['scan max diff'], r['unrolled max diff']):>20.1e}"
        lines.append(line)
    lines.append("(compile ratio: unrolled / scan, compile + first call)")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="16,64,256", help="sequence lengths T")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=5, help="calls per round")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--features", type=int, default=64)
    args = parser.parse_args(argv)
    lengths = [int(s) for s in args.lengths.split(",")]
    if min(lengths + [args.rounds, args.calls, args.hidden, args.batch, args.features]) < 1:
        parser.error("lengths, --rounds, --calls, --hidden, --batch and --features must be at least 1")
    rows = [row for length in lengths for row in measure(length, args)]
    print(report(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
