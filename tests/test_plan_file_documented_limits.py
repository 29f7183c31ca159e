"""docs/format.md's Limits table states exactly the limits the loader enforces (issue 29, item 9).

Every number in the table's limit column is read from the document and compared with the
constants of ``executor/plan_limits.py`` (and ``plan_format``) that enforce it, row by row, in
both directions: a documented number no constant enforces fails, and so does a constant the
row leaves out. Before, ``graph.meta`` refused a list of 135,000 ints with a per-list cap of
65,536 that the table did not state (it said 135,168 entries), and the custom op bodies' limits,
the dims' bound, key and role lengths were in no row.
"""
from __future__ import annotations

import re
from pathlib import Path

import msgpack
import pytest

from graphc.executor.plan import plan_from_bytes
from graphc.executor.plan_format import MAX_DIM
from graphc.executor.plan_limits import (BODY_FIELDS, GRAPH_FIELDS, HEADER_FIELDS, HEADER_UNKNOWN, MAX_CALL_DEPTH,
                                         MAX_DIM_TEXT, MAX_EXPANDED, MAX_FUNCTIONS, MAX_IO, MAX_KEY_BYTES, MAX_KEYS,
                                         MAX_MESSAGE, MAX_NAME, MAX_NODE_ATTRS, MAX_NODE_INPUTS, MAX_NODE_META,
                                         MAX_NODES, MAX_PARAM_GROUPS, MAX_PRODUCER, MAX_RANK, MAX_SCHEDULERS,
                                         MAX_TENSORS, MAX_VALUES, METADATA, METADATA_CONTAINERS, METADATA_DEPTH,
                                         METADATA_ITEMS, NODE_META)
from test_plan_file import golden_body, pack_file, refuse

FORMAT = Path(__file__).resolve().parent.parent / "docs" / "format.md"
MSGPACK_DEPTH = 1024  # msgpack's own nesting limit (checked below)

H, G, B = HEADER_FIELDS, GRAPH_FIELDS, BODY_FIELDS
ENFORCED = {  # each row of the table: the constants behind its numbers
    "header (outer map)": {MAX_KEYS, H["magic"].string, H["kind"].string, H["checksum"].string,
                           H["format_version"].length, H["data"].length, H["data"].string, HEADER_UNKNOWN.length,
                           HEADER_UNKNOWN.items, HEADER_UNKNOWN.containers, HEADER_UNKNOWN.string},
    "`producer`": {MAX_PRODUCER},
    "body, graph": {MAX_KEYS, MAX_KEY_BYTES},
    "`graph.values`": {G["values"].count, MAX_VALUES, G["values"].entry.string, MAX_NAME, MAX_RANK, MAX_DIM,
                       MAX_DIM_TEXT},
    "`graph.nodes`": {G["nodes"].count, MAX_NODES, G["nodes"].entry.length, MAX_NODE_INPUTS, MAX_NODE_ATTRS,
                      MAX_NODE_META, G["nodes"].entry.items, G["nodes"].entry.containers, G["nodes"].entry.string},
    "`graph.inputs`, `outputs`, `output_names`": {MAX_IO, G["inputs"].length, G["outputs"].length,
                                                  G["output_names"].length, G["output_names"].string},
    "`graph.state`, `updates`, `constants`, `tensors`": {
        MAX_TENSORS, G["state"].length, G["updates"].length, G["constants"].length, B["tensors"].count,
        B["tensors"].entry.length, B["tensors"].entry.items, B["tensors"].entry.containers, B["tensors"].entry.string,
        G["updates"].string, G["state"].string},
    "`graph.meta`": {G["meta"].depth, G["meta"].items, G["meta"].containers, G["meta"].length, G["meta"].string},
    "node `meta`": {NODE_META.depth, NODE_META.length, NODE_META.items, NODE_META.containers},
    "`param_groups`": {MAX_PARAM_GROUPS, B["param_groups"].length, B["param_groups"].items,
                       B["param_groups"].string},
    "`lr_schedulers`": {MAX_SCHEDULERS, B["lr_schedulers"].length, MAX_PARAM_GROUPS, B["lr_schedulers"].items,
                        B["lr_schedulers"].containers, B["lr_schedulers"].string},
    "`rng`": {B["rng"].length, B["rng"].string},
    "`metadata`": {METADATA_ITEMS, METADATA.items, METADATA.length, METADATA_CONTAINERS, METADATA.containers,
                   METADATA_DEPTH, METADATA.depth, METADATA.string},
    "`graph.functions`": {MAX_FUNCTIONS, G["functions"].count, MAX_CALL_DEPTH, MAX_NODES, MAX_EXPANDED},
    "unknown body and graph keys": {MSGPACK_DEPTH},
    "any nesting": {MSGPACK_DEPTH},
}


def numbers(cell: str) -> set:
    """The numbers a limit cell states: ``4,096``, ``64 KiB``; asides in parentheses are skipped."""
    cell = re.sub(r"\([^)]*\)", "", cell)
    found = {int(n) * 1024 for n in re.findall(r"(\d+) KiB", cell)}
    cell = re.sub(r"\d+ KiB", "", cell)
    return found | {int(n.replace(",", "")) for n in re.findall(r"\d{1,3}(?:,\d{3})+|\d+", cell)}


def documented() -> dict:
    text = FORMAT.read_text()
    section = text[text.index("\n## Limits"):text.index("\n## Writing")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("field", "---"):
            assert cells[0] not in rows, f"row {cells[0]} twice"
            rows[cells[0]] = numbers(cells[1])
    return rows


def test_the_limits_table_states_exactly_the_enforced_limits():
    rows = documented()
    assert sorted(rows) == sorted(ENFORCED)
    for field, stated in rows.items():
        assert stated == ENFORCED[field], (field, "documented, not enforced:", sorted(stated - ENFORCED[field]),
                                           "enforced, not documented:", sorted(ENFORCED[field] - stated))


def test_msgpack_nests_as_deep_as_documented():
    msgpack.unpackb(b"\x91" * MSGPACK_DEPTH + b"\xc0")
    with pytest.raises(msgpack.exceptions.StackError):
        msgpack.unpackb(b"\x91" * (MSGPACK_DEPTH + 1) + b"\xc0")


def test_the_message_length_is_documented():
    assert f"a message is at most {MAX_MESSAGE} characters" in " ".join(FORMAT.read_text().split())


# ---- the case of the issue: graph.meta's per-list cap and its total ------------------------------------------
def with_meta_lists(*lengths) -> bytes:
    body = golden_body()
    for k, n in enumerate(lengths):
        body["graph"]["meta"][f"list{k}"] = list(range(n))
    return pack_file(body)


def test_graph_meta_lists_hold_up_to_the_per_list_cap():
    cap = G["meta"].length
    plan_from_bytes(with_meta_lists(cap))
    refuse(with_meta_lists(cap + 1), f"exceeds max_array_len\\({cap}\\).*see docs/format.md")


def test_graph_meta_holds_its_documented_total_across_lists():
    """135,000 ints load in three lists of 45,000; the total limit (135,168 entries in all) is what refuses more."""
    plan_from_bytes(with_meta_lists(45_000, 45_000, 45_000))
    refuse(with_meta_lists(*[G["meta"].items // 3 + 1] * 3), f"more than {G['meta'].items} entries")
