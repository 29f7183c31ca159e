"""Graphs as plain data (and back, with every field checked) for the plan file.

Decoding trusts nothing: op names are looked up in the registry (unknown ones are
refused), attrs are checked against each op's schema, every value reference must point at
a value defined earlier (so no cycles, no dangling inputs), and the rebuilt graph goes
through ``ir.verify``. Every problem raises ``PlanFormatError``.
"""
from __future__ import annotations

from ..ir.errors import GraphcError, PlanFormatError
from ..ir.graph import STATE_ROLES, Graph, Node, Value
from ..ir.registry import get_op
from ..ir.types import DType, TensorType, dim_poly
from ..ir.verify import verify

MAX_RANK = 16
MAX_DIM = 2**40

DTYPES = {"f32": DType.float32, "f64": DType.float64, "i64": DType.int64, "b1": DType.bool}


# ---- encoding -----------------------------------------------------------------------
def encode_graph(graph: Graph) -> dict:
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
    nodes = [[n.op, [ref(v) for v in n.inputs], [ref(v) for v in n.outputs], _plain(n.attrs), _plain(n.meta)]
             for n in graph.nodes]
    return {
        "name": graph.name, "values": values, "inputs": inputs, "state": state, "constants": constants,
        "nodes": nodes, "outputs": [index[id(v)] for v in graph.outputs], "output_names": list(graph.output_names),
        "updates": [[name, index[id(v)]] for name, v in graph.updates.items()], "meta": _plain(graph.meta),
    }


def _plain(obj):
    """Tuples become lists (msgpack has one sequence type); everything else is already plain."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


# ---- decoding -----------------------------------------------------------------------
def fail(message: str):
    raise PlanFormatError(f"invalid plan file: {message}")


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
    if len(shape) > MAX_RANK:
        fail(f"{where} has rank {len(shape)} (at most {MAX_RANK})")
    for d in shape:
        if isinstance(d, str):
            if len(d) > 32:  # "N*4096" is short; refuse long strings before parsing them
                fail(f"{where} has a symbolic dim of {len(d)} characters")
            try:
                coef, _ = dim_poly(d)
            except GraphcError:
                fail(f"{where} has a bad symbolic dim {d!r}")
            if not 0 < coef <= MAX_DIM:
                fail(f"{where} has a bad symbolic dim {d!r}")
        elif not (isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM):
            fail(f"{where} has a bad dim {d!r}")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        fail(f"{where} has dtype {dtype!r}, not one of {sorted(DTYPES)}")
    return TensorType(tuple(shape), DTYPES[dtype])


def decode_graph(data: dict) -> tuple[Graph, list]:
    expect(data, dict, "graph")
    graph = Graph(field(data, "name", str, "graph"))
    values = _decode_values(field(data, "values", list, "graph"))
    defined = [False] * len(values)

    def take(i, where, define=False):
        if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(values)):
            fail(f"{where} refers to value {i!r}, which does not exist")
        if define:
            if defined[i]:
                fail(f"{where} defines value %{values[i].name} a second time")
            defined[i] = True
        elif not defined[i]:
            fail(f"{where} reads %{values[i].name} before it is defined (a cycle or a dangling input)")
        return values[i]

    for i in field(data, "inputs", list, "graph"):
        graph.add_input(take(i, "graph.inputs", define=True))
    for entry in field(data, "state", list, "graph"):
        i, role = _pair(entry, "graph.state")
        if role not in STATE_ROLES:
            fail(f"state role {role!r} is not one of {STATE_ROLES}")
        value = take(i, "graph.state", define=True)
        if value.name in graph.state:
            fail(f"duplicate state name {value.name!r}")
        graph.add_state(value, role)
    constants = [take(i, "graph.constants", define=True) for i in field(data, "constants", list, "graph")]
    for k, entry in enumerate(field(data, "nodes", list, "graph")):
        graph.nodes.append(_decode_node(entry, k, take))
    graph.outputs = [take(i, "graph.outputs") for i in field(data, "outputs", list, "graph")]
    graph.output_names = [expect(n, str, "graph.output_names") for n in field(data, "output_names", list, "graph")]
    for entry in field(data, "updates", list, "graph"):
        name, i = _pair(entry, "graph.updates")
        if not isinstance(name, str) or name not in graph.state:
            fail(f"update of unknown state {name!r}")
        graph.updates[name] = take(i, "graph.updates")
    graph.meta = check_meta(check_plain(field(data, "meta", dict, "graph"), "graph.meta"))
    return graph, constants


def check_meta(meta: dict) -> dict:
    """The graph-meta fields graphc reads back must have the shapes it writes."""
    passes = meta.get("passes", [])
    if not isinstance(passes, list) or not all(
            isinstance(p, dict) and isinstance(p.get("name"), str)
            and all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool) for k in ("nodes_before", "nodes_after"))
            for p in passes):
        fail("graph.meta.passes should be a list of {name, nodes_before, nodes_after}")
    fixed = meta.get("fixed_batch")
    if fixed is not None and not (isinstance(fixed, dict) and isinstance(fixed.get("size"), int)
                                  and isinstance(fixed.get("where"), str)):
        fail("graph.meta.fixed_batch should be {size, where}")
    hyper = meta.get("hyper_inputs", [])
    if not isinstance(hyper, list) or not all(isinstance(h, str) for h in hyper):
        fail("graph.meta.hyper_inputs should be a list of input names")
    return meta


def _decode_values(raw: list) -> list:
    values = []
    for k, entry in enumerate(raw):
        expect(entry, list, f"value {k}")
        if len(entry) != 3:
            fail(f"value {k} should be [name, shape, dtype]")
        name = expect(entry[0], str, f"value {k} name")
        values.append(Value(name, decode_type(entry[1], entry[2], f"value %{name}")))
    return values


def _pair(entry, where):
    expect(entry, list, where)
    if len(entry) != 2:
        fail(f"{where} entries should be pairs")
    return entry


def _decode_node(entry, k: int, take) -> Node:
    where = f"node {k}"
    expect(entry, list, where)
    if len(entry) != 5:
        fail(f"{where} should be [op, inputs, outputs, attrs, meta]")
    op, ins, outs, attrs, meta = entry
    expect(op, str, f"{where} op")
    try:
        opdef = get_op(op)
    except GraphcError:
        fail(f"{where} uses unknown op {op!r} (only registered ops can be loaded)")
    inputs = [take(i, f"{where} ({op}) inputs") for i in expect(ins, list, f"{where} inputs")]
    outputs = [take(i, f"{where} ({op}) outputs", define=True) for i in expect(outs, list, f"{where} outputs")]
    try:
        attrs = opdef.normalize_attrs(expect(attrs, dict, f"{where} attrs"))
    except GraphcError as e:
        fail(f"{where} ({op}): {e.message}")
    meta = check_plain(expect(meta, dict, f"{where} meta"), f"{where} meta")
    return Node(op, inputs, outputs, attrs, meta)


def check_plain(obj, where: str, depth: int = 0):
    """Maps with str keys, lists, str, int, float, bool, None; nothing else, not too deep."""
    if depth > 16:
        fail(f"{where} is nested too deeply")
    if isinstance(obj, dict):
        for key, value in obj.items():
            expect(key, str, f"{where} key")
            check_plain(value, f"{where}.{key}", depth + 1)
    elif isinstance(obj, list):
        for value in obj:
            check_plain(value, where, depth + 1)
    elif not (obj is None or isinstance(obj, (str, int, float, bool))):
        fail(f"{where} holds a {type(obj).__name__}")
    return obj


def verify_loaded(graph: Graph) -> Graph:
    try:
        return verify(graph)
    except GraphcError as e:
        fail(e.message)
