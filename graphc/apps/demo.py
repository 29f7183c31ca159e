"""``graphc demo``: train a small CNN on the bundled digits, save, export, reload in a fresh
process, and write the graph dumps. This is what ``make demo`` runs."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..ir.errors import GraphcError


def build_model():
    """conv+BN+ReLU blocks, pooling, dropout, a linear+ReLU head."""
    from .. import nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 2 * 2, 128), nn.ReLU(), nn.Linear(128, 10))


def accuracy(plan, images: np.ndarray, labels: np.ndarray) -> float:
    logits = plan.backend.to_numpy(plan(images))  # cupy arrays on a GPU plan
    return float((logits.argmax(axis=1) == labels).mean())


def data_parallel(model, train_set, args):
    """(the module the step calls, the loader, its sampler) for one process of a
    ``--processes N`` job: batch norm over the global batch, gradients averaged in the plan,
    each process reading its 1/N of every global batch of ``--batch-size`` images."""
    from .. import nn
    from ..data import DataLoader, DistributedSampler

    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size // args.processes, sampler=sampler)
    return nn.parallel.DistributedDataParallel(model), loader, sampler


def mean_over_processes(value: float) -> float:
    from .. import distributed as dist

    total = np.array([value])
    dist.all_reduce(total, dist.ReduceOp.AVG)
    return float(total[0])


def train(args, log=print, rank: int = 0) -> dict:
    """Train the demo model; with ``args.processes > 1`` this is one process of the data-parallel
    job (graphc.distributed initialized), and only rank 0 logs and evaluates."""
    import graphc as gc
    from tqdm import tqdm

    from .. import nn, optim
    from ..data import DataLoader, datasets

    gc.manual_seed(args.seed)
    train_set, test_set = datasets.digits("train"), datasets.digits("test")
    model, sampler = build_model(), None
    if args.processes > 1:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        net, loader, sampler = data_parallel(model, train_set, args)
    else:
        net, loader = model, DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    # A floor (eta_min) so the saved plan never holds lr 0: resuming it keeps learning.
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs, eta_min=1e-3)
    xb, yb = next(iter(loader))

    criterion = nn.CrossEntropyLoss()

    def train_step(x, y):  # the classic PyTorch loop body, unchanged
        opt.zero_grad()
        loss = criterion(net(x), y)
        loss.backward()
        opt.step()
        return loss

    def evaluate(x):  # forward only: compiled in eval mode, reading the weights the steps update
        with gc.no_grad():
            return model(x)

    start = time.perf_counter()
    verify = "numeric" if args.verify else False  # each pass checked on this batch (docs/verification.md)
    step = gc.compile(train_step, example_inputs=(xb, yb), device=args.device, verify=verify)  # traced once
    compile_s = time.perf_counter() - start
    log(f"compiled the training step in {compile_s:.2f} s: {len(step.graph.nodes)} nodes on {step.device}")
    if args.verify:
        from .describe import describe_verification

        log("\n".join(describe_verification(step.graph.meta["verification"])))
    model.eval()
    infer = gc.compile(evaluate, example_inputs=(xb,), device=args.device)
    model.train()

    step_times, quiet = [], rank != 0 or not sys.stderr.isatty()
    (train_x, train_y), (test_x, test_y) = train_set.arrays, test_set.arrays
    for epoch in range(1, args.epochs + 1):
        model.train()
        if sampler is not None:
            sampler.set_epoch(epoch)  # a new shuffle each epoch, the same in every process
        losses = []
        for x, y in tqdm(loader, desc=f"epoch {epoch}", leave=False, disable=quiet, unit="step"):
            t0 = time.perf_counter()
            x, y = x.to(args.device), y.to(args.device)  # gc.Tensor batches, as in PyTorch (a no-op on cpu)
            losses.append(float(step(x, y)))
            step_times.append(time.perf_counter() - t0)
        sched.step()  # the lr is a plan input: no recompiling
        loss = mean_over_processes(np.mean(losses)) if args.processes > 1 else np.mean(losses)
        if rank == 0:  # the others train on; rank 0 evaluates the weights they all hold
            log(f"epoch {epoch:>2}: loss {loss:.4f}  train acc {accuracy(infer, train_x, train_y):.3f}  "
                f"test acc {accuracy(infer, test_x, test_y):.3f}")
    model.eval()
    return {"model": model, "step": step, "test": (test_x, test_y), "example": xb, "compile_s": compile_s,
            "step_ms": statistics.median(step_times) * 1e3}


def export_onnx(result: dict, path: Path, expected: np.ndarray, log=print) -> dict:
    """The same model as ONNX (for Netron and onnxruntime), imported back to check it; skipped
    with a line saying how to get it when the onnx extra is missing."""
    import importlib.util

    import graphc as gc

    if importlib.util.find_spec("onnx") is None:
        log("skipped model.onnx: the onnx extra is not installed (pip install 'graphc[onnx]')")
        return {}
    gc.export(result["model"], (result["example"],), path)
    imported = gc.load(path)
    predictions = imported.backend.to_numpy(imported(result["test"][0])).argmax(axis=1)
    if not np.array_equal(predictions, expected):
        raise GraphcError(f"{path.name} imported back predicts differently from the exported plan")
    log(f"exported {path.name} (open it in Netron) and imported it back: its predictions match")
    return {"ONNX model": path}


def save_and_check(result: dict, out: Path, log=print, rank: int = 0) -> dict:
    """Save the training plan, export the inference plan, reload it in a fresh process. In a
    data-parallel job every process saves (rank 0 writes the file) and rank 0 does the rest."""
    import graphc as gc

    out.mkdir(parents=True, exist_ok=True)
    paths = {"training plan": out / "train.graphc", "inference plan": out / "model.graphc"}
    result["step"].save(paths["training plan"])
    if rank != 0:
        return {}
    exported = gc.export(result["model"], (result["example"],), paths["inference plan"])
    test_x, test_y = result["test"]
    expected = exported.backend.to_numpy(exported(test_x)).argmax(axis=1)
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), test_x)
        cmd = [sys.executable, "-m", "graphc", "run", str(paths["inference plan"]), "--input",
               os.path.join(tmp, "x.npy"), "--output", os.path.join(tmp, "logits.npy")]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise GraphcError(f"reloading the exported plan failed: {done.stderr.strip()}")
        reloaded = np.load(os.path.join(tmp, "logits.npy")).argmax(axis=1)
    if not np.array_equal(reloaded, expected):
        raise GraphcError("the reloaded plan's predictions differ from the in-memory ones")
    log(f"reloaded {paths['inference plan'].name} in a fresh process: its {len(reloaded)} predictions match")
    result["accuracy"] = float((reloaded == test_y).mean())
    paths.update(export_onnx(result, out / "model.onnx", expected, log))
    for ext in ("txt", "dot", "svg", "html"):
        paths[f"graph ({ext})"] = gc.viz.write(result["step"], out / f"graph.{ext}")
    return paths


def check_output_folder(out: Path) -> None:
    """Create ``out`` and write and remove a probe file in it, so that an unusable --out fails
    now rather than after the training it would have saved."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".graphc-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GraphcError(f"--out {out}: cannot create or write this folder ({e.strerror or e})") from None


def build_parser() -> argparse.ArgumentParser:
    from .arguments import at_least

    parser = argparse.ArgumentParser(prog="graphc demo", description=__doc__)
    parser.add_argument("--epochs", type=at_least("--epochs", 1), default=10,
                        help="passes over the training images (default: %(default)s)")
    parser.add_argument("--batch-size", type=at_least("--batch-size", 2), default=64,  # batch norm needs 2
                        help="images per training step, at least 2 for batch norm (default: %(default)s)")
    parser.add_argument("--device", default="cpu",
                        help="where the plans run: cpu, cuda or cuda:N; cuda needs cupy (default: %(default)s)")
    parser.add_argument("--out", default="graphc-demo", metavar="FOLDER",
                        help="folder for the saved plans and graph drawings, created if missing "
                             "(default: %(default)s)")
    parser.add_argument("--processes", type=at_least("--processes", 1), default=None, metavar="N",
                        help="train data-parallel in N processes over MPI (needs graphc[mpi]); --batch-size "
                             "is then the global batch. Under mpiexec it defaults to the job's size, else 1")
    parser.add_argument("--verify", action="store_true",
                        help="check every pass of the training step numerically on the first batch and print "
                             "the report (verify='numeric'; the saved plan keeps it for graphc inspect)")
    parser.add_argument("--seed", type=at_least("--seed", 0), default=0,
                        help="seed for the weights, shuffling and dropout (default: %(default)s)")
    return parser


def finish(args, result: dict, rank: int = 0) -> int:
    """Save and check the plans (rank 0 of a data-parallel job) and print the summary."""
    paths = save_and_check(result, Path(args.out), rank=rank)
    if rank != 0:
        return 0
    print(f"\ntest accuracy: {result['accuracy']:.3f}")
    for what, path in paths.items():
        print(f"{what + ':':<17} {path}")
    if args.processes > 1:
        print(f"processes:        {args.processes} (each {args.batch_size // args.processes} of every "
              f"{args.batch_size} images)")
    print(f"compile time:     {result['compile_s']:.2f} s\nstep time:        {result['step_ms']:.2f} ms (median)")
    print(f"total time:       {time.perf_counter() - args.start:.1f} s")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    check_output_folder(Path(args.out))
    args.start = time.perf_counter()
    from .. import distributed
    from . import demo_parallel

    if distributed.launched_by_mpiexec():  # one process of a job: join it
        return demo_parallel.run_process(args, train, finish)
    if (args.processes or 1) > 1:
        return demo_parallel.launch(args.processes, argv)
    args.processes = 1
    return finish(args, train(args))
