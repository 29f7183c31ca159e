"""Run tests/op_db_mapping.py in a process of its own and read its results back as data.

Importing PyTorch's ``op_db`` keeps hundreds of thousands of objects alive; in the test process
they would slow every later garbage collection (the plan-file tests time their refusals), so
the op_db suites run the harness as a script: one process per suite.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).with_name("op_db_mapping.py")


def run(tmp_dir, *args) -> dict:
    """``op_db_mapping.as_json`` of ``python tests/op_db_mapping.py --json ... *args``."""
    out = Path(tmp_dir) / "op_db.json"
    done = subprocess.run([sys.executable, str(HARNESS), "--json", str(out), *args], cwd=HARNESS.parent.parent,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"the op_db harness failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(out.read_text())
