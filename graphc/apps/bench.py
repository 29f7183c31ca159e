"""``graphc bench``: graphc vs PyTorch eager on CPU with the same weights and data,
interleaved A/B rounds, medians and ratios graphc / PyTorch (lower is better). Without
PyTorch it prints graphc's own numbers. ``benchmarks/run.py`` runs the same thing.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from .. import compile as compile_plan
from .. import manual_seed, nn, optim, tensor
from .bench_harness import ab, blas_line, ort_pair, ort_status, print_profile, timed
from ..ir.errors import GraphcError

try:
    import torch
except ImportError:  # graphc's own numbers only
    torch = None


# ---- workloads --------------------------------------------------------------------------
# Each model is built by a function of the ``nn`` namespace, so the same lines build the
# graphc model and its PyTorch twin, whose state_dict keys then match.
def mlp(nn=nn):
    """W1: MLP 784-512-512-10 with ReLU."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def cnn(nn=nn):
    """W2: a CNN on 1x28x28 inputs (two conv+BN+ReLU+pool blocks, two linear layers)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: the nearest multiple of 8, never more than 10% down."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _mobilenet_classes(nn):
    """MobileNetV2's modules (torchvision's structure and attribute names) over ``nn``."""

    class ConvBNReLU6(nn.Sequential):
        def __init__(self, cin, cout, kernel=3, stride=1, groups=1):
            super().__init__(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))

    class InvertedResidual(nn.Module):
        """1x1 expand + BN + ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN (+ input)."""

        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = round(cin * expand)
            self.use_res_connect = stride == 1 and cin == cout
            layers = [ConvBNReLU6(cin, hidden, kernel=1)] if expand != 1 else []
            layers += [ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
                       nn.Conv2d(hidden, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res_connect else self.conv(x)

    class MobileNet(nn.Module):
        """A stem conv, inverted-residual blocks from ``setting`` rows (t, c, n, s), an
        optional 1x1 conv to ``last`` channels, global average pool, dropout and a linear layer."""

        def __init__(self, stem, stem_stride, setting, last=None, dropout=0.0, width=1.0, num_classes=10):
            super().__init__()
            cin = _make_divisible(stem * width)
            features = [ConvBNReLU6(3, cin, stride=stem_stride)]
            for t, c, n, s in setting:
                cout = _make_divisible(c * width)
                for i in range(n):
                    features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
            if last is not None:
                features.append(ConvBNReLU6(cin, last, kernel=1))
                cin = last
            self.features = nn.Sequential(*features)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(cin, num_classes))

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)))

    return MobileNet


_MOBILENETS: dict = {}


def _mobilenet(nn, *args, **kwargs):
    if nn not in _MOBILENETS:  # one set of classes per library
        _MOBILENETS[nn] = _mobilenet_classes(nn)
    return _MOBILENETS[nn](*args, **kwargs)


def inverted_residuals(nn=nn):
    """W5: MobileNetV2-style blocks on 3x32x32: stem conv 3->16, five inverted-residual blocks
    (expand 1 and 6, stride 1 and 2, with and without the residual add), pool, linear to 10."""
    return _mobilenet(nn, 16, 1, [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2]])


def mobilenet_v2(nn=nn):
    """MobileNetV2 at width 0.5 (torchvision's 17 blocks and 1280-channel head) on 3x32x32."""
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
               [6, 320, 1, 1]]
    return _mobilenet(nn, 32, 2, setting, last=1280, dropout=0.2, width=0.5)


# kind: (builder, input shape, row name)
WORKLOADS = {"mlp": (mlp, (784,), "mlp"), "cnn": (cnn, (1, 28, 28), "cnn"),
             "w5": (inverted_residuals, (3, 32, 32), "inverted-residual"),
             "mnv2": (mobilenet_v2, (3, 32, 32), "MobileNetV2-0.5")}


def build(kind: str):
    manual_seed(0)
    return WORKLOADS[kind][0]()


def torch_twin(model, kind: str):
    """The same architecture in PyTorch with graphc's weights and buffers."""
    twin = WORKLOADS[kind][0](torch.nn)
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    return twin


def data(kind: str, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *WORKLOADS[kind][1])).astype(np.float32)
    return x, rng.integers(0, 10, batch).astype(np.int64)


def train_pair(kind: str, batch: int, opt_name: str):
    model = build(kind)
    x, y = data(kind, batch)
    make = {"sgd": lambda p: optim.SGD(p, lr=0.01, momentum=0.9), "adam": lambda p: optim.Adam(p, lr=1e-3)}[opt_name]
    twin = torch_twin(model, kind) if torch else None
    step = compile_plan(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=make(model.parameters()))
    ours = lambda: step(x, y)
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


def loop_rows(steps: int, rounds: int) -> None:
    """The classic loop body (zero_grad, forward, backward, step) on W2: run eagerly by graphc,
    and compiled with ``gc.compile(train_step)``, each against PyTorch eager."""
    model, (x, y) = build("cnn"), data("cnn", 64)
    _, _, theirs = train_pair("cnn", 64, "sgd")
    opt, criterion = optim.SGD(model.parameters(), lr=0.01, momentum=0.9), nn.CrossEntropyLoss()

    def train_step(x, y):
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss

    tx, ty = tensor(x), tensor(y)
    ab("W2 train, graphc eager loop", lambda: train_step(tx, ty), theirs, steps, rounds)
    step = compile_plan(train_step, example_inputs=(x, y))
    ab("W2 train, compiled train_step", lambda: step(x, y), theirs, steps, rounds)


def infer_pair(kind: str, batch: int):
    model = build(kind).eval()
    x, _ = data(kind, batch)
    plan = compile_plan(model, example_inputs=(x,))
    theirs = None
    if torch:
        twin = torch_twin(model, kind).eval()
        tx = torch.from_numpy(x)

        def theirs():
            with torch.no_grad():
                twin(tx)
    return (lambda: plan(x)), theirs, ort_pair(model, x)


def chain_overhead(steps: int) -> None:
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

    def chain(t):
        for i in range(200):
            t = t * 1.0001 if i % 2 else t + 0.001
        return t

    plan = compile_plan(chain, example_inputs=(x,), passes="none")
    plan(x)
    per_step = timed(lambda: plan(x), steps * 5)
    print(f"{'per-node overhead (200-op chain)':<36} graphc {per_step / 200 * 1e6:8.3f} us/node", end="")
    if torch:
        tx = torch.from_numpy(x)
        t_torch = timed(lambda: chain(tx), steps * 5)
        print(f"   torch {t_torch / 200 * 1e6:8.3f} us/op")
    else:
        print()


def _w2_step():
    model = build("cnn")
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
    print(f"{'W2 compile: trace+passes / +bind':<36} graphc {traced * 1e3:8.1f} ms / {bound * 1e3:.1f} ms (incl. step 1)")
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
    print(f"{'W2 peak memory, first step':<36} graphc {first_peak / 2**20:8.1f} MiB (arena, kernel scratch, state)")
    print(f"{'W2 warm step, transient bytes':<36} graphc {(warm_peak - before) / 2**20:8.2f} MiB")
    print(step.memory_report())


# ---- command line ------------------------------------------------------------------------
PARTS = {"W1": "MLP train, SGD and Adam", "W2": "CNN train, then its profile unless --no-profile",
         "W3": "MLP and CNN inference, batch 1/64/512", "W5": "inverted-residual blocks train",
         "MNV2": "MobileNetV2-0.5 train", "overhead": "per-node overhead of a 200-op chain",
         "compile": "W2 compile time and memory",
         "loop": "W2's classic loop body: graphc eager, and compiled as a step function"}


def parse_only(text: str) -> list:
    """``--only W2,W5``: the parts to run, in the order given (case does not matter)."""
    names = {name.lower(): name for name in PARTS}
    parts = [p.strip() for p in text.split(",")]
    unknown = [p for p in parts if p.lower() not in names]
    if unknown or not text.strip():
        raise GraphcError(f"--only takes a comma-separated list of {', '.join(PARTS)}; not {text!r}")
    return list(dict.fromkeys(names[p.lower()] for p in parts))


def build_parser() -> argparse.ArgumentParser:
    from .arguments import at_least

    parser = argparse.ArgumentParser(prog="graphc bench", description=__doc__)
    # both must be >= 1: each timing is a median, and a median of nothing has no value
    parser.add_argument("--steps", type=at_least("--steps", 1), default=20,
                        help="timed calls per round; each round reports their median (default: %(default)s)")
    parser.add_argument("--rounds", type=at_least("--rounds", 1), default=5,
                        help="interleaved graphc/PyTorch rounds per workload; the result is the median "
                             "round (default: %(default)s)")
    parser.add_argument("--only", type=parse_only, default=list(PARTS), metavar="PARTS",
                        help="run only these parts, comma-separated: " +
                             "; ".join(f"{k} ({v})" for k, v in PARTS.items()) + " (default: all)")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                        help="print gc.debug.profile's table of the W2 train step (12 slowest nodes) "
                             "after its row (default: on)")
    return parser


def warm_up(ours) -> float:
    """Seconds for graphc's first calls, up to the one that compiles its loops (binding to the
    batch size, numba's compiles, the steps themselves)."""
    from ..executor.kernels._loops import WARM_CALLS

    start = time.perf_counter()
    for _ in range(WARM_CALLS):
        ours()
    return time.perf_counter() - start


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if torch:
        torch.manual_seed(0)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; numpy {np.__version__}")
    else:
        print(f"PyTorch is not installed: graphc's own numbers only; numpy {np.__version__}")
    print(blas_line(), flush=True)
    rows = {"W1": [("mlp", 128, "sgd"), ("mlp", 128, "adam")], "W2": [("cnn", 64, "sgd")],
            "W5": [("w5", 32, "sgd")], "MNV2": [("mnv2", 32, "sgd")]}
    for part in args.only:
        for kind, batch, opt in rows.get(part, ()):
            step, ours, theirs = train_pair(kind, batch, opt)
            ab(f"{part} train {WORKLOADS[kind][2]} b{batch} {opt}", ours, theirs, args.steps, args.rounds,
               first_s=warm_up(ours))
            if kind == "cnn" and args.profile:
                print_profile(step, *data(kind, batch), steps=10, limit=12)
        if part == "W3":
            for kind in ("mlp", "cnn"):
                for batch in (1, 64, 512):
                    ours, theirs, ort = infer_pair(kind, batch)
                    ab(f"W3 infer {kind} b{batch}", ours, theirs, args.steps, args.rounds, first_s=warm_up(ours))
                    if ort is not None:
                        ab(f"W3 infer {kind} b{batch}", ours, ort, args.steps, args.rounds, peer="onnxruntime")
            if ort_status():
                print(ort_status())
        elif part == "overhead":
            chain_overhead(args.steps)
        elif part == "compile":
            compile_time_and_memory()
        elif part == "loop":
            loop_rows(args.steps, args.rounds)
    return 0
