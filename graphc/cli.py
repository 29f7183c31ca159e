"""The ``graphc`` command line (``graphc ...`` and ``python -m graphc ...``)."""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from .ir.errors import GraphcError


def _demo(args) -> int:
    script = Path(__file__).resolve().parent.parent / "examples" / "quickstart.py"
    if not script.exists():
        raise GraphcError(f"the demo script {script} is missing (is this a source checkout?)")
    runpy.run_path(str(script), run_name="__main__")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphc", description="graphc: a static-graph deep-learning compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo")
    demo.set_defaults(func=_demo)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except GraphcError as e:
        print(f"graphc: error: {e}", file=sys.stderr)
        return 2
