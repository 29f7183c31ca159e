"""The ``graphc`` command line (``graphc ...`` and ``python -m graphc ...``).

Errors print one line and exit with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
import zipfile
import zlib

import numpy as np

from .. import __version__
from ..ir.errors import GraphcError
from .arguments import at_least
from .describe import describe_plan


def _demo(argv) -> int:
    from .demo import main as demo_main

    return demo_main(argv)


def _inspect(args) -> int:
    from ..compile import load_model

    print(describe_plan(load_model(args.file), args.file))
    return 0


# what `graphc run --input` reads, said in every message about an input file it cannot use
EXPECTED_INPUT = "expected a .npy array file written by numpy.save, or an .npz archive written by numpy.savez"


def _input_file_kind(path: str) -> str:
    """'npy' or 'npz', from the file's first bytes. np.load treats any other content as a
    pickle and answers with advice about allow_pickle, which never applies here."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise GraphcError(f"cannot read input {path}: {e.strerror or e}") from None
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK\x03\x04"):  # a zip archive, as numpy.savez writes (numpy's own test)
        return "npz"
    raise GraphcError(f"input {path} is {'empty' if not head else 'not a numpy file'}: {EXPECTED_INPUT}")


def _load_input_file(path: str):
    """One array (.npy) or a dict of named arrays (.npz), with messages naming ``path``."""
    kind = _input_file_kind(path)
    try:
        if kind == "npy":
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        if "allow_pickle" in str(e):  # numpy's only message naming it: an array of Python objects
            raise GraphcError(f"input {path} holds Python objects (an object array): graphc run needs numeric "
                              f"arrays") from None
        raise GraphcError(f"input {path} is a damaged or truncated .{kind} file ({e or type(e).__name__}): "
                          f"{EXPECTED_INPUT}") from None
    for name, value in arrays.items():
        if not isinstance(value, np.ndarray):  # a zip member that np.save did not write comes back as bytes
            raise GraphcError(f"input {path}: member {name!r} is not a .npy array: {EXPECTED_INPUT}")
    return arrays


def _match_by_name(path: str, arrays: dict, names: list) -> list:
    """The plan's inputs, in order, from an .npz archive keyed by input name."""
    if len(names) == 1 and len(arrays) == 1:  # np.savez(f, x) names it arr_0: the key cannot be wrong
        return list(arrays.values())
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in names]
    if missing or extra:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [f"unexpected {', '.join(extra)}"] if extra else []
        raise GraphcError(f"input {path} must hold one array per plan input, named {', '.join(names)}: "
                          + "; ".join(problems))
    return [arrays[n] for n in names]


def _read_inputs(paths: list, plan) -> list:
    """``--input`` files: .npy arrays in the plan's input order, or one .npz holding them by name."""
    loaded = [(path, _load_input_file(path)) for path in paths]
    archives = [path for path, data in loaded if isinstance(data, dict)]
    if not archives:
        return [data for _, data in loaded]
    if len(loaded) > 1:
        raise GraphcError(f"input {archives[0]} is an .npz archive, which holds every input by name: give it as "
                          f"the only --input, or give one .npy per input")
    return _match_by_name(archives[0], loaded[0][1], list(plan.input_names))


def _run(args) -> int:
    from ..compile import load_model

    plan = load_model(args.file)
    if plan.kind != "inference":
        raise GraphcError(f"{args.file} is a training plan; `graphc run` runs inference plans (gc.export)")
    outputs = plan.run(_read_inputs(args.input, plan))
    arrays = [plan.backend.to_numpy(o) for o in outputs]
    if len(arrays) > 1 and not args.output.endswith(".npz"):
        raise GraphcError(f"the plan has {len(arrays)} outputs: use an --output path ending in .npz")
    with open(args.output, "wb") as f:  # a file object: numpy must not append ".npy" to the name
        if args.output.endswith(".npz"):
            np.savez(f, **dict(zip(plan.output_names, arrays)))
        else:
            np.save(f, arrays[0])
    written = ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in zip(plan.output_names, arrays))
    print(f"wrote {args.output}: {written}")
    return 0


def _viz(args) -> int:
    from ..viz import write_plan_file_viz

    path = write_plan_file_viz(args.file, args.output, collapse_modules=args.collapse)
    print(f"wrote {path}")
    return 0


def _convert(args) -> int:
    from ..compile import export, load_model

    to_onnx = args.output.lower().endswith(".onnx")
    if not to_onnx and not args.output.lower().endswith(".graphc"):
        raise GraphcError(f"{args.output}: `graphc convert` writes ONNX files (.onnx) or plan files (.graphc)")
    plan = load_model(args.file)
    if plan.kind != "inference":
        raise GraphcError(f"{args.file} is a training plan; convert an inference plan (gc.export)")
    if to_onnx:
        export(plan, None, args.output, opset=args.opset)
    else:
        plan.save(args.output)
    print(f"wrote {args.output}")
    return 0


PLAN_FILE_HELP = "a plan file (.graphc) written by step.save(...) or gc.export(...), or an ONNX model (.onnx)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphc", description="graphc: a static-graph deep-learning compiler")
    parser.add_argument("--version", action="version", version=f"graphc {__version__}",
                        help="print graphc's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="what to do; `graphc COMMAND --help` lists its options")
    # `graphc demo --help` lists the demo's own options (graphc.apps.demo parses them)
    sub.add_parser("demo", help="train a CNN on the bundled digits, save, export, reload, draw", add_help=False)
    sub.add_parser("bench", help="graphc vs PyTorch eager (when installed) on the benchmark workloads",
                   add_help=False)
    inspect = sub.add_parser("inspect", help="describe a saved plan")
    inspect.add_argument("file", help=PLAN_FILE_HELP)
    inspect.set_defaults(func=_inspect)
    run = sub.add_parser("run", help="run an inference plan on .npy or .npz inputs")
    run.add_argument("file", help="an inference plan file (.graphc) written by gc.export(...)")
    run.add_argument("--input", action="append", required=True, metavar="PATH",
                     help="a .npy array file (numpy.save) per plan input, repeated in the plan's input order; "
                          "or one .npz archive (numpy.savez) holding every input under its name (as `graphc "
                          "inspect` lists them); an .npz with a single array may use any name for a "
                          "single-input plan")
    run.add_argument("--output", required=True, metavar="PATH",
                     help="where to write the result: a .npy file, or an .npz archive keyed by output name "
                          "(needed when the plan has several outputs)")
    run.set_defaults(func=_run)
    viz = sub.add_parser("viz", help="draw a saved plan (.svg, .html, .dot or .txt)")
    viz.add_argument("file", help=PLAN_FILE_HELP)
    viz.add_argument("-o", "--output", required=True, metavar="PATH",
                     help="output path; the extension picks the format: .svg, .html, .dot or .txt")
    viz.add_argument("--collapse", action="store_true", help="draw each top-level module as one node")
    viz.set_defaults(func=_viz)
    convert = sub.add_parser("convert", help="a saved inference plan as ONNX, or an ONNX model as a plan file "
                                             "(needs the onnx extra)")
    convert.add_argument("file", help="an inference plan file (gc.export) or an ONNX model (.onnx)")
    convert.add_argument("output", help="the file to write: ONNX (.onnx) or a graphc plan (.graphc)")
    convert.add_argument("--opset", type=at_least("--opset", 13), default=17, help="ONNX opset (default: %(default)s)")
    convert.set_defaults(func=_convert)
    return parser


def _os_error_text(e: OSError) -> str:
    """'PATH: reason' rather than '[Errno 2] ...': the path the user gave comes first."""
    if e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


MAX_ERROR_CHARS = 1000  # a hostile file's content never floods the terminal


def _one_line(text) -> str:
    """An error message as one line of bounded length: the CLI promises one line."""
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 3] + "..."


def _call(args) -> int:
    """Run a plan-file command (inspect, run, viz). A damaged or hostile plan file must never
    produce a traceback: whatever escapes as something other than a GraphcError or OSError
    (RecursionError, MemoryError, a bug in graphc) becomes a GraphcError naming the file."""
    try:
        return args.func(args)
    except (GraphcError, OSError):
        raise
    except MemoryError:
        raise GraphcError(f"{args.file}: not enough memory to load or run this plan") from None
    except Exception as e:  # noqa: BLE001 - reported in one line, with its type
        raise GraphcError(f"{args.file}: unexpected {type(e).__name__} while loading or running this plan: "
                          f"{_one_line(e)[:300] or '(no message)'}") from None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["demo"]:
            return _demo(argv[1:])
        if argv[:1] == ["bench"]:
            from .bench import main as bench_main

            return bench_main(argv[1:])
        args = build_parser().parse_args(argv)
        return _call(args)
    except GraphcError as e:
        print(f"graphc: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `graphc inspect ... | head`: the reader left, which is fine
        sys.stderr.close()
        return 0
    except OSError as e:
        print(f"graphc: error: {_one_line(_os_error_text(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C during `graphc demo` or `bench`: no traceback either
        print("graphc: interrupted", file=sys.stderr)
        return 130
