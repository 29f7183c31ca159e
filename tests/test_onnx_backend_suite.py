"""onnx's own backend test suite through graphc's ONNX backend: every node, simple,
pytorch-converted and pytorch-operator case onnx ships (2,024 with onnx 1.23), run once in a
process of its own by tests/onnx_backend_run.py, compared as onnx's runner compares (each case's
own rtol/atol).

Every case passes or is refused with its reason: tests/onnx_backend_refusals.py lists each
refused case under the reason graphc gives, with the message graphc must give. A wrong answer,
a crash or a hang fails here; it is never an entry on that list.
"""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")

from onnx_backend_refusals import PASS_FLOOR, REFUSALS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_TIMEOUT = 900  # seconds for the whole suite (it takes about 20 s here)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("onnx_backend") / "results.jsonl"
    try:
        run = subprocess.run([sys.executable, os.path.join(HERE, "onnx_backend_run.py"), str(out)],
                             capture_output=True, text=True, timeout=SUITE_TIMEOUT)
    except subprocess.TimeoutExpired:
        run = None
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {line["name"]: line for line in lines if "status" in line}
    started = [line["start"] for line in lines if "start" in line]
    if run is None or run.returncode != 0:
        last = started[-1] if started else "(none)"
        pytest.fail(f"the suite did not finish (last case started: {last}); "
                    f"{'timed out' if run is None else run.stderr[-2000:]}")
    return done


def _reason_of(name: str):
    for reason, (pattern, names) in REFUSALS.items():
        if name in names:
            return reason, pattern
    return None, None


def test_the_suite_is_all_there(results):
    counts = collections.Counter(r["suite"] for r in results.values())
    assert counts["node"] >= 1800 and counts["pytorch-converted"] >= 80, counts


def test_no_case_is_wrong_crashes_or_hangs(results):
    bad = {name: f"{r['status']}: {r['message'][:300]}" for name, r in results.items()
           if r["status"] in ("wrong", "crash", "timeout")}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in sorted(bad.items()))


def test_every_refusal_is_listed_with_its_reason(results):
    unlisted, unexplained = [], []
    for name, r in sorted(results.items()):
        if r["status"] != "refused":
            continue
        reason, pattern = _reason_of(name)
        if reason is None:
            unlisted.append(f"{name}: {r['message'][:300]}")
        elif not re.search(pattern, r["message"]):
            unexplained.append(f"{name} (listed as {reason!r}, pattern {pattern!r}): {r['message'][:300]}")
    assert not unlisted, "refused but not in tests/onnx_backend_refusals.py:\n" + "\n".join(unlisted)
    assert not unexplained, "refused for another reason than the one listed:\n" + "\n".join(unexplained)


def test_every_listed_refusal_is_a_case_that_still_refuses(results):
    listed = [name for _, names in REFUSALS.values() for name in names]
    doubled = [name for name, count in collections.Counter(listed).items() if count > 1]
    assert not doubled, f"listed under two reasons: {doubled}"
    unknown = sorted(set(listed) - set(results))
    assert not unknown, f"listed but not a case of the installed onnx: {unknown}"
    passing = sorted(name for name in listed if results[name]["status"] == "pass")
    assert not passing, f"these pass now: take them off the refusal list: {passing}"


def test_pass_count(results):
    counts = collections.Counter(r["status"] for r in results.values())
    by_suite = collections.Counter((r["suite"], r["status"]) for r in results.values())
    report = ", ".join(f"{suite} {status} {n}" for (suite, status), n in sorted(by_suite.items()))
    print(f"\nonnx backend suite: {dict(counts)}; {report}")
    assert counts["pass"] >= PASS_FLOOR, f"{counts['pass']} cases pass, the floor is {PASS_FLOOR}: {report}"
