"""The plan file: a msgpack header and, since 1.3, a raw data section (see docs/format.md).

Layout: an outer map ``{magic, format_version, producer, kind, checksum, body, data}`` where
``body`` is the msgpack bytes of ``{graph, tensors, param_groups, rng, metadata}`` and
``checksum`` is its SHA-256; the tensors' bytes follow the header in the data section
(``plan_data``: 64-byte aligned, CRC-32 in ``data``), so a save is a few large writes and a
load is one read plus views. Files of 1.0 to 1.2 (no ``data``: each tensor record holds its
bytes) load through the same checks. Loading checks magic, version and checksums before it
parses the body, unpacks every field within the format's limits (``plan_limits``), and checks
every field before allocating arrays. No pickle, no eval, no import by name: op names are
looked up in the registry. Saving checks the same limits, so it never writes a file it cannot
load. Reading gives the file's checked parts (``PlanParts``); ``executor.plan`` builds the Plan.
"""
from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

import msgpack
import numpy as np

from ..ir._version import __version__
from ..ir.errors import GraphcError, PlanFormatError
from ..ir.graph import Graph
from ..ir.types import DType
from .atomic_write import write_atomically
from .plan_data import DataSection, coalesce, padding, read_file, section
from .plan_format import (
    DTYPES,
    FIRST_DTYPES,
    check_plain,
    decode_graph,
    encode_graph,
    expect,
    field,
    is_int,
    verify_loaded,
)
from .plan_limits import (
    BODY_FIELDS,
    GRAPH_FIELDS,
    HEADER_FIELDS,
    HEADER_UNKNOWN,
    MAX_IO,
    MAX_NAME,
    MAX_NODES,
    MAX_PARAM_GROUPS,
    MAX_PRODUCER,
    MAX_RANK,
    MAX_SCHEDULERS,
    MAX_TENSORS,
    MAX_VALUES,
    METADATA,
    clip,
    fail,
    show,
)
from .plan_tensors import decode_tensors
from .plan_unpack import Fields

MAGIC = "graphc-plan"
# 1.1: optional lr scheduler state and initial_lr; 1.2: u8 values; 1.3: the raw data section;
# 1.4: custom op bodies (graph.functions); 1.5: the dtypes beyond f32/f64/i64/b1/u8 (docs/format.md).
# A file says the oldest version that describes it: 1.3 unless it holds bodies (1.4) or newer dtypes
# (1.5), so graphc versions that read 1.3 keep reading it.
FORMAT_VERSION = (1, 5)
WITH_BODIES = (1, 4)
WITHOUT_BODIES = (1, 3)
KINDS = ("training", "inference")


def producer() -> str:
    """``graphc <version>``; the version lives in ``ir`` so the executor never imports the
    user-facing package above it (a loaded plan needs ir + executor only)."""
    return f"graphc {__version__}"


# ---- writing ------------------------------------------------------------------------
def plan_chunks(plan, metadata: dict | None = None, where: str = "the plan") -> list:
    """The file's bytes as a list of buffers: the header (padded to the data section), then the
    data section, whose chunks are views of the plan's arrays (write them before the plan runs
    again). A plan over the format's limits (docs/format.md) is a GraphcError
    ``cannot save {where}: ...`` here, rather than a file that ``gc.load`` would refuse."""
    def refuse(message: str):
        raise GraphcError(f"cannot save {where}: {clip(message)}")

    if not isinstance(metadata, (dict, type(None))):
        refuse(f"plan.metadata must be a dict, not {type(metadata).__name__}")
    graph = plan.graph
    _check_sizes(plan, refuse)  # cheap checks first: before the tensors' bytes are read
    metadata = check_plain(dict(metadata or {}), "metadata", METADATA, refuse)
    schedulers = check_plain([_scheduler_record(s) for s in plan.lr_schedulers], "lr_schedulers",
                             BODY_FIELDS["lr_schedulers"], refuse)
    encoded = encode_graph(graph)
    check_plain(encoded["meta"], "graph.meta", GRAPH_FIELDS["meta"], refuse)
    data = DataSection()
    tensors = [_tensor_record(name, plan.backend.to_numpy(plan._state[name]), data, graph.state[name])
               for name in graph.state]
    tensors += [_tensor_record(name, graph.constant_data[name], data, graph.constants[name]) for name in graph.constants]
    body = {
        "graph": encoded,
        "tensors": tensors,
        "param_groups": [_group_record(g) for g in plan.param_groups],
        "lr_schedulers": schedulers,
        "rng": _rng_state(plan.rng),
        "metadata": metadata,
    }
    body_bytes = msgpack.packb(body, use_bin_type=True)
    header = msgpack.packb({
        "magic": MAGIC, "format_version": list(_oldest_version(plan.graph, encoded)),
        "producer": producer(), "kind": plan.kind,
        "checksum": "sha256:" + hashlib.sha256(body_bytes).hexdigest(), "body": body_bytes,
        "data": {"size": data.size, "checksum": data.checksum()},
    }, use_bin_type=True)
    return [header + padding(len(header)), *data.chunks]


def plan_to_bytes(plan, metadata: dict | None = None, where: str = "the plan") -> bytes:
    """The whole file as one bytes object (what ``save_plan`` writes)."""
    with plan._serial:  # a training step running meanwhile would change the arrays under the checksum
        return b"".join(plan_chunks(plan, metadata, where))


def _check_sizes(plan, refuse) -> None:
    """The counts the loader limits (plan_limits), checked on the plan before it is encoded."""
    graph = plan.graph
    values = {id(v): v for v in [*graph.inputs, *graph.state.values(), *graph.constants.values(),
                                 *(v for n in graph.nodes for v in n.outputs)]}
    counts = (("nodes", len(graph.nodes), MAX_NODES), ("values", len(values), MAX_VALUES),
              ("state entries and constants", len(graph.state) + len(graph.constants), MAX_TENSORS),
              ("graph inputs", len(graph.inputs), MAX_IO), ("graph outputs", len(graph.outputs), MAX_IO),
              ("param_groups", len(plan.param_groups), MAX_PARAM_GROUPS),
              ("lr schedulers", len(plan.lr_schedulers), MAX_SCHEDULERS))
    for what, count, most in counts:
        if count > most:
            refuse(f"the plan has {count} {what}; a plan file holds at most {most}")
    for name in [graph.name, *graph.output_names, *(v.name for v in values.values())]:
        if len(name) * 4 > MAX_NAME and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
            refuse(f"the name {clip(name, 80)} is over {MAX_NAME} bytes")
    for v in values.values():
        if len(v.type.shape) > MAX_RANK:
            refuse(f"value {clip(v.name, 80)} has rank {len(v.type.shape)} (at most {MAX_RANK})")
        if v.type.dtype.short not in DTYPES:  # the loader's allowlist: never write what it refuses
            refuse(f"value {clip(v.name, 80)} has dtype {v.type.dtype.name}, which a plan file cannot hold "
                   f"(it holds {', '.join(d.name for d in DTYPES.values())})")


def _group_record(group: dict) -> dict:
    record = {"lr": float(group["lr"])}
    if "initial_lr" in group:  # where a scheduler started: resuming it needs this too
        record["initial_lr"] = float(group["initial_lr"])
    return record


def _scheduler_record(scheduler) -> dict:
    if isinstance(scheduler, dict):  # loaded without graphc's scheduler classes: kept as read
        return scheduler
    return {"type": type(scheduler).__name__, "state": scheduler.state_dict()}  # checked in plan_to_bytes


def _oldest_version(graph, encoded: dict) -> tuple:
    """The oldest format version that describes this file (see FORMAT_VERSION)."""
    graphs = [graph, *graph.bodies()]
    if any(v.type.dtype.short not in FIRST_DTYPES for g in graphs for v in _graph_values(g)):
        return FORMAT_VERSION
    return WITH_BODIES if "functions" in encoded else WITHOUT_BODIES


def _graph_values(graph):
    yield from graph.inputs
    yield from graph.state.values()
    yield from graph.constants.values()
    for node in graph.nodes:
        yield from node.outputs


def _file_dtype(dtype: np.dtype) -> str | None:
    try:
        short = DType.from_any(dtype).short
    except GraphcError:
        return None
    return short if short in DTYPES else None


def _tensor_record(name: str, array: np.ndarray, data: DataSection, value) -> dict:
    dtype = _file_dtype(array.dtype)
    if dtype is None:
        raise GraphcError(f"cannot save tensor {name!r}: dtype {array.dtype} is not one of the plan file's "
                          f"({', '.join(d.name for d in DTYPES.values())})")
    if dtype != value.type.dtype.short or tuple(array.shape) != tuple(value.type.shape):  # set by hand: the
        raise GraphcError(f"cannot save tensor {name!r}: it holds {array.dtype}{list(array.shape)} but the "
                          f"graph says {value.type}")  # loader would refuse the file
    shape = list(array.shape)
    array = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)  # no copy if it is
    offset, nbytes = data.add(array)
    return {"name": name, "dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes}


def _rng_state(rng: np.random.Generator) -> dict:
    st = rng.bit_generator.state
    # PCG64's 128-bit integers do not fit msgpack ints: store them as hex strings.
    return {"bit_generator": st["bit_generator"], "state": format(st["state"]["state"], "x"),
            "inc": format(st["state"]["inc"], "x"), "has_uint32": int(st["has_uint32"]),
            "uinteger": int(st["uinteger"])}


def save_plan(plan, path, metadata: dict | None = None) -> None:
    """Write atomically (``atomic_write``); every failure is a GraphcError naming ``path``."""
    path = os.fsdecode(path)
    with plan._serial:  # the chunks are the live arrays: no training step until they are written
        chunks = plan_chunks(plan, metadata, where=f"plan to {path}")
        write_atomically(path, coalesce(chunks), what="plan")


# ---- reading ------------------------------------------------------------------------
def read_document(data) -> dict:
    """Check the header, the version and the checksums. The body comes back as ``Fields``: a
    view of ``data``, located but not unpacked; the data section (1.3) as a writable view."""
    header = Fields(data, "file", HEADER_FIELDS, unknown=HEADER_UNKNOWN, trailing=True)
    if "data" not in header and header.end != len(header.view):
        fail("not a graphc plan file, or a damaged one: trailing bytes after the file")
    if header.get("magic", None) != MAGIC:
        fail("not a graphc plan (bad magic)")
    version = expect(header.get("format_version"), list, "file.format_version")
    if len(version) != 2 or not all(is_int(v) and v >= 0 for v in version):
        fail(f"bad format_version {show(version)}")
    if version[0] > FORMAT_VERSION[0]:
        raise PlanFormatError(f"plan format {version[0]}.{version[1]} is newer than this graphc supports "
                              f"({FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}); upgrade graphc to load it")
    producer_name = expect(header.get("producer"), str, "file.producer")
    if len(producer_name) > MAX_PRODUCER:
        fail(f"file.producer is {len(producer_name)} characters long (at most {MAX_PRODUCER})")
    kind = expect(header.get("kind"), str, "file.kind")
    if kind not in KINDS:
        fail(f"kind {show(kind)} is not one of {KINDS}")
    body = header.bin("body")
    checksum = expect(header.get("checksum"), str, "file.checksum")
    if checksum != "sha256:" + hashlib.sha256(body).hexdigest():
        fail("checksum mismatch: the file is corrupted")
    data_section = None
    if "data" in header:  # 1.3: the tensors' bytes follow the header
        data_section = section(header.view, header.end, expect(header.get("data"), dict, "file.data"))
    return {"body": Fields(body, "body", BODY_FIELDS), "kind": kind, "producer": producer_name,
            "format_version": tuple(version), "data": data_section}


class PlanParts(NamedTuple):
    """What a plan file holds, every field checked: the runtime builds its Plan from these
    (``executor.plan.load_plan``), as ONNX's ``load_model`` gives a proto that a runtime turns into a
    session. The format never constructs a Plan, so ``plan`` may import it and not the reverse."""
    graph: Graph
    state: dict  # state entry name -> array (views of the file's data section where it allows)
    kind: str  # "training" or "inference"
    param_groups: list  # {"lr", optional "initial_lr"} per group
    rng_state: dict  # a numpy PCG64 bit_generator.state
    metadata: dict
    lr_schedulers: list  # raw {"type", "state"} entries; graphc's gc.load rebuilds the classes
    producer: str
    format_version: tuple


def read_plan(path) -> PlanParts:
    """Read a plan file; every problem raises ``PlanFormatError`` naming ``path``."""
    path = os.fsdecode(path)
    try:
        data = read_file(path)  # one read into an aligned, writable buffer: the state's arrays are views of it
        return read_plan_bytes(data)
    except OSError as e:
        raise PlanFormatError(f"cannot read plan file {path}: {e.strerror or e}") from None
    except PlanFormatError as e:
        raise PlanFormatError(f"{path}: {e.message}") from None


def read_plan_bytes(data) -> PlanParts:
    """The parts of a plan from the file's bytes (any buffer). The data section of a 1.3 file is
    used in place when ``data`` is writable and 64-byte aligned (``read_plan``), else copied once."""
    doc = read_document(data)
    body = doc["body"]
    try:
        graph, constants = decode_graph(body.fields("graph"))
        expected = {v.name: v.type for v in [*graph.state.values(), *constants]}
        arrays = decode_tensors(*body.stream("tensors"), expected, doc["data"])
        for value in constants:
            graph.add_constant(value, arrays[value.name])
        verify_loaded(graph)
        _check_kind(doc["kind"], graph)
        groups = _param_groups(expect(body.get("param_groups"), list, "param_groups"), graph)
        schedulers = _schedulers(expect(body.get("lr_schedulers", []), list, "lr_schedulers"))
        rng_state = _decode_rng(expect(body.get("rng"), dict, "rng"))
        metadata = check_plain(expect(body.get("metadata", {}), dict, "metadata"), "metadata", METADATA)
    except PlanFormatError:
        raise
    except (GraphcError, ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as e:
        fail(f"{type(e).__name__}: {clip(e)}")
    return PlanParts(graph, {name: arrays[name] for name in graph.state}, doc["kind"], groups, rng_state, metadata,
                     schedulers, doc["producer"], doc["format_version"])


def _check_kind(kind: str, graph) -> None:
    if not graph.outputs:
        fail("the graph has no outputs")
    if kind == "training" and graph.meta.get("returns") != "all":  # a step function returns what it likes
        loss = graph.outputs[0].type
        if loss.shape != () or not loss.dtype.is_float:
            fail(f"a training plan's first output must be the scalar loss, got {loss}")


def _param_groups(groups: list, graph) -> list:
    hyper = graph.meta.get("hyper_inputs", [])
    if not isinstance(hyper, list) or len(groups) != len(hyper):
        fail(f"{len(groups)} param_groups for hyper inputs {show(hyper)}")
    out = []
    for g in groups:
        expect(g, dict, "param_groups entry")
        group = {"lr": float(field(g, "lr", (int, float), "param_groups entry"))}
        if "initial_lr" in g:
            group["initial_lr"] = float(field(g, "initial_lr", (int, float), "param_groups entry"))
        out.append(group)
    return out


def _schedulers(entries: list) -> list:
    """Plain ``{"type": str, "state": {str: number or list of numbers}}`` entries; graphc's
    ``gc.load`` maps the type through its own table of scheduler classes."""
    if len(entries) > MAX_SCHEDULERS:
        fail(f"{len(entries)} lr_schedulers (at most {MAX_SCHEDULERS})")
    out = []
    for entry in entries:
        expect(entry, dict, "lr_schedulers entry")
        kind = field(entry, "type", str, "lr_schedulers entry")
        state = field(entry, "state", dict, "lr_schedulers entry")
        for key, value in state.items():
            values = value if isinstance(value, list) else [value]
            if len(values) > MAX_PARAM_GROUPS or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                         for v in values):
                fail(f"lr scheduler {show(kind)} state {show(key)} must be a number or a list of numbers")
        out.append({"type": kind, "state": state})
    return out


def _decode_rng(st: dict) -> dict:
    if st.get("bit_generator") != "PCG64":
        fail(f"unsupported RNG {show(st.get('bit_generator'))}")
    try:
        state, inc = (int(field(st, key, str, "rng")[:33], 16) for key in ("state", "inc"))
    except ValueError:
        fail("rng state is not hexadecimal")
    if not (0 <= state < 2**128 and 0 <= inc < 2**128):
        fail("rng state out of range")
    return {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
            "has_uint32": int(field(st, "has_uint32", int, "rng")) & 1, "uinteger": field(st, "uinteger", int, "rng")
            & 0xFFFFFFFF}
