"""The plan file's raw data section (format 1.3, docs/format.md "Data section"): its layout
(64-byte aligned tensors after the msgpack header, zero padding, CRC-32), saving with a few
large writes and no copy of the arrays, loading with one read into one aligned writable buffer
whose views become the plan's state, files of 1.0 to 1.2 still loading, and hostile data
sections (offsets past the end, overlapping, misaligned, sizes that disagree with shape x dtype,
gaps, truncation, bad padding, checksums) each refused with a PlanFormatError. Helpers come
from test_plan_file.py."""
from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import tracemalloc
import zlib

import msgpack
import numpy as np
import pytest
from graphc.executor.plan import plan_from_bytes
from graphc.executor.plan_data import ALIGN, coalesce, crc32, read_file
from graphc.executor.serialize import plan_to_bytes
from test_plan_file import (
    flip_outcomes,
    legacy_bytes,
    make_batches,
    make_training_plan,
    refuse,
    split_file,
)

import graphc as gc
from graphc import nn, optim


def trained_file(steps: int = 2) -> tuple[gc.Plan, bytes]:
    _, step = make_training_plan()
    for x, y in make_batches(steps):
        step(x, y)
    return step, plan_to_bytes(step)


def rebuild(data: bytes, edit_body=None, edit_data=None, section: bytes | None = None, fix_crc: bool = True,
            gap=None, trailing: bytes = b"") -> bytes:
    """``data`` (a 1.3 file) with its body, its header's ``data`` map or its data section
    replaced; checksums are recomputed (the data section's unless ``fix_crc`` is False), so
    only the edit is wrong. ``gap(header_length)``: the bytes between header and section."""
    header, _, old = split_file(data)
    body = msgpack.unpackb(header["body"], raw=False)
    if edit_body is not None:
        edit_body(body)
    header["body"] = msgpack.packb(body, use_bin_type=True)
    header["checksum"] = "sha256:" + hashlib.sha256(header["body"]).hexdigest()
    section = old if section is None else section
    header["data"]["size"] = len(section)
    if fix_crc:
        header["data"]["checksum"] = f"crc32:{zlib.crc32(section):08x}"
    if edit_data is not None:
        edit_data(header)
    head = msgpack.packb(header, use_bin_type=True)
    pad = bytes(-len(head) % ALIGN) if gap is None else gap(len(head))
    return head + pad + section + trailing


def records(data: bytes) -> list:
    header, _, _ = split_file(data)
    return msgpack.unpackb(header["body"], raw=False)["tensors"]


def root(obj):
    """The object that owns an array's memory (through views and memoryviews)."""
    while True:
        if isinstance(obj, np.ndarray) and obj.base is not None:
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        else:
            return obj


# ---- layout ------------------------------------------------------------------------------------------
def test_saved_file_layout():
    plan, data = trained_file()
    header, end, section = split_file(data)
    # a training plan holds fused_elementwise bodies (its update): format 1.4
    assert header["format_version"] == [1, 4] and list(header)[-1] == "data"
    start = len(data) - len(section)
    assert start % ALIGN == 0 and start - end < ALIGN and data[end:start] == bytes(start - end)
    assert header["data"] == {"size": len(section), "checksum": f"crc32:{zlib.crc32(section):08x}"}
    position = 0
    names = [*plan.graph.state, *plan.graph.constants]
    for rec, name in zip(records(data), names, strict=True):
        assert rec["name"] == name and set(rec) == {"name", "dtype", "shape", "offset", "nbytes"}
        assert rec["offset"] == -(-position // ALIGN) * ALIGN, name  # in order, each at the next multiple of 64
        assert section[position:rec["offset"]] == bytes(rec["offset"] - position)
        array = plan.state[name] if name in plan.state else plan.graph.constant_data[name]
        assert rec["nbytes"] == array.nbytes
        assert section[rec["offset"]:rec["offset"] + rec["nbytes"]] == np.ascontiguousarray(array).tobytes()
        position = rec["offset"] + rec["nbytes"]
    assert position == len(section)


def test_crc32_and_coalesce():
    rnd = random.Random(3)
    chunks = [os.urandom(rnd.choice([0, 1, 63, 4096, 100_000])) for _ in range(40)]
    assert crc32(chunks) == zlib.crc32(b"".join(chunks)) and crc32([]) == 0
    big = memoryview(bytearray(5000))
    out = list(coalesce([b"a" * 10, b"b" * 20, big, b"c", b"d" * 3000], size=4096))
    assert b"".join(out) == b"a" * 10 + b"b" * 20 + bytes(5000) + b"c" + b"d" * 3000
    assert any(chunk is big for chunk in out)  # a big chunk is written from its own memory
    assert len(out) == 3


# ---- saving ------------------------------------------------------------------------------------------
def _big_plan():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 4))
    x, y = np.ones((2, 1024), np.float32), np.zeros(2, np.int64)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters(), 1e-3))
    step(x, y)
    return step, (x, y)


def test_save_is_a_few_large_writes_of_the_arrays_own_memory(tmp_path, monkeypatch):
    step, _ = _big_plan()  # 12 MiB of state: three 4 MiB arrays and small ones
    state_bytes = sum(a.nbytes for a in step.state.values())
    real_write = os.write
    sizes = []
    monkeypatch.setattr(os, "write", lambda fd, data: sizes.append(len(data)) or real_write(fd, data))
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        step.save(tmp_path / "big.graphc")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    monkeypatch.undo()
    assert sum(sizes) == os.path.getsize(tmp_path / "big.graphc") > state_bytes
    assert len(sizes) <= 6, sizes  # the header and small arrays together, then each big array
    assert peak < state_bytes / 2, f"saving allocated {peak / 2**20:.1f} MiB for {state_bytes / 2**20:.1f} MiB of state"


def test_many_small_tensors_are_one_write(tmp_path, monkeypatch):
    gc.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(50)])
    x = np.ones((2, 8), np.float32)
    step = gc.compile(model, example_inputs=(x, np.zeros(2, np.int64)), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters(), 1e-3))
    real_write = os.write
    calls = []
    monkeypatch.setattr(os, "write", lambda fd, data: calls.append(len(data)) or real_write(fd, data))
    step.save(tmp_path / "small.graphc")
    monkeypatch.undo()
    assert len(step.state) > 300 and len(calls) == 1, calls


def test_saving_while_another_thread_trains_gives_loadable_files(tmp_path):
    """The data section is written from the live arrays: a step must not change them between
    the checksum and the write (save holds the plan's step lock)."""
    plan, _ = trained_file(1)
    batches = make_batches(4)
    stop = threading.Event()
    errors = []

    def train():
        try:
            while not stop.is_set():
                for x, y in batches:
                    plan(x, y)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    worker = threading.Thread(target=train)
    worker.start()
    try:
        for k in range(8):
            plan.save(tmp_path / f"p{k}.graphc")
    finally:
        stop.set()
        worker.join()
    assert not errors, errors
    for k in range(8):
        loaded = gc.load(tmp_path / f"p{k}.graphc")
        assert loaded.step_count >= 1


# ---- loading -----------------------------------------------------------------------------------------
def test_loaded_state_is_writable_aligned_views_of_one_buffer(tmp_path):
    plan, data = trained_file()
    (tmp_path / "p.graphc").write_bytes(data)
    loaded = gc.load(tmp_path / "p.graphc")
    roots = set()
    for name, array in loaded.state.items():
        assert array.flags.writeable and array.flags.c_contiguous, name
        if array.size:
            assert array.ctypes.data % ALIGN == 0, name
            roots.add(id(root(array)))
        np.testing.assert_array_equal(array, plan.state[name], err_msg=name)
    assert len(roots) == 1  # the file's one buffer


def test_training_continues_in_place_on_the_loaded_buffer(tmp_path):
    batches = make_batches(4)
    _, reference = make_training_plan()
    ref_losses = [float(reference(x, y)) for x, y in batches]
    _, step = make_training_plan()
    for x, y in batches[:2]:
        step(x, y)
    step.save(tmp_path / "p.graphc")
    loaded = gc.load(tmp_path / "p.graphc")
    before = {k: v.copy() for k, v in loaded.state.items()}
    assert [float(loaded(x, y)) for x, y in batches[2:]] == ref_losses[2:]
    assert any(not np.array_equal(before[k], v) for k, v in loaded.state.items())
    for name, value in reference.state.items():
        np.testing.assert_array_equal(loaded.state[name], value, err_msg=name)


def test_load_reads_the_file_once_into_one_buffer(tmp_path):
    step, _ = _big_plan()
    step.save(tmp_path / "big.graphc")
    size = os.path.getsize(tmp_path / "big.graphc")
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        loaded = gc.load(tmp_path / "big.graphc")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 1.25 * size, f"loading took {peak / size:.2f}x the file's size"  # 1.2 files: 2x
    for name, value in step.state.items():
        np.testing.assert_array_equal(loaded.state[name], value, err_msg=name)


def test_read_only_bytes_are_copied_once_into_writable_arrays():
    plan, data = trained_file()
    loaded = plan_from_bytes(data)  # bytes: read-only, so the data section is copied
    assert all(a.flags.writeable for a in loaded.state.values())
    x, y = make_batches(1)[0]
    loaded(x, y)
    assert plan_to_bytes(plan) == data  # the file's bytes did not change


def test_read_file_reads_a_pipe(tmp_path):
    _, data = trained_file()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(data))
    writer.start()
    try:
        assert bytes(read_file(str(fifo))) == data
    finally:
        writer.join()


@pytest.mark.parametrize("version", [(1, 0), (1, 1), (1, 2)])
def test_files_without_a_data_section_still_load(version):
    plan, data = trained_file()
    old = legacy_bytes(data, version)
    assert len(old) < len(data) and b"offset" not in old
    loaded = plan_from_bytes(old)
    assert loaded.format_version == version
    for name, value in plan.state.items():
        np.testing.assert_array_equal(loaded.state[name], value, err_msg=name)
    assert plan_to_bytes(loaded) == data  # and re-saves as 1.3


def test_bool_tensors_hold_only_zeros_and_ones():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("mask", gc.tensor(np.array([True, False, True, True])))

        def forward(self, x):
            return gc.where(self.mask, self.lin(x), 0.0)

    gc.manual_seed(0)
    x = np.ones((2, 4), np.float32)
    plan = gc.compile(Masked().eval(), example_inputs=(x,))
    data = plan_to_bytes(plan)
    np.testing.assert_array_equal(plan_from_bytes(data)(x), plan(x))
    mask = next(r for r in records(data) if r["name"] == "mask")
    _, _, section = split_file(data)
    bad = bytearray(section)
    bad[mask["offset"] + 1] = 2
    refuse(rebuild(data, section=bytes(bad)), "mask.* bool but holds bytes other than 0 and 1")
    refuse(legacy_bytes(rebuild(data, section=bytes(bad))), "bool but holds bytes other than 0 and 1")


# ---- hostile data sections ---------------------------------------------------------------------------------
def _set(index, **fields):
    return lambda body: body["tensors"][index].update(fields)


def _shift_last(body):
    body["tensors"][-1]["offset"] += ALIGN


def _hostile_cases(data: bytes) -> dict:
    recs = records(data)
    _, header_end, section = split_file(data)
    first = recs[0]
    assert first["nbytes"] % ALIGN and header_end % ALIGN, "the cases below need padding to corrupt"
    bad_pad = bytearray(section)
    bad_pad[first["nbytes"]] = 1
    flipped = bytearray(section)
    flipped[len(section) // 2] ^= 0x10
    return {
        "offset past the end": (rebuild(data, _set(1, offset=-(-len(section) // ALIGN) * ALIGN)), "runs past the end"),
        "offset far past the end": (rebuild(data, _set(1, offset=2**64 - ALIGN)), "runs past the end"),
        "overlapping": (rebuild(data, _set(1, offset=first["offset"])), "overlaps tensor"),
        "nbytes larger than shape x dtype": (rebuild(data, _set(0, nbytes=first["nbytes"] + 4)), "the record says"),
        "nbytes smaller than shape x dtype": (rebuild(data, _set(0, nbytes=first["nbytes"] - 4)), "the record says"),
        "misaligned": (rebuild(data, _set(1, offset=recs[1]["offset"] + 8)), "not a multiple of 64"),
        "gap": (rebuild(data, _shift_last, section=section + bytes(ALIGN)), "leaving a gap"),
        "bytes after the last tensor": (rebuild(data, section=section + bytes(ALIGN)), "after its last tensor"),
        "negative offset": (rebuild(data, _set(1, offset=-ALIGN)), "non-negative int"),
        "bool offset": (rebuild(data, _set(0, offset=False)), "non-negative int"),
        "float offset": (rebuild(data, _set(0, offset=0.0)), "non-negative int"),
        "offset missing": (rebuild(data, lambda b: b["tensors"][0].pop("offset")), "offset should be"),
        "nbytes missing": (rebuild(data, lambda b: b["tensors"][0].pop("nbytes")), "nbytes should be"),
        "bytes inline instead of an offset": (rebuild(data, lambda b: b["tensors"][0].update(
            data=section[:first["nbytes"]], offset=None)), "has inline 'data' in a file with a data section"),
        # two sources of bytes (issue 29): the same bytes in both places, or different ones; both
        # loaded before, the inline copy silently ignored
        "an offset and the same bytes inline": (rebuild(data, _set(0, data=section[:first["nbytes"]])),
                                                "two sources of bytes are refused"),
        "an offset and other bytes inline": (rebuild(data, _set(0, data=bytes(first["nbytes"]))),
                                             "two sources of bytes are refused"),
        "an offset and an empty inline blob": (rebuild(data, _set(1, data=b"")), "two sources of bytes"),
        "truncated data section": (data[:-1], "truncated file"),
        "data section cut at the header": (data[:len(data) - len(section)], "truncated file"),
        "trailing bytes": (data + b"\x00", "trailing bytes after the data section"),
        "size larger than the file": (rebuild(data, edit_data=lambda h: h["data"].update(size=2**62)), "truncated"),
        "size negative": (rebuild(data, edit_data=lambda h: h["data"].update(size=-1)), "byte count"),
        "size not an int": (rebuild(data, edit_data=lambda h: h["data"].update(size="64")), "byte count"),
        "size missing": (rebuild(data, edit_data=lambda h: h["data"].pop("size")), "byte count"),
        "data not a map": (rebuild(data, edit_data=lambda h: h.update(data=[len(section)])), r"file\.data"),
        "no data section, bytes after the header": (rebuild(data, edit_data=lambda h: h.pop("data")),
                                                    "trailing bytes after the file"),
        "checksum mismatch": (rebuild(data, section=bytes(flipped), fix_crc=False), "data section checksum mismatch"),
        "checksum of another algorithm": (rebuild(data, edit_data=lambda h: h["data"].update(
            checksum="sha256:" + hashlib.sha256(section).hexdigest())), "unsupported data section checksum"),
        "checksum not a string": (rebuild(data, edit_data=lambda h: h["data"].update(checksum=1)), "checksum"),
        "nonzero padding between tensors": (rebuild(data, section=bytes(bad_pad)), "padding before tensor"),
        "nonzero padding after the header": (rebuild(data, gap=lambda n: b"\x01" * (-n % ALIGN)),
                                             "between the header and the data section must be zeros"),
        "unpadded header": (rebuild(data, gap=lambda n: b""), "truncated file"),
    }


def test_hostile_data_sections_are_refused():
    _, data = trained_file()
    for name, (hostile, match) in _hostile_cases(data).items():
        message = str(refuse(hostile, match))
        assert len(message) < 700, name


def test_rebuild_changes_nothing_by_itself():
    _, data = trained_file()
    assert rebuild(data) == data
    plan_from_bytes(data)


def test_random_bit_flips_in_a_1_3_file():
    _, data = trained_file()
    args = make_batches(1)[0]
    rnd = random.Random(20261124)
    header_end = len(data) - len(split_file(data)[2])
    # half in the header (body and data map), half in the data section
    bits = [rnd.randrange(header_end * 8) if k % 2 else rnd.randrange(header_end * 8, len(data) * 8)
            for k in range(300)]
    outcomes = flip_outcomes(data, args, bits)
    assert outcomes.get("refused", 0) > 250, outcomes  # checksums cover the body and the data section


def test_truncated_1_3_file():
    _, data = trained_file()
    for n in sorted(set(np.linspace(0, len(data) - 1, 300).astype(int).tolist())):
        refuse(data[:n])


def test_huge_size_claims_allocate_little():
    _, data = trained_file()
    for size in (2**40, 2**62):
        hostile = rebuild(data, edit_data=lambda h, size=size: h["data"].update(size=size))
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            refuse(hostile, re.escape(f"data section should be {size} bytes"))
            assert tracemalloc.get_traced_memory()[1] - base < 4 * len(data)
        finally:
            tracemalloc.stop()
