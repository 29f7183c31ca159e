"""Write tests/onnx_backend_refusals.py from a run of tests/onnx_backend_run.py: every refused
case under the reason graphc gave, grouped (an op graphc has no reader for: one group per op;
any other refusal: one group per message, its numbers and names generalised).

    python tests/onnx_backend_run.py /tmp/onnx.jsonl && python tests/record_onnx_refusals.py /tmp/onnx.jsonl

Refuses to write while any case is wrong, crashed or timed out: those are bugs, never entries.
"""
from __future__ import annotations

import collections
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_MISSING_OP = re.compile(r"ONNX op '([^']+)'-\d+ is not supported by graphc's importer")


def core(message: str) -> str:
    """The refusal without the file name in front and the node's location after."""
    message = re.sub(r"^\S+?: ", "", message, count=1) if re.match(r"^\S+?(\.onnx)?: ", message) else message
    return re.sub(r" \[[^\[\]]*\]$", "", message)


def _escape(text: str) -> str:
    return re.escape(text).replace("\\ ", " ")


def reason_and_pattern(message: str) -> tuple[str, str]:
    found = _MISSING_OP.search(message)
    if found:
        op = found.group(1)
        return f"no reader for ONNX op {op}", _escape(f"ONNX op '{op}'-") + r"\d+ is not supported"
    text = core(message)
    generic = re.sub(r"'[^']*'", "'…'", re.sub(r"\d+", "#", text))
    pieces = re.split(r"('…'|#)", generic)
    pattern = "".join("'[^']*'" if p == "'…'" else r"\d+" if p == "#" else _escape(p) for p in pieces)
    return generic[:160], pattern


def main(results_path: str, floor_margin: int = 0) -> None:
    rows = [json.loads(line) for line in open(results_path) if '"status"' in line]
    bad = [r["name"] for r in rows if r["status"] in ("wrong", "crash", "timeout")]
    if bad:
        sys.exit(f"not writing the list: {len(bad)} cases are wrong, crashed or timed out: {bad[:20]}")
    groups: dict = collections.defaultdict(lambda: ["", []])
    for r in sorted(rows, key=lambda r: r["name"]):
        if r["status"] == "refused":
            reason, pattern = reason_and_pattern(r["message"])
            groups[reason][0] = pattern
            groups[reason][1].append(r["name"])
    passing = sum(r["status"] == "pass" for r in rows)
    lines = ['"""The onnx backend cases graphc refuses, by the reason it gives (tests/test_onnx_backend_suite.py',
             'checks each refusal against its pattern). Written by tests/record_onnx_refusals.py from a run of',
             'tests/onnx_backend_run.py; edit by rerunning it, not by hand."""', "",
             f"PASS_FLOOR = {passing - floor_margin}  # cases that pass (of {len(rows)})", "",
             "# reason -> (the pattern graphc's message matches, the cases)", "REFUSALS = {"]
    for reason, (pattern, names) in sorted(groups.items(), key=lambda kv: (-len(kv[1][1]), kv[0])):
        lines.append(f"    {reason!r}: (")
        lines.append(f"        {pattern!r},")
        lines.append("        [")
        for name in names:
            lines.append(f"            {name!r},")
        lines.append("        ]),")
    lines.append("}")
    with open(os.path.join(HERE, "onnx_backend_refusals.py"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{passing} pass, {sum(len(n) for _, n in groups.values())} refused in {len(groups)} groups")


if __name__ == "__main__":
    main(sys.argv[1])
