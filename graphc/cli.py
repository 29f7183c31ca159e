"""The ``graphc`` command line (``graphc ...`` and ``python -m graphc ...``).

Errors print one line and exit with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import collections
import sys

import numpy as np

from .ir.errors import GraphcError


def _demo(argv) -> int:
    from .demo import main as demo_main

    return demo_main(argv)


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def describe_plan(plan, path: str = "") -> str:
    """The text ``graphc inspect`` prints."""
    g = plan.graph
    version = ".".join(map(str, plan.format_version)) if plan.format_version else "?"
    lines = [f"file: {path}" if path else None,
             f"kind: {plan.kind}    producer: {plan.producer or '?'}    format: {version}",
             "inputs:  " + ", ".join(f"{v.name} {v.type}" for v in g.inputs[:len(plan.input_names)]),
             "outputs: " + ", ".join(f"{n} {v.type}" for n, v in zip(plan.output_names, g.outputs))]
    if plan.hyper_inputs:
        lines.append("hyper-parameter inputs: " + ", ".join(
            f"{n}={group['lr']:g}" for n, group in zip(plan.hyper_inputs, plan.param_groups)))
    for role, title in (("param", "parameters"), ("buffer", "buffers"), ("optim", "optimizer state")):
        arrays = [plan._state[k] for k, r in g.state_roles.items() if r == role]
        if arrays:
            count = sum(int(a.size) for a in arrays)
            nbytes = sum(int(a.nbytes) for a in arrays)
            lines.append(f"{title}: {len(arrays)} tensors, {count:,} values, {_fmt_bytes(nbytes)}")
    frozen = list(g.constant_data.values())
    if frozen:
        lines.append(f"constants: {len(frozen)} tensors, {sum(int(a.size) for a in frozen):,} values, "
                     f"{_fmt_bytes(sum(int(a.nbytes) for a in frozen))}")
    if plan.kind == "training":
        lines.append(f"training steps so far: {plan.step_count}")
    for entry in g.meta.get("passes", []):
        lines.append(f"pass {entry['name']}: {entry['nodes_before']} -> {entry['nodes_after']} nodes")
    arenas = []
    for batch in (1, 64):
        try:
            report = plan.memory_report(batch=batch)
        except GraphcError:  # e.g. batch norm in training refuses batch 1
            continue
        arenas.append(f"{_fmt_bytes(report.arena_bytes)} at batch {batch} "
                      f"({_fmt_bytes(report.unplanned_bytes)} without reuse)")
    if arenas:
        lines.append("activation arena: " + "; ".join(arenas))
    histogram = collections.Counter(n.op for n in g.nodes)
    lines.append(f"nodes: {len(g.nodes)}")
    lines += [f"  {op:<26} {count}" for op, count in histogram.most_common()]
    return "\n".join(line for line in lines if line is not None)


def _inspect(args) -> int:
    from .compile import load

    print(describe_plan(load(args.file), args.file))
    return 0


def _run(args) -> int:
    from .compile import load

    plan = load(args.file)
    if plan.kind != "inference":
        raise GraphcError(f"{args.file} is a training plan; `graphc run` runs inference plans (gc.export)")
    inputs = []
    for path in args.input:
        try:
            inputs.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError, EOFError) as e:
            raise GraphcError(f"cannot read input {path}: {e or type(e).__name__}") from None
    outputs = plan.run(inputs)
    arrays = [plan.backend.to_numpy(o) for o in outputs]
    if len(arrays) > 1 and not args.output.endswith(".npz"):
        raise GraphcError(f"the plan has {len(arrays)} outputs: use an --output path ending in .npz")
    with open(args.output, "wb") as f:  # a file object: numpy must not append ".npy" to the name
        if args.output.endswith(".npz"):
            np.savez(f, **dict(zip(plan.output_names, arrays)))
        else:
            np.save(f, arrays[0])
    print(f"wrote {args.output}: " + ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in zip(plan.output_names, arrays)))
    return 0


def _viz(args) -> int:
    from .viz import write_plan_file_viz

    path = write_plan_file_viz(args.file, args.output, collapse_modules=args.collapse)
    print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphc", description="graphc: a static-graph deep-learning compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    # `graphc demo --help` lists the demo's own options (graphc.demo parses them)
    sub.add_parser("demo", help="train a CNN on the bundled digits, save, export, reload, draw", add_help=False)
    sub.add_parser("bench", help="graphc vs PyTorch eager (when installed) on the benchmark workloads",
                   add_help=False)
    inspect = sub.add_parser("inspect", help="describe a saved plan")
    inspect.add_argument("file")
    inspect.set_defaults(func=_inspect)
    run = sub.add_parser("run", help="run an inference plan on .npy inputs")
    run.add_argument("file")
    run.add_argument("--input", action="append", required=True, help="an input .npy file (repeat, in order)")
    run.add_argument("--output", required=True, help="output .npy (or .npz for several outputs)")
    run.set_defaults(func=_run)
    viz = sub.add_parser("viz", help="draw a saved plan (.svg, .html, .dot or .txt)")
    viz.add_argument("file")
    viz.add_argument("-o", "--output", required=True, help="output path; the extension picks the format")
    viz.add_argument("--collapse", action="store_true", help="draw each top-level module as one node")
    viz.set_defaults(func=_viz)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["demo"]:
            return _demo(argv[1:])
        if argv[:1] == ["bench"]:
            from .bench import main as bench_main

            return bench_main(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except GraphcError as e:
        print(f"graphc: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `graphc inspect ... | head`: the reader left, which is fine
        sys.stderr.close()
        return 0
    except OSError as e:
        print(f"graphc: error: {e}", file=sys.stderr)
        return 2
