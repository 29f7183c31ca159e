"""``graphc bench``: graphc vs PyTorch eager on CPU with the same weights and data,
interleaved A/B rounds, medians and ratios graphc / PyTorch (lower is better). Without
PyTorch it prints graphc's own numbers. ``benchmarks/run.py`` runs the same thing.
"""
from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

from . import compile as compile_plan
from . import manual_seed, nn, optim

try:
    import torch
except ImportError:  # graphc's own numbers only
    torch = None

# ---- workloads --------------------------------------------------------------------------
def mlp() -> nn.Module:
    """W1: MLP 784-512-512-10 with ReLU."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def cnn() -> nn.Module:
    """W2: a CNN on 1x28x28 inputs (two conv+BN+ReLU+pool blocks, two linear layers)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def torch_twin(model: nn.Module):
    """The same architecture in PyTorch with graphc's weights."""
    import torch

    layers = []
    for m in model:
        if isinstance(m, nn.Linear):
            layers.append(torch.nn.Linear(m.in_features, m.out_features))
        elif isinstance(m, nn.Conv2d):
            layers.append(torch.nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding))
        elif isinstance(m, nn.BatchNorm2d):
            layers.append(torch.nn.BatchNorm2d(m.num_features))
        elif isinstance(m, nn.ReLU):
            layers.append(torch.nn.ReLU())
        elif isinstance(m, nn.MaxPool2d):
            layers.append(torch.nn.MaxPool2d(m.kernel_size))
        elif isinstance(m, nn.Flatten):
            layers.append(torch.nn.Flatten())
    twin = torch.nn.Sequential(*layers)
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    return twin


def data(kind: str, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64)



def timed(fn, steps: int) -> float:
    """Median seconds per call over ``steps`` calls."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ab(name: str, ours, theirs, steps: int, rounds: int) -> None:
    for f in (ours, theirs):
        if f is not None:
            f()  # warm-up: programs, buffers, caches
    a, b = [], []
    for _ in range(rounds):  # interleaved so drifts hit both sides alike
        a.append(timed(ours, steps))
        if theirs is not None:
            b.append(timed(theirs, steps))
    ga = statistics.median(a) * 1e3
    if b:
        tb = statistics.median(b) * 1e3
        print(f"{name:<34} graphc {ga:8.3f} ms   torch {tb:8.3f} ms   ratio {ga / tb:5.2f}")
    else:
        print(f"{name:<34} graphc {ga:8.3f} ms")


def train_pair(kind: str, batch: int, opt_name: str):
    manual_seed(0)
    model = mlp() if kind == "mlp" else cnn()
    x, y = data(kind, batch)
    make = {"sgd": lambda p: optim.SGD(p, lr=0.01, momentum=0.9), "adam": lambda p: optim.Adam(p, lr=1e-3)}[opt_name]
    twin = torch_twin(model) if torch else None
    step = compile_plan(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=make(model.parameters()))
    ours = lambda: step(x, y)  # noqa: E731
    theirs = None
    if twin is not None:
        topt = {"sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
                "adam": lambda p: torch.optim.Adam(p, lr=1e-3)}[opt_name](twin.parameters())
        tx, ty, loss_fn = torch.from_numpy(x), torch.from_numpy(y), torch.nn.CrossEntropyLoss()

        def theirs():
            topt.zero_grad(set_to_none=True)
            loss = loss_fn(twin(tx), ty)
            loss.backward()
            topt.step()
    return step, ours, theirs


def infer_pair(kind: str, batch: int):
    manual_seed(0)
    model = (mlp() if kind == "mlp" else cnn()).eval()
    x, _ = data(kind, batch)
    plan = compile_plan(model, example_inputs=(x,))
    theirs = None
    if torch:
        twin = torch_twin(model).eval()
        tx = torch.from_numpy(x)

        def theirs():
            with torch.no_grad():
                twin(tx)
    return (lambda: plan(x)), theirs


def chain_overhead(steps: int) -> None:
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

    def chain(t):
        for i in range(200):
            t = t * 1.0001 if i % 2 else t + 0.001
        return t

    plan = compile_plan(chain, example_inputs=(x,), passes="none")
    plan(x)
    per_step = timed(lambda: plan(x), steps * 5)
    print(f"{'per-node overhead (200-op chain)':<34} graphc {per_step / 200 * 1e6:8.3f} us/node", end="")
    if torch:
        tx = torch.from_numpy(x)
        t_torch = timed(lambda: chain(tx), steps * 5)
        print(f"   torch {t_torch / 200 * 1e6:8.3f} us/op")
    else:
        print()


def _w2_step():
    manual_seed(0)
    model = cnn()
    x, y = data("cnn", 64)
    return (lambda: compile_plan(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                               optimizer=optim.SGD(model.parameters(), lr=0.01, momentum=0.9))), x, y


def compile_time_and_memory() -> None:
    make, x, y = _w2_step()
    start = time.perf_counter()
    step = make()
    traced = time.perf_counter() - start
    step(x, y)  # binds the batch-64 program: arena and kernel scratch are allocated here
    bound = time.perf_counter() - start
    print(f"{'W2 compile: trace+passes / +bind':<34} graphc {traced * 1e3:8.1f} ms / {bound * 1e3:.1f} ms (incl. step 1)")
    make, x, y = _w2_step()
    tracemalloc.start()  # a second plan, traced: tracemalloc slows allocation, so not timed
    step = make()
    step(x, y)
    _, first_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    step(x, y)
    _, warm_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{'W2 peak memory, first step':<34} graphc {first_peak / 2**20:8.1f} MiB (arena, kernel scratch, state)")
    print(f"{'W2 warm step, transient bytes':<34} graphc {(warm_peak - before) / 2**20:8.2f} MiB")
    print(step.memory_report())


def build_parser() -> argparse.ArgumentParser:
    from .cli import at_least

    parser = argparse.ArgumentParser(prog="graphc bench", description=__doc__)
    # both must be >= 1: each timing is a median, and a median of nothing has no value
    parser.add_argument("--steps", type=at_least("--steps", 1), default=20,
                        help="timed calls per round; each round reports their median (default: %(default)s)")
    parser.add_argument("--rounds", type=at_least("--rounds", 1), default=5,
                        help="interleaved graphc/PyTorch rounds per workload; the result is the median "
                             "round (default: %(default)s)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if torch:
        torch.manual_seed(0)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; numpy {np.__version__}")
    else:
        print("PyTorch is not installed: graphc's own numbers only")
    for kind, batch, opt in (("mlp", 128, "sgd"), ("mlp", 128, "adam"), ("cnn", 64, "sgd")):
        _, ours, theirs = train_pair(kind, batch, opt)
        ab(f"W{1 if kind == 'mlp' else 2} train {kind} b{batch} {opt}", ours, theirs, args.steps, args.rounds)
    for kind in ("mlp", "cnn"):
        for batch in (1, 64, 512):
            ours, theirs = infer_pair(kind, batch)
            ab(f"W3 infer {kind} b{batch}", ours, theirs, args.steps, args.rounds)
    chain_overhead(args.steps)
    compile_time_and_memory()
    return 0


if __name__ == "__main__":  # through the CLI's main: one-line errors, exit status 2
    import sys

    from .cli import main as cli_main

    sys.exit(cli_main(["bench", *sys.argv[1:]]))
