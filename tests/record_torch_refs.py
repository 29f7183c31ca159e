"""Regenerate PyTorch's reference outputs, tests/data/torch_*.npz (needs torch==2.13.0).

    python tests/record_torch_refs.py            # rewrite every file
    python tests/record_torch_refs.py -k conv2d  # extra pytest arguments: update entries in place

Runs the test modules that use the ``torch_ref`` fixture with ``pytest --record-torch-refs``
(torch live; see tests/torch_refs.py). Without extra arguments the old files are deleted
first, so entries of renamed or removed tests do not linger. Parity failures do not stop the
recording (torch's side is computed before graphc's is compared); the exit status is pytest's.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TORCH_VERSION = "2.13.0"


def main(argv: list[str]) -> int:
    try:
        import torch
    except ImportError:
        print("record_torch_refs: PyTorch is not installed (pip install torch==2.13.0)", file=sys.stderr)
        return 2
    if torch.__version__.split("+")[0] != TORCH_VERSION:
        print(f"record_torch_refs: references are recorded with torch=={TORCH_VERSION}, "
              f"this is {torch.__version__}", file=sys.stderr)
        return 2
    modules = sorted(p.name for p in TESTS.glob("test_*.py") if "torch_ref" in p.read_text())
    if not argv:
        for old in (TESTS / "data").glob("torch_*.npz"):
            old.unlink()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--record-torch-refs",
           *(f"tests/{m}" for m in modules), *argv]
    rc = subprocess.call(cmd, cwd=TESTS.parent)
    files = sorted((TESTS / "data").glob("torch_*.npz"))
    for f in files:
        print(f"{f.relative_to(TESTS.parent)}: {f.stat().st_size / 1024:.0f} KiB")
    print(f"total: {sum(f.stat().st_size for f in files) / 1024:.0f} KiB")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
