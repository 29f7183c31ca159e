"""Plan-file limits (docs/format.md, "Limits"): messages that quote a hostile file stay short and
never recurse; container bombs are refused quickly with little memory; map keys must be unique
strings and ``producer`` a short string; the CLI answers every hostile file with one line; and
structured fuzzing of the new limits (deep nesting, many small containers, duplicate and bytes
keys). Helpers come from test_plan_file.py."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import tracemalloc

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc import nn
from graphc.apps import cli
from graphc.executor.plan import plan_from_bytes
from graphc.executor.serialize import plan_to_bytes
from test_plan_file import (HUGE_PREFIXES, LOAD_SECONDS, Raw, golden_body, golden_bytes, golden_inputs, golden_outer, load_or_refuse,
                            pack_file, raw_map, refuse)

MESSAGE_CHARS = 700  # "invalid plan file: " and a few quoted values: a few hundred characters at most


def nested(depth, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def array_of(n: int, item: bytes = b"\x80") -> bytes:
    """A msgpack array of ``n`` copies of the packed ``item`` (default: an empty map)."""
    if n < 16:
        head = bytes([0x90 | n])
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    return head + item * n


def body_with(**fields) -> bytes:
    """The golden body as packed bytes, with some fields replaced by raw msgpack (``Raw``) or values."""
    body = golden_body()
    items = [(k, fields.pop(k, v)) for k, v in body.items()]
    return raw_map(items + list(fields.items()))


def graph_with(**fields) -> bytes:
    """The golden body as packed bytes, with some graph fields replaced (or added)."""
    graph = golden_body()["graph"]
    items = [(k, fields.pop(k, v)) for k, v in graph.items()]
    return body_with(graph=Raw(raw_map(items + list(fields.items()))))


def short_refusal(data: bytes) -> str:
    message = str(refuse(data))
    assert len(message) <= MESSAGE_CHARS, f"{len(message)} characters: {message[:300]}..."
    return message


def peak_while_refusing(data: bytes) -> tuple[int, float]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        with pytest.raises(gc.PlanFormatError):
            plan_from_bytes(data)
        return tracemalloc.get_traced_memory()[1] - base, time.perf_counter() - start
    finally:
        tracemalloc.stop()


# ---- item 3: messages quoting the file ----------------------------------------------------------------------
def test_997_deep_format_version_is_refused_with_a_short_message(tmp_path):
    """The audit's 1,032-byte file: repr() of the version recursed (RecursionError)."""
    data = msgpack.packb({"magic": "graphc-plan", "format_version": nested(997)})
    path = tmp_path / "deep.graphc"
    path.write_bytes(data)
    with pytest.raises(gc.PlanFormatError) as info:
        gc.load(path)
    assert len(str(info.value)) <= MESSAGE_CHARS + len(str(path)) and str(path) in str(info.value)
    short_refusal(pack_file(format_version=nested(997)))


BIG = "x" * (1 << 19)  # under msgpack's old 1 MiB string limit
HUGE_QUOTES = {
    "format_version of 3 long strings": lambda: pack_file(format_version=[BIG, BIG, BIG]),
    "format_version of a million zeros": lambda: pack_file(format_version=[0] * (1 << 20)),
    "kind": lambda: pack_file(kind=BIG),
    "magic": lambda: pack_file(magic=BIG),
    "checksum": lambda: pack_file(checksum=BIG),
    "rng bit_generator": lambda: body_case(lambda b: b["rng"].__setitem__("bit_generator", BIG)),
    "rng bit_generator deep": lambda: body_case(lambda b: b["rng"].__setitem__("bit_generator", nested(900))),
    "op name": lambda: body_case(lambda b: b["graph"]["nodes"][0].__setitem__(0, BIG)),
    "value name": lambda: body_case(lambda b: b["graph"]["values"][0].__setitem__(0, BIG)),
    "value dim": lambda: body_case(lambda b: b["graph"]["values"][0][1].__setitem__(0, nested(900))),
    "value dtype": lambda: body_case(lambda b: b["graph"]["values"][0].__setitem__(2, BIG)),
    "value index": lambda: body_case(lambda b: b["graph"]["nodes"][0][1].__setitem__(0, nested(900))),
    "state role": lambda: body_case(lambda b: b["graph"]["state"][0].__setitem__(1, BIG)),
    "update name": lambda: body_case(lambda b: b["graph"]["updates"][0].__setitem__(0, BIG)),
    "unknown attrs": lambda: body_case(lambda b: b["graph"]["nodes"][0][3].update({f"k{i}": 0 for i in range(4000)})),
    "attr of a million ints": lambda: body_case(lambda b: b["graph"]["nodes"][0][3].__setitem__("stride", [1] * 10**6)),
    "attr deep": lambda: body_case(lambda b: b["graph"]["nodes"][0][3].__setitem__("stride", nested(900))),
    "tensor name": lambda: body_case(lambda b: b["tensors"][0].__setitem__("name", BIG)),
    "tensor dtype": lambda: body_case(lambda b: b["tensors"][0].__setitem__("dtype", BIG)),
    "tensor dim": lambda: body_case(lambda b: b["tensors"][0].__setitem__("shape", [nested(900)])),
    "hyper_inputs": lambda: body_case(lambda b: b["graph"]["meta"].__setitem__("hyper_inputs", ["lr"] * 60000)),
    "scheduler type": lambda: body_case(lambda b: b.__setitem__("lr_schedulers", [{"type": BIG, "state": {BIG: "x"}}])),
    "metadata key": lambda: body_case(lambda b: b.__setitem__("metadata", {BIG: b"x"})),
}


def body_case(edit) -> bytes:
    body = golden_body()
    edit(body)
    return pack_file(body)


@pytest.mark.parametrize("name", sorted(HUGE_QUOTES))
def test_messages_quote_at_most_a_few_hundred_characters(name):
    short_refusal(HUGE_QUOTES[name]())


def test_show_is_bounded_on_anything():
    from graphc.executor import plan_limits as limits

    cyclic = []
    cyclic.append(cyclic)
    deep = nested(100000)
    for value in (deep, cyclic, {"k" * 10**6: deep}, "s" * 10**7, b"b" * 10**7, 2**100000, list(range(10**6)),
                  object(), 1.5, None, True, ("a", b"b", [1, {2: 3}])):
        text = limits.show(value)
        assert len(text) <= 120, text
    assert limits.show("abc") == "'abc'" and limits.show([1, "a", None]) == "[1, 'a', None]"
    assert "..." in limits.show("z" * 1000) and "bit" in limits.show(2**100000)


# ---- item 4: container bombs ---------------------------------------------------------------------------------
MIB = 1 << 20


def test_metadata_of_2_24_empty_maps_is_refused_quickly_and_small():
    """The audit's 16.8 MB file loaded in 10.6 s and took 1.2 GB."""
    data = pack_file(body_bytes=body_with(metadata=Raw(raw_map([("m", Raw(array_of(1 << 24)))]))))
    assert len(data) > 16 * MIB
    peak, seconds = peak_while_refusing(data)
    assert seconds < LOAD_SECONDS, seconds
    assert peak < 1.5 * len(data), f"peak {peak / MIB:.0f} MiB for a {len(data) / MIB:.0f} MiB file"


def test_million_key_maps_are_refused_quickly():
    many = {f"{i}": 0 for i in range(10**6)}
    for data in (body_case(lambda b: b.__setitem__("metadata", many)),
                 body_case(lambda b: b["graph"].__setitem__("meta", many)),
                 body_case(lambda b: b["graph"]["nodes"][0].__setitem__(4, many)),
                 body_case(lambda b: b["rng"].update(many))):
        peak, seconds = peak_while_refusing(data)
        assert seconds < LOAD_SECONDS and peak < 1.5 * len(data) + 8 * MIB, (seconds, peak / MIB)


SPREAD = Raw(array_of(256, array_of(65535, b"\x90")))  # 16.7 million empty lists, none over 65535 long
BOMB_FIELDS = ["metadata", "param_groups", "lr_schedulers", "rng", "tensors", "graph.values", "graph.nodes",
               "graph.state", "graph.updates", "graph.inputs", "graph.outputs", "graph.output_names",
               "graph.constants", "graph.meta", "graph.name"]


@pytest.mark.parametrize("shape", ["one list", "spread"])
@pytest.mark.parametrize("where", BOMB_FIELDS)
def test_container_bombs_in_every_field(where, shape):
    bomb = Raw(array_of(1 << 24)) if shape == "one list" else SPREAD
    if where.startswith("graph."):
        body = graph_with(**{where[len("graph."):]: bomb})
    else:
        body = body_with(**{where: bomb})
    data = pack_file(body_bytes=body)
    peak, seconds = peak_while_refusing(data)
    assert seconds < LOAD_SECONDS, f"{seconds:.2f}s"
    assert peak < 1.5 * len(data), f"peak {peak / MIB:.0f} MiB for a {len(data) / MIB:.0f} MiB file"


@pytest.mark.parametrize("prefix", sorted(HUGE_PREFIXES))
def test_huge_length_prefixes_in_every_field(prefix):
    """A field that claims 4 GiB (or 2**32 entries) and ends: refused, nothing allocated."""
    for where in BOMB_FIELDS + ["future", "graph.future", "graph"]:
        value = Raw(HUGE_PREFIXES[prefix])
        body = graph_with(**{where[6:]: value}) if where.startswith("graph.") else body_with(**{where: value})
        peak, seconds = peak_while_refusing(pack_file(body_bytes=body))
        assert peak < MIB and seconds < LOAD_SECONDS, (where, peak, seconds)


def test_many_small_junk_nodes_are_refused_at_the_first():
    """Each node within every per-node limit, but not a node: refused before the rest is built."""
    from graphc.executor.plan_limits import MAX_NODES

    node = array_of(5, b"\x90")  # [[], [], [], [], []]
    data = pack_file(body_bytes=graph_with(nodes=Raw(array_of(MAX_NODES, node))))
    peak, seconds = peak_while_refusing(data)
    assert seconds < 0.2 and peak < 1.5 * len(data), (seconds, peak / MIB)


def test_tensor_of_a_million_dims_is_refused_quickly():
    """The byte count is a product of dims: rank is checked first (no million-digit integers)."""
    short_refusal(body_case(lambda b: b["tensors"][0].__setitem__("shape", [2] * (1 << 20))))
    short_refusal(body_case(lambda b: b["graph"]["values"][0].__setitem__(1, [2] * (1 << 20))))


def test_metadata_beyond_the_limits_is_refused_at_save(tmp_path):
    gc.manual_seed(0)
    plan = gc.compile(nn.Linear(3, 2).eval(), example_inputs=(np.ones((2, 3), np.float32),))
    for bad in ({"list": list(range(5000))}, {"deep": nested(20)}, {"text": "t" * (1 << 17)},
                {"keys": {str(i): i for i in range(5000)}}, {"big": 2**70}, {"blob": b"x"}, {1: "int key"}):
        plan.metadata = bad
        with pytest.raises(gc.GraphcError, match="metadata") as info:
            plan.save(tmp_path / "m.graphc")
        assert not isinstance(info.value, gc.PlanFormatError) and len(str(info.value)) < MESSAGE_CHARS
        assert not (tmp_path / "m.graphc").exists()
    plan.metadata = {"classes": [f"class {i}" for i in range(1000)], "cfg": {"a": {"b": {"c": [1, 2.5, None]}}}}
    plan.save(tmp_path / "m.graphc")
    assert gc.load(tmp_path / "m.graphc").metadata == plan.metadata


def test_a_dtype_the_loader_refuses_is_refused_at_save(tmp_path, monkeypatch):
    """Whatever the graph's dtypes (uint8 inputs, say), save never writes a file gc.load refuses."""
    from graphc.executor import serialize

    gc.manual_seed(0)
    plan = gc.compile(nn.Linear(3, 2).eval(), example_inputs=(np.ones((2, 3), np.float32),))
    monkeypatch.setattr(serialize, "DTYPES", {k: v for k, v in serialize.DTYPES.items() if k != "f32"})
    with pytest.raises(gc.GraphcError, match="float32, which a plan file cannot hold"):
        plan.save(tmp_path / "p.graphc")
    assert list(tmp_path.iterdir()) == []


def test_a_large_real_plan_still_loads():
    gc.manual_seed(0)
    layers = [m for _ in range(40) for m in (nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU())]
    model = nn.Sequential(*layers, nn.Linear(8, 3))
    x, y = np.ones((4, 8), np.float32), np.zeros(4, np.int64)
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=gc.optim.Adam(model.parameters()))
    step.metadata = {"classes": ["a", "b", "c"]}
    loaded = plan_from_bytes(plan_to_bytes(step, step.metadata))
    ops = lambda g: sum(len(n.attrs["body"].nodes) if n.op == "fused_elementwise" else 1 for n in g.nodes)  # noqa: E731
    assert len(loaded.graph.nodes) == len(step.graph.nodes) and ops(loaded.graph) == ops(step.graph) > 2000
    np.testing.assert_allclose(loaded(x, y), step(x, y), rtol=1e-6)


# ---- item 5: map keys and producer ------------------------------------------------------------------------------
BYTES_KEY_MAPS = {
    "outer": lambda o, b: o.__setitem__(b"extra", 1),
    "body": lambda o, b: b.__setitem__(b"extra", 1),
    "graph": lambda o, b: b["graph"].__setitem__(b"extra", 1),
    "graph.meta": lambda o, b: b["graph"]["meta"].__setitem__(b"extra", 1),
    "tensor record": lambda o, b: b["tensors"][0].__setitem__(b"extra", 1),
    "rng": lambda o, b: b["rng"].__setitem__(b"extra", 1),
    "param_groups entry": lambda o, b: b["param_groups"][0].__setitem__(b"extra", 1),
    "metadata": lambda o, b: b.__setitem__("metadata", {b"k": 1}),
    "node attrs": lambda o, b: b["graph"]["nodes"][0][3].__setitem__(b"stride", [1, 1]),
    "node meta": lambda o, b: b["graph"]["nodes"][0][4].__setitem__(b"module", "0"),
    "lr_schedulers entry": lambda o, b: b.__setitem__("lr_schedulers", [{"type": "StepLR", "state": {}, b"x": 1}]),
    "lr scheduler state": lambda o, b: b.__setitem__("lr_schedulers", [{"type": "StepLR", "state": {b"x": 1}}]),
}


@pytest.mark.parametrize("where", sorted(BYTES_KEY_MAPS))
def test_bytes_keys_are_refused_in_every_map(where):
    outer, body = golden_outer(), golden_body()
    BYTES_KEY_MAPS[where](outer, body)
    outer["body"] = msgpack.packb(body, use_bin_type=True)
    outer["checksum"] = "sha256:" + hashlib.sha256(outer["body"]).hexdigest()
    assert "key" in short_refusal(msgpack.packb(outer, use_bin_type=True))


def _dup(items, index):
    """``items`` with the entry at ``index`` written twice (the second with the same value)."""
    return items[:index + 1] + [items[index]] + items[index + 1:]


def test_duplicate_kind_is_refused():
    """kind "training" then "inference": msgpack keeps the last, so it loaded as inference."""
    outer = golden_outer()
    items = [(k, v) for k, v in outer.items()]
    k = [key for key, _ in items].index("kind")
    items.insert(k + 1, ("kind", "inference"))
    assert "'kind' twice" in short_refusal(raw_map(items))


def _body_dup(path):
    """The golden body packed with the map at ``path`` holding its first key twice."""
    def pack(obj, here):
        if isinstance(obj, dict):
            items = [(k, Raw(pack(v, here + (k,)))) for k, v in obj.items()]
            return raw_map(_dup(items, 0) if here == path else items)
        if isinstance(obj, list):
            return _array(b"".join(pack(v, here + (i,)) for i, v in enumerate(obj)), len(obj))
        return msgpack.packb(obj, use_bin_type=True)
    return pack(golden_body(), ())


def _array(content: bytes, n: int) -> bytes:
    return array_of(n, b"") + content  # the header for n elements, then their bytes


@pytest.mark.parametrize("path", [(), ("graph",), ("graph", "meta"), ("rng",), ("tensors", 0), ("param_groups", 0),
                                  ("graph", "nodes", 0, 3), ("graph", "nodes", 0, 4)],
                         ids=lambda p: ".".join(map(str, p)) or "body")
def test_duplicate_keys_are_refused_in_every_map(path):
    assert "twice" in short_refusal(pack_file(body_bytes=_body_dup(path)))


def test_duplicate_metadata_key_is_refused():
    data = pack_file(body_bytes=body_with(metadata=Raw(raw_map([("a", 1), ("a", 2)]))))
    assert "'a' twice" in short_refusal(data)


@pytest.mark.parametrize("producer", [b"graphc 0.1.0", {"name": "graphc"}, nested(1000, "graphc"), None, 7,
                                      ["graphc"], "p" * 100000], ids=lambda p: type(p).__name__)
def test_producer_must_be_a_short_string(producer):
    short_refusal(pack_file(producer=producer))


def test_any_short_producer_string_loads():
    assert plan_from_bytes(pack_file(producer="some other writer 9.9")).producer == "some other writer 9.9"


# ---- item 9: the CLI on hostile files -------------------------------------------------------------------------
def hostile_files() -> dict:
    items = [(k, v) for k, v in golden_outer().items()]
    return {
        "deep-version": msgpack.packb({"magic": "graphc-plan", "format_version": nested(997)}),
        "metadata-bomb": pack_file(body_bytes=body_with(metadata=Raw(raw_map([("m", Raw(array_of(1 << 22)))])))),
        "duplicate-kind": raw_map(items + [("kind", "inference")]),
        "producer-dict": pack_file(producer={"a": 1}),
        "bytes-key": body_case(lambda b: b["rng"].__setitem__(b"x", 1)),
        "long-kind": pack_file(kind=BIG),
        "truncated": golden_bytes()[:-100],
        "deep-msgpack": b"\x91" * 5000 + b"\xc0",
    }


@pytest.mark.parametrize("command", ["inspect", "run", "viz"])
def test_cli_answers_hostile_files_with_one_line(command, tmp_path, capsys):
    np.save(tmp_path / "x.npy", golden_inputs()[0])
    for name, data in hostile_files().items():
        path = tmp_path / f"{name}.graphc"
        path.write_bytes(data)
        argv = {"inspect": ["inspect", path], "viz": ["viz", path, "-o", tmp_path / "o.svg"],
                "run": ["run", path, "--input", tmp_path / "x.npy", "--output", tmp_path / "o.npy"]}[command]
        status = cli.main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert status == 2, (name, status, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("graphc: error:"), (name, err[:500])
        assert str(path) in lines[0] and len(lines[0]) < MESSAGE_CHARS + len(str(path)) + 40, (name, lines[0][:500])


@pytest.mark.parametrize("error", [RecursionError("maximum recursion depth exceeded"), MemoryError(),
                                   TypeError("unhashable type\nsecond line")])
def test_cli_turns_unexpected_load_errors_into_one_line(error, tmp_path, capsys, monkeypatch):
    def broken_load(*args, **kwargs):
        raise error

    monkeypatch.setattr(sys.modules["graphc.compile"], "load", broken_load)
    path = tmp_path / "p.graphc"
    path.write_bytes(golden_bytes())
    assert cli.main(["inspect", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphc: error:") and str(path) in lines[0], lines


def test_cli_in_a_process_on_the_deep_file(tmp_path):
    path = tmp_path / "deep.graphc"
    path.write_bytes(hostile_files()["deep-version"])
    proc = subprocess.run([sys.executable, "-m", "graphc", "inspect", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]


# ---- structured fuzzing of the limits ------------------------------------------------------------------------------
FUZZ = settings(max_examples=150, deadline=3000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Dup:
    """A map written with duplicate keys (``pairs`` in order), or with non-str keys."""

    def __init__(self, pairs):
        self.pairs = pairs


def pack_tree(obj) -> bytes:
    """msgpack for trees that may hold ``Dup`` maps and ``Raw`` bytes."""
    if isinstance(obj, Raw):
        return obj.data
    if isinstance(obj, (Dup, dict)):
        pairs = obj.pairs if isinstance(obj, Dup) else list(obj.items())
        n = len(pairs)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + n.to_bytes(2, "big")
        return head + b"".join(pack_tree(k) + pack_tree(v) for k, v in pairs)
    if isinstance(obj, list):
        return _array(b"".join(pack_tree(v) for v in obj), len(obj))
    return msgpack.packb(obj, use_bin_type=True)


hostile = st.one_of(
    st.integers(20, 1100).map(lambda d: Raw(b"\x91" * d + b"\xc0")),                    # deep lists
    st.integers(20, 1100).map(lambda d: Raw(b"\x81\xa1k" * d + b"\xc0")),               # deep maps
    st.tuples(st.integers(1, 64), st.integers(1000, 65535), st.sampled_from([b"\x80", b"\x90", b"\xc0"]))
    .map(lambda t: Raw(array_of(t[0], array_of(t[1], t[2])))),                           # many small containers
    st.integers(1000, 1 << 20).map(lambda n: Raw(array_of(n))),                          # one long list of maps
    st.tuples(st.text(max_size=4), st.integers(-2**63, 2**63 - 1), st.integers(0, 9))
    .map(lambda t: Dup([(t[0], t[1]), (t[0], t[2])])),                                   # duplicate keys
    st.binary(max_size=4).map(lambda k: Dup([(k, 1)])),                                  # bytes key
    st.sampled_from([Dup([(1, 1)]), Dup([(None, 1)]), Dup([(2.5, 1)])]),
)


def _paths(obj, here=()):
    yield here
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, here + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield from _paths(v, here + (i,))


GOLDEN_PATHS = [p for p in _paths(golden_body()) if p]


def _replace(tree, path, value):
    *head, last = path
    for key in head:
        tree = tree[key]
    tree[last] = value


@FUZZ
@given(st.sampled_from(GOLDEN_PATHS), hostile)
def test_hostile_structure_anywhere_in_a_real_body(path, value):
    body = golden_body()
    _replace(body, path, value)
    outcome = load_or_refuse(pack_file(body_bytes=pack_tree(body)), golden_inputs(), run_may_raise_graphc_error=True)
    assert outcome in ("refused", "loaded"), f"{path}: {outcome}"


@FUZZ
@given(st.sampled_from(sorted(golden_outer())), hostile)
def test_hostile_structure_in_the_header(key, value):
    outer = golden_outer()
    outer[key] = value
    outcome = load_or_refuse(pack_tree(outer), golden_inputs(), run_may_raise_graphc_error=True)
    assert outcome in ("refused", "loaded"), f"{key}: {outcome}"


@FUZZ
@given(st.sampled_from(sorted(golden_body())), st.text(max_size=8), hostile)
def test_hostile_structure_as_an_extra_field(where, key, value):
    """Unknown body and graph keys are skipped (a newer minor version's fields), whatever they
    hold; elsewhere an extra key is refused or ignored."""
    body = golden_body()
    target = body if where in ("tensors", "param_groups") else body[where]
    if not isinstance(target, dict) or key in target:
        return
    target[key] = value
    outcome = load_or_refuse(pack_file(body_bytes=pack_tree(body)), golden_inputs(), run_may_raise_graphc_error=True)
    assert outcome in ("refused", "loaded"), f"{where}.{key}: {outcome}"
