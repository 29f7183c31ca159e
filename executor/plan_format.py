"""Graphs as plain data (and back, with every field checked) for the plan file.

Decoding trusts nothing: op names are looked up in the registry (unknown ones are
refused), attrs are checked against each op's schema, every value reference must point at
a value defined earlier (so no cycles, no dangling inputs), and the rebuilt graph goes
through ``ir.verify``. Fields arrive through ``plan_limits.Fields`` (unpacked within the
format's limits; values and nodes one at a time). Every problem raises ``PlanFormatError``
with a short message: file content is quoted through ``show``, never repr().
"""
from __future__ import annotations

from contextlib import contextmanager

import msgpack

from ..ir.errors import GraphcError, PlanFormatError
from ..ir.graph import STATE_ROLES, Graph, Node, Value
from ..ir.registry import get_op
from ..ir.types import DType, TensorType, dim_terms
from ..ir.verify import verify
from .plan_limits import (BODY_GRAPH_FIELDS, GRAPH_FIELDS, MAX_CALL_DEPTH, MAX_DIM_TEXT, MAX_NODE_ATTRS,
                          MAX_NODE_META, MAX_EXPANDED, MAX_NODES, MAX_RANK, NODE_META, FAIL_PREFIX, Limit, clip, fail,
                          show)
from .plan_meta import check_call_trees, check_meta, is_int
from .plan_unpack import Fields

MAX_DIM = 2**40

# The dtypes a plan file holds, by their short names (DType.short, the one name map); 1.2 added u8,
# 1.5 every other real dtype (the integers, float16 and ml_dtypes' low-precision types).
DTYPES = {d.short: d for d in DType if not d.is_complex}
FIRST_DTYPES = frozenset(d.short for d in (DType.float32, DType.float64, DType.int64, DType.bool, DType.uint8))


# ---- encoding -----------------------------------------------------------------------
def encode_graph(graph: Graph, bodies: dict | None = None) -> dict:
    """The graph as plain data. Custom op bodies (graphs in node attrs) go into ``functions``,
    callees before callers, and a node's attr holds the body's index there."""
    top = bodies is None
    functions = []
    if top:
        bodies = {}
        for body in graph.bodies():
            functions.append(msgpack.packb(encode_graph(body, bodies), use_bin_type=True))
            bodies[id(body)] = len(bodies)
    index: dict[int, int] = {}
    values = []

    def ref(v: Value) -> int:
        if id(v) not in index:
            index[id(v)] = len(values)
            values.append([v.name, list(v.type.shape), v.type.dtype.short])
        return index[id(v)]

    inputs = [ref(v) for v in graph.inputs]
    state = [[ref(v), graph.state_roles[name]] for name, v in graph.state.items()]
    constants = [ref(v) for v in graph.constants.values()]
    nodes = [[n.op, [ref(v) for v in n.inputs], [ref(v) for v in n.outputs], _plain(n.attrs, bodies), _plain(n.meta)]
             for n in graph.nodes]
    encoded = {
        "name": graph.name, "values": values, "inputs": inputs, "state": state, "constants": constants,
        "nodes": nodes, "outputs": [index[id(v)] for v in graph.outputs], "output_names": list(graph.output_names),
        "updates": [[name, index[id(v)]] for name, v in graph.updates.items()], "meta": _plain(graph.meta),
    }
    if functions:
        encoded["functions"] = functions
    return encoded


def _plain(obj, bodies: dict | None = None):
    """Tuples become lists (msgpack has one sequence type), a body its index in ``functions``;
    everything else is already plain."""
    if isinstance(obj, dict):
        return {str(k): _plain(v, bodies) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, bodies) for v in obj]
    if isinstance(obj, Graph):
        return bodies[id(obj)]
    return obj


# ---- decoding -----------------------------------------------------------------------
def expect(obj, kind, where: str):
    if kind is int:
        ok = isinstance(obj, int) and not isinstance(obj, bool)
    else:
        ok = isinstance(obj, kind)
    if not ok:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        fail(f"{where} should be {name}, got {type(obj).__name__}")
    return obj


def field(obj: dict, key: str, kind, where: str):
    if key not in obj:
        fail(f"{where} is missing {key!r}")
    return expect(obj[key], kind, f"{where}.{key}")


def decode_type(shape, dtype, where: str) -> TensorType:
    expect(shape, list, f"{where} shape")
    if len(shape) > MAX_RANK:  # before anything multiplies or parses the dims
        fail(f"{where} has rank {len(shape)} (at most {MAX_RANK})")
    for d in shape:
        if isinstance(d, str):
            if len(d) > MAX_DIM_TEXT:  # refuse long strings before parsing them
                fail(f"{where} has a symbolic dim of {len(d)} characters")
            try:
                coef, _ = dim_terms(d)
            except GraphcError:
                fail(f"{where} has a bad symbolic dim {show(d)}")
            if not 0 < coef <= MAX_DIM:
                fail(f"{where} has a bad symbolic dim {show(d)}")
        elif not (is_int(d) and 0 <= d <= MAX_DIM):
            fail(f"{where} has a bad dim {show(d)}")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        fail(f"{where} has dtype {show(dtype)}, not one of {sorted(DTYPES)}")
    return TensorType(tuple(shape), DTYPES[dtype])


def decode_graph(fields, bodies: list | None = None) -> tuple[Graph, list]:
    """``fields``: a ``plan_limits.Fields`` over the graph map. ``bodies``: the custom op
    bodies decoded so far (a body's nodes may call only those); the top graph decodes them."""
    top = bodies is None
    if top:
        bodies, sizes = decode_bodies(fields)
    graph = Graph(expect(fields.get("name"), str, "graph.name"))
    values = _decode_values(*fields.stream("values"))
    defined = [False] * len(values)

    def take(i, where, define=False):
        if not (is_int(i) and 0 <= i < len(values)):
            fail(f"{where} refers to value {show(i)}, which does not exist")
        if define:
            if defined[i]:
                fail(f"{where} defines value %{clip(values[i].name, 80)} a second time")
            defined[i] = True
        elif not defined[i]:
            fail(f"{where} reads %{clip(values[i].name, 80)} before it is defined (a cycle or a dangling input)")
        return values[i]

    for i in expect(fields.get("inputs"), list, "graph.inputs"):
        graph.add_input(take(i, "graph.inputs", define=True))
    for entry in expect(fields.get("state"), list, "graph.state"):
        i, role = _pair(entry, "graph.state")
        if role not in STATE_ROLES:
            fail(f"state role {show(role)} is not one of {STATE_ROLES}")
        value = take(i, "graph.state", define=True)
        if value.name in graph.state:
            fail(f"duplicate state name {show(value.name)}")
        graph.add_state(value, role)
    constants = [take(i, "graph.constants", define=True) for i in expect(fields.get("constants"), list,
                                                                          "graph.constants")]
    _, nodes = fields.stream("nodes")
    for k, entry in enumerate(nodes):  # one at a time: the first bad node stops the load
        graph.nodes.append(_decode_node(entry, k, take, bodies))
    if top and bodies and expanded_size(graph, sizes) > MAX_EXPANDED:
        fail(f"the graph runs more than {MAX_EXPANDED} ops with its custom op calls expanded")
    graph.outputs = [take(i, "graph.outputs") for i in expect(fields.get("outputs"), list, "graph.outputs")]
    graph.output_names = [expect(n, str, "graph.output_names")
                          for n in expect(fields.get("output_names"), list, "graph.output_names")]
    for entry in expect(fields.get("updates"), list, "graph.updates"):
        name, i = _pair(entry, "graph.updates")
        if not isinstance(name, str) or name not in graph.state:
            fail(f"update of unknown state {show(name)}")
        graph.updates[name] = take(i, "graph.updates")
    meta = expect(fields.get("meta"), dict, "graph.meta")
    graph.meta = check_meta(check_plain(meta, "graph.meta", GRAPH_FIELDS["meta"]))
    check_call_trees(graph)
    return graph, constants


def _decode_values(count: int, entries) -> list:
    values = []
    for k, entry in enumerate(entries):
        expect(entry, list, f"value {k}")
        if len(entry) != 3:
            fail(f"value {k} should be [name, shape, dtype]")
        name = expect(entry[0], str, f"value {k} name")
        values.append(Value(name, decode_type(entry[1], entry[2], f"value %{clip(name, 80)}")))
    return values


def _pair(entry, where):
    expect(entry, list, where)
    if len(entry) != 2:
        fail(f"{where} entries should be pairs")
    return entry


def decode_bodies(fields) -> tuple[list, dict]:
    """The custom op bodies of ``graph.functions``, in order: body k may call bodies 0..k-1
    only, so no body reaches itself (no recursion), and the chain of calls is at most
    ``MAX_CALL_DEPTH`` long; all bodies together hold at most ``MAX_NODES`` nodes (counted
    before any body is decoded), and one call runs at most ``MAX_EXPANDED`` ops with its nested
    calls expanded (64 calls per body over 16 levels is a small file but 64**15 ops). Each is a
    graph of inputs, pure ops and outputs (no state, constants or updates), checked by
    ir.verify; a problem names the body. Returns the bodies and each one's expanded size (by id)."""
    if "functions" not in fields:
        return [], {}
    bodies, depths, sizes = [], {}, {}
    for k, body_fields in enumerate(_located_bodies(fields)):
        where = f"graph.functions[{k}]"
        with _naming(where):
            body, constants = decode_graph(body_fields, bodies)
            label = f"{where} ({clip(body.name, 80)})"
            if body.state or constants or body.updates or not body.outputs:
                fail(f"{label} is not a custom op body: it must have outputs and no state, constants or updates")
            verify_loaded(body)
        impure = next((n.op for n in body.nodes if get_op(n.op).effects != "pure"), None)
        if impure is not None:
            fail(f"{label} holds {impure} ({get_op(impure).effects}); a custom op body holds pure ops only")
        called = [v for n in body.nodes for v in n.attrs.values() if isinstance(v, Graph)]
        depths[id(body)] = 1 + max((depths[id(v)] for v in called), default=0)
        if depths[id(body)] > MAX_CALL_DEPTH:
            fail(f"{label} calls bodies {depths[id(body)]} levels deep (at most {MAX_CALL_DEPTH})")
        sizes[id(body)] = expanded_size(body, sizes)
        if sizes[id(body)] > MAX_EXPANDED:
            fail(f"{label} runs more than {MAX_EXPANDED} ops with its calls expanded")
        bodies.append(body)
    return bodies, sizes


def _located_bodies(fields) -> list:
    """Every body's fields, located (not decoded), once the bodies' nodes are counted from their
    list headers: a file over ``MAX_NODES`` in all is refused before any body is decoded (1,024
    bodies of 129 nodes took 3.8 s to refuse when the count was kept while decoding)."""
    _, entries = fields.stream("functions")
    located, nodes = [], 0
    for k, packed in enumerate(entries):
        where = f"graph.functions[{k}]"
        with _naming(where):
            located.append(Fields(expect(packed, bytes, where), where, BODY_GRAPH_FIELDS))
            nodes += located[-1].length("nodes")
        if nodes > MAX_NODES:
            fail(f"the custom op bodies hold more than {MAX_NODES} nodes together")
    return located


@contextmanager
def _naming(where: str):
    """Errors about a body's inside name the body: its own "node 0" is not the model's."""
    try:
        yield
    except PlanFormatError as e:
        raise PlanFormatError(e.message if where in e.message else f"{FAIL_PREFIX}{where}: "
                              f"{e.message.removeprefix(FAIL_PREFIX)}") from None


def expanded_size(graph: Graph, sizes: dict) -> int:
    """Ops one run of ``graph`` executes, a call counting its forward body's expanded size
    (``sizes``: every body it calls was decoded, and sized, before it)."""
    return sum(sizes[id(n.attrs["forward"])] if n.op == "custom_call" else 1 for n in graph.nodes)


def _decode_node(entry, k: int, take, bodies: list) -> Node:
    where = f"node {k}"
    expect(entry, list, where)
    if len(entry) != 5:
        fail(f"{where} should be [op, inputs, outputs, attrs, meta]")
    op, ins, outs, attrs, meta = entry
    expect(op, str, f"{where} op")
    try:
        opdef = get_op(op)
    except GraphcError:
        fail(f"{where} uses unknown op {show(op)} (only registered ops can be loaded)")
    label = f"{where} ({op})"
    inputs = [take(i, label) for i in expect(ins, list, f"{where} inputs")]
    outputs = [take(i, label, define=True) for i in expect(outs, list, f"{where} outputs")]
    # a node's entry holds at most 64 lists and maps (plan_limits), so the op's schema can
    # neither recurse deeply on its attrs nor quote much of them (and its message is clipped)
    if len(expect(attrs, dict, f"{where} attrs")) > MAX_NODE_ATTRS:
        fail(f"{label} has {len(attrs)} attrs (at most {MAX_NODE_ATTRS})")
    for key, spec in opdef.attrs.items():  # a body attr holds an index into the bodies decoded so far
        if spec.kind == "graph" and key in attrs and attrs[key] is not None:
            index = attrs[key]
            if not (is_int(index) and 0 <= index < len(bodies)):
                fail(f"{label} attr {key} names body {show(index)}, which is not one decoded before it "
                     f"({len(bodies)} so far)")
            attrs = {**attrs, key: bodies[index]}
    try:
        attrs = opdef.normalize_attrs(attrs)
    except GraphcError as e:
        fail(f"{label}: {clip(e.message)}")
    expect(meta, dict, f"{where} meta")
    if len(meta) > MAX_NODE_META or not all(type(v) in _SCALARS for v in meta.values()):  # the usual: all scalars
        check_plain(meta, f"{where} meta", NODE_META)
    return Node(op, inputs, outputs, attrs, meta)


_SCALARS = frozenset([str, int, float, bool, type(None)])  # within a node's entry: short strings, 64-bit ints


def check_plain(obj, where: str, limit: Limit, fail=fail):
    """Maps with str keys, lists, str, int (64-bit), float, bool, None; nothing else, within
    ``limit`` (nesting, entries, string bytes). Iterative: no input can exhaust the stack.
    Saving passes its own ``fail`` (a GraphcError, not a PlanFormatError)."""
    items = containers = 0
    stack = [(obj, 0, ())]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, (dict, list)):
            containers += 1
            items += len(value)
            if depth >= limit.depth:
                fail(f"{_place(where, path)} is nested more than {limit.depth} levels deep")
            if len(value) > limit.length or items > limit.items or containers > limit.containers:
                fail(f"{where} holds more than {limit.items} entries, {limit.containers} lists and maps, "
                     f"or {limit.length} entries in one list or map")
            if isinstance(value, list):
                stack.extend((v, depth + 1, path) for v in value)
                continue
            for key, v in value.items():
                if type(key) is not str:
                    fail(f"{_place(where, path)} has a {type(key).__name__} key {show(key)}; keys must be strings")
                stack.append((key, depth + 1, path))
                stack.append((v, depth + 1, path + (key,)))
        elif isinstance(value, str):
            if len(value) * 4 > limit.string and not 0 <= _utf8_len(value) <= limit.string:  # 4: UTF-8's most
                fail(f"{_place(where, path)} holds a string of {len(value)} characters that is not valid "
                     f"Unicode or over {limit.string} bytes")
        elif is_int(value):
            if not -2**63 <= value < 2**64:
                fail(f"{_place(where, path)} holds an integer that does not fit in 64 bits")
        elif not (value is None or isinstance(value, (float, bool))):
            fail(f"{_place(where, path)} holds a {type(value).__name__}")
    return obj


def _utf8_len(text: str) -> int:
    """Bytes in UTF-8, as msgpack counts them; -1 for a lone surrogate (msgpack cannot write it)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return -1


def _place(where: str, path: tuple) -> str:
    return where + "".join(f".{clip(key, 40)}" for key in path[:4]) + (".(...)" if len(path) > 4 else "")


def verify_loaded(graph: Graph) -> Graph:
    try:
        return verify(graph)
    except GraphcError as e:
        fail(e.message)
