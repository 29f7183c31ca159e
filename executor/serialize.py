"""The plan file: one self-contained msgpack document (see docs/format.md).

Layout: an outer map ``{magic, format_version, producer, kind, checksum, body}`` where
``body`` is the msgpack bytes of ``{graph, tensors, param_groups, rng, metadata}`` and
``checksum`` is its SHA-256. Loading checks magic, version and checksum before it parses
the body, unpacks with size limits, and checks every field before allocating arrays.
No pickle, no eval, no import by name: op names are looked up in the registry.
"""
from __future__ import annotations

import hashlib
import os
import tempfile

import msgpack
import numpy as np

from ..ir.errors import GraphcError, PlanFormatError
from .plan_format import DTYPES, MAX_DIM, check_plain, decode_graph, encode_graph, expect, fail, field, verify_loaded

MAGIC = "graphc-plan"
FORMAT_VERSION = (1, 1)  # 1.1: optional lr scheduler state and initial_lr (docs/format.md)
KINDS = ("training", "inference")
_LIMITS = dict(max_str_len=1 << 20, max_array_len=1 << 24, max_map_len=1 << 20, max_ext_len=0)


def producer() -> str:
    from graphc import __version__

    return f"graphc {__version__}"


# ---- writing ------------------------------------------------------------------------
def plan_to_bytes(plan, metadata: dict | None = None) -> bytes:
    graph = plan.graph
    tensors = [_tensor_record(name, plan.backend.to_numpy(plan._state[name])) for name in graph.state]
    tensors += [_tensor_record(name, graph.constant_data[name]) for name in graph.constants]
    body = {
        "graph": encode_graph(graph),
        "tensors": tensors,
        "param_groups": [_group_record(g) for g in plan.param_groups],
        "lr_schedulers": [_scheduler_record(s) for s in plan.lr_schedulers],
        "rng": _rng_state(plan.rng),
        "metadata": check_plain(dict(metadata or {}), "metadata"),
    }
    body_bytes = msgpack.packb(body, use_bin_type=True)
    return msgpack.packb({
        "magic": MAGIC, "format_version": list(FORMAT_VERSION), "producer": producer(), "kind": plan.kind,
        "checksum": "sha256:" + hashlib.sha256(body_bytes).hexdigest(), "body": body_bytes,
    }, use_bin_type=True)


def _group_record(group: dict) -> dict:
    record = {"lr": float(group["lr"])}
    if "initial_lr" in group:  # where a scheduler started: resuming it needs this too
        record["initial_lr"] = float(group["initial_lr"])
    return record


def _scheduler_record(scheduler) -> dict:
    if isinstance(scheduler, dict):  # loaded without graphc's scheduler classes: kept as read
        return scheduler
    return {"type": type(scheduler).__name__, "state": check_plain(scheduler.state_dict(), "lr scheduler state")}


FILE_DTYPES = {np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("int64"): "i64",
               np.dtype("bool"): "b1"}


def _tensor_record(name: str, array: np.ndarray) -> dict:
    dtype = FILE_DTYPES.get(array.dtype)
    if dtype is None:
        raise GraphcError(f"cannot save tensor {name!r}: dtype {array.dtype} is not one of the plan file's "
                          "(float32, float64, int64, bool)")
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"name": name, "dtype": dtype, "shape": list(array.shape), "data": data}


def _rng_state(rng: np.random.Generator) -> dict:
    st = rng.bit_generator.state
    # PCG64's 128-bit integers do not fit msgpack ints: store them as hex strings.
    return {"bit_generator": st["bit_generator"], "state": format(st["state"]["state"], "x"),
            "inc": format(st["state"]["inc"], "x"), "has_uint32": int(st["has_uint32"]),
            "uinteger": int(st["uinteger"])}


def save_plan(plan, path, metadata: dict | None = None) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then ``os.replace``."""
    data = plan_to_bytes(plan, metadata)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".graphc-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise GraphcError(f"cannot save plan to {path!r}: {e.strerror}") from None
    try:
        os.chmod(tmp, _file_mode(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _file_mode(path: str) -> int:
    """Keep an existing file's permissions; new files get the usual 0o666 minus the umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


# ---- reading ------------------------------------------------------------------------
def read_document(data: bytes) -> dict:
    """Check the outer map, the version and the checksum; return the unpacked body and header."""
    outer = _unpack(data, "header", max_bin_len=len(data))
    expect(outer, dict, "file")
    if outer.get("magic") != MAGIC:
        fail("not a graphc plan (bad magic)")
    version = field(outer, "format_version", list, "file")
    if len(version) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in version):
        fail(f"bad format_version {version!r}")
    if version[0] > FORMAT_VERSION[0]:
        raise PlanFormatError(f"plan format {version[0]}.{version[1]} is newer than this graphc supports "
                              f"({FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}); upgrade graphc to load it")
    kind = field(outer, "kind", str, "file")
    if kind not in KINDS:
        fail(f"kind {kind!r} is not one of {KINDS}")
    body_bytes = field(outer, "body", bytes, "file")
    checksum = field(outer, "checksum", str, "file")
    if checksum != "sha256:" + hashlib.sha256(body_bytes).hexdigest():
        fail("checksum mismatch: the file is corrupted")
    body = _unpack(body_bytes, "body", max_bin_len=len(body_bytes))
    expect(body, dict, "body")
    return {"header": outer, "body": body, "kind": kind}


def _unpack(data: bytes, what: str, max_bin_len: int):
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True, max_bin_len=max_bin_len, **_LIMITS)
    except (msgpack.exceptions.ExtraData, msgpack.exceptions.OutOfData) as e:
        reason = "truncated" if isinstance(e, msgpack.exceptions.OutOfData) else "trailing bytes"
        fail(f"not a graphc plan file, or a damaged one: the {what} is not one msgpack document ({reason})")
    except (msgpack.exceptions.UnpackException, ValueError, TypeError, OverflowError, RecursionError) as e:
        if "incomplete" in str(e):
            fail(f"not a graphc plan file, or a truncated one ({what}: {e})")
        fail(f"the {what} is not valid msgpack ({type(e).__name__}: {e})")


def decode_tensors(records, expected: dict) -> dict:
    """Check every record (name, dtype allowlist, shape, byte count) against the graph's
    ``expected`` types before building any array."""
    expect(records, list, "tensors")
    if len(records) != len(expected):
        fail(f"{len(records)} tensors stored, the graph needs {len(expected)}")
    arrays = {}
    for k, rec in enumerate(records):
        where = f"tensor {k}"
        expect(rec, dict, where)
        name = field(rec, "name", str, where)
        if name in arrays:
            fail(f"duplicate tensor name {name!r}")
        if name not in expected:
            fail(f"tensor {name!r} is not a state entry or constant of the graph")
        dtype = field(rec, "dtype", str, where)
        if dtype not in DTYPES:
            fail(f"tensor {name!r} has dtype {dtype!r}, not one of {sorted(DTYPES)}")
        shape = field(rec, "shape", list, where)
        count = 1
        for d in shape:
            if not (isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM):
                fail(f"tensor {name!r} has a bad dim {d!r}")
            count *= d  # Python ints: no overflow
        want = expected[name]
        if tuple(shape) != want.shape or DTYPES[dtype] is not want.dtype:
            fail(f"tensor {name!r} is {dtype}{shape}, the graph says {want}")
        data = field(rec, "data", bytes, where)
        np_dtype = DTYPES[dtype].numpy.newbyteorder("<")
        if count * np_dtype.itemsize != len(data):
            fail(f"tensor {name!r}: shape {shape} x {np_dtype.itemsize} bytes != {len(data)} bytes of data")
        arrays[name] = np.frombuffer(data, dtype=np_dtype).astype(DTYPES[dtype].numpy).reshape(shape)
    return arrays


def load_plan(path, device="cpu"):
    """Read a plan file; every problem raises ``PlanFormatError``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PlanFormatError(f"cannot read plan file {os.fspath(path)!r}: {e.strerror}") from None
    return plan_from_bytes(data, device)


def plan_from_bytes(data: bytes, device="cpu"):
    from .plan import Plan

    doc = read_document(data)
    body = doc["body"]
    try:
        graph, constants = decode_graph(field(body, "graph", dict, "body"))
        expected = {v.name: v.type for v in [*graph.state.values(), *constants]}
        arrays = decode_tensors(field(body, "tensors", list, "body"), expected)
        for value in constants:
            graph.add_constant(value, arrays[value.name])
        verify_loaded(graph)
        _check_kind(doc["kind"], graph)
        groups = _param_groups(field(body, "param_groups", list, "body"), graph)
        schedulers = _schedulers(expect(body.get("lr_schedulers", []), list, "lr_schedulers"))
        rng_state = _decode_rng(field(body, "rng", dict, "body"))
        metadata = check_plain(expect(body.get("metadata", {}), dict, "metadata"), "metadata")
    except PlanFormatError:
        raise
    except (GraphcError, ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as e:
        fail(f"{type(e).__name__}: {e}")
    state = {name: arrays[name] for name in graph.state}
    plan = Plan(graph, state, device=device, kind=doc["kind"], param_groups=groups)
    plan.rng.bit_generator.state = rng_state
    plan.metadata = metadata
    plan.lr_schedulers = schedulers
    plan.producer = doc["header"].get("producer")
    plan.format_version = tuple(doc["header"]["format_version"])
    return plan


def _check_kind(kind: str, graph) -> None:
    if not graph.outputs:
        fail("the graph has no outputs")
    if kind == "training":
        loss = graph.outputs[0].type
        if loss.shape != () or not loss.dtype.is_float:
            fail(f"a training plan's first output must be the scalar loss, got {loss}")


def _param_groups(groups: list, graph) -> list:
    hyper = graph.meta.get("hyper_inputs", [])
    if not isinstance(hyper, list) or len(groups) != len(hyper):
        fail(f"{len(groups)} param_groups for hyper inputs {hyper!r}")
    out = []
    for g in groups:
        expect(g, dict, "param_groups entry")
        group = {"lr": float(field(g, "lr", (int, float), "param_groups entry"))}
        if "initial_lr" in g:
            group["initial_lr"] = float(field(g, "initial_lr", (int, float), "param_groups entry"))
        out.append(group)
    return out


MAX_SCHEDULERS = 16  # a plan is driven by a few schedulers at most


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
            if len(values) > 1 << 16 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                for v in values):
                fail(f"lr scheduler {kind[:40]!r} state {str(key)[:40]!r} must be a number or a list of numbers")
        out.append({"type": kind, "state": state})
    return out


def _decode_rng(st: dict) -> dict:
    if st.get("bit_generator") != "PCG64":
        fail(f"unsupported RNG {st.get('bit_generator')!r}")
    try:
        state, inc = (int(field(st, key, str, "rng")[:33], 16) for key in ("state", "inc"))
    except ValueError:
        fail("rng state is not hexadecimal")
    if not (0 <= state < 2**128 and 0 <= inc < 2**128):
        fail("rng state out of range")
    return {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
            "has_uint32": int(field(st, "has_uint32", int, "rng")) & 1, "uinteger": field(st, "uinteger", int, "rng")
            & 0xFFFFFFFF}
