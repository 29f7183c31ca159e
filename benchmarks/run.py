"""graphc vs PyTorch eager on CPU: same weights, same data, interleaved A/B rounds.

Run: .venv/bin/python benchmarks/run.py [--steps 20 --rounds 5]   (same as `graphc bench`)
Subsets: --only W1,W2,W3,W5,MNV2,overhead,compile; --no-profile skips the W2 profile table.
Prints medians and the ratio graphc / PyTorch (lower is better), after numpy's BLAS and its
kernel type. Not a test.
"""
import sys

from graphc.apps.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))  # through the CLI: bad options are one line, exit 2
