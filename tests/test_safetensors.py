"""``gc.save`` / ``gc.load`` for state dicts: safetensors files in both directions with
PyTorch (torch's ``safetensors.torch.save_file`` output loads; the bytes are recorded, so this
runs without torch too), round trips of every dtype, the format told by the header bytes (plans
still load), pickles refused with the way to convert them, and hostile files that raise a
``GraphcError`` and nothing else.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import struct
import sys

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

ARRAYS = {
    "f32": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
    "f64": np.linspace(-1, 1, 5),
    "i64": np.arange(-3, 3, dtype=np.int64).reshape(2, 3),
    "b1": np.array([True, False, True]),
    "u8": np.arange(250, 256, dtype=np.uint8),
    "f16": np.array([0.5, -2.0], np.float16),
    "scalar": np.array(3.5, np.float32),
    "empty": np.zeros((0, 4), np.float32),
}


def write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_every_dtype_round_trips(tmp_path):
    path = tmp_path / "w.safetensors"
    gc.save({**ARRAYS, "tensor": gc.tensor([1.0, 2.0]), "param": nn.Parameter(np.ones(2, np.float32))}, path)
    loaded = gc.load(path)
    assert sorted(loaded) == sorted([*ARRAYS, "tensor", "param"])
    for key, want in ARRAYS.items():
        got = loaded[key]
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, key
        np.testing.assert_array_equal(got, want)
        assert got.flags.writeable
    assert loaded["tensor"].tolist() == [1.0, 2.0] and loaded["param"].tolist() == [1.0, 1.0]
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"], "no temporary file is left behind"


def test_model_state_dict_round_trip_into_a_compiled_model(tmp_path):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(16, 3)).eval()
    x = np.random.default_rng(1).standard_normal((2, 1, 4, 4)).astype(np.float32)
    want = gc.compile(model, (x,))(x)
    gc.save(model.state_dict(), tmp_path / "model.pt")  # safetensors whatever the name
    gc.manual_seed(1)
    other = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(16, 3)).eval()
    other.load_state_dict(gc.load(tmp_path / "model.pt", map_location="cpu", weights_only=True))
    np.testing.assert_array_equal(gc.compile(other, (x,))(x), want)


def torch_files(torch_ref, sd_inputs, tmp_path):
    """torch's safetensors file, its torch.save files (zip and legacy) and its forward, as bytes."""
    def compute():
        from safetensors.torch import save_file

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
        save_file(model.state_dict(), tmp_path / "from_torch.safetensors")
        zipped, legacy = io.BytesIO(), io.BytesIO()
        torch.save(model.state_dict(), zipped)
        torch.save(model.state_dict(), legacy, _use_new_zipfile_serialization=False)
        out = model(torch.from_numpy(sd_inputs["x"]))
        as_u8 = lambda data: np.frombuffer(data, np.uint8)  # noqa: E731
        return {"safetensors": as_u8((tmp_path / "from_torch.safetensors").read_bytes()),
                "zip": as_u8(zipped.getvalue()), "legacy": as_u8(legacy.getvalue()), "out": out}
    return torch_ref(sd_inputs, compute)


X = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)


def test_pytorch_safetensors_files_load(tmp_path, torch_ref):
    ref = torch_files(torch_ref, {"x": X}, tmp_path)
    sd = gc.load(write(tmp_path / "torch.safetensors", ref["safetensors"].tobytes()))
    assert sorted(sd) == ["0.bias", "0.weight", "2.bias", "2.weight"] and sd["0.weight"].shape == (3, 4)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    model.load_state_dict(sd)
    np.testing.assert_allclose(model(gc.tensor(X)).numpy(), ref["out"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gc.compile(model.eval(), (X,))(X), ref["out"], rtol=1e-6, atol=1e-7)


def test_graphc_files_load_in_pytorch(tmp_path, torch_ref):
    gc.save(ARRAYS, tmp_path / "w.safetensors")

    def compute():
        from safetensors.torch import load_file

        return load_file(tmp_path / "w.safetensors")

    loaded = torch_ref({"arrays": ARRAYS}, compute)
    for key, want in ARRAYS.items():
        assert loaded[key].dtype == want.dtype and loaded[key].shape == want.shape, key
        np.testing.assert_array_equal(loaded[key], want)


@pytest.mark.parametrize("kind", ["zip", "legacy"])
def test_torch_save_files_are_refused_with_the_conversion(tmp_path, torch_ref, kind):
    ref = torch_files(torch_ref, {"x": X}, tmp_path)
    path = write(tmp_path / "model.pt", ref[kind].tobytes())
    with pytest.raises(gc.GraphcError, match=r"model.pt is a pickle.*never loads pickles.*safetensors.torch"):
        gc.load(path)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickles_are_never_loaded(tmp_path, protocol):
    class Boom:
        def __reduce__(self):
            return (os.system, ("echo graphc unpickled this >&2",))

    path = write(tmp_path / "evil.pkl", pickle.dumps(Boom(), protocol=protocol))
    with pytest.raises(gc.GraphcError, match="never loads pickles"):
        gc.load(path)


def test_plans_still_load_by_their_header(tmp_path):
    path = tmp_path / "plan.safetensors"  # the name does not decide: the first bytes do
    gc.export(nn.Linear(4, 2), (np.zeros((8, 4), np.float32),), path)
    plan = gc.load(path, device="cpu", memory_budget=1 << 30)
    assert isinstance(plan, gc.Plan) and plan.memory_budget == 1 << 30 and plan(X).shape == (5, 2)


# ---- hostile and damaged files -------------------------------------------------------------------
def valid_bytes() -> bytes:
    from safetensors.numpy import save

    return save({"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, np.int64)})


def header_file(header, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


HOSTILE = {
    "truncated_data": lambda: valid_bytes()[:-4],
    "truncated_header": lambda: valid_bytes()[:20],
    "header_longer_than_file": lambda: struct.pack("<Q", 10_000) + b'{"w": 1}',
    "huge_header_length": lambda: struct.pack("<Q", 2 ** 63) + b"{" + b" " * 16,
    "header_not_json": lambda: struct.pack("<Q", 6) + b"{nope}",
    "header_not_object": lambda: b"\x02\x00\x00\x00\x00\x00\x00\x00{]",
    "offsets_out_of_range": lambda: header_file({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}},
                                                b"\x00" * 8),
    "shape_disagrees_with_bytes": lambda: header_file({"w": {"dtype": "F32", "shape": [4, 4],
                                                             "data_offsets": [0, 8]}}, b"\x00" * 8),
    "unknown_dtype": lambda: header_file({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}, b"\x00"),
    "bfloat16": lambda: header_file({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}, b"\x00" * 4),
    "tiny": lambda: b"\x01\x02",
    "empty": lambda: b"",
    "npz": lambda: _npz_bytes(),
}


def _npz_bytes() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=np.zeros(2))
    return buffer.getvalue()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_raise_graphc_errors(tmp_path, name):
    path = write(tmp_path / "w.safetensors", HOSTILE[name]())
    with pytest.raises(gc.GraphcError) as info:
        gc.load(path)
    message = str(info.value)
    if name == "bfloat16":
        assert "bfloat16" in message and ".float()" in message
    if name == "npz":
        assert "allow_pickle=False" in message
    if name.startswith(("truncated", "header_longer")):
        assert "not a valid safetensors file" in message


def test_damaged_bytes_load_or_raise_graphc_errors(tmp_path):
    good, rng = valid_bytes(), np.random.default_rng(0)
    path = tmp_path / "w.safetensors"
    for _ in range(300):
        data = bytearray(good)
        for i in rng.integers(0, len(data), rng.integers(1, 4)):
            data[i] = int(rng.integers(0, 256))
        write(path, bytes(data))
        try:
            loaded = gc.load(path)
        except gc.GraphcError:
            continue
        assert isinstance(loaded, (dict, gc.Plan))


# ---- what gc.save refuses -----------------------------------------------------------------------
@pytest.mark.parametrize("obj, match", [
    (nn.Linear(2, 2), "save model.state_dict()"),
    ({"opt": {"lr": np.zeros(1)}}, "named arrays only"),
    ({"epoch": 3}, "named arrays only"),
    ({1: np.zeros(2)}, "keys must be strings"),
    ({"o": np.array([object()])}, "numeric array"),
    ([np.zeros(2)], "dict of name -> tensor"),
])
def test_save_refuses_what_safetensors_cannot_hold(tmp_path, obj, match):
    with pytest.raises(gc.GraphcError, match=match):
        gc.save(obj, tmp_path / "w.safetensors")
    assert not list(tmp_path.iterdir())


def test_save_refuses_plans_and_bad_paths(tmp_path):
    plan = gc.compile(nn.Linear(2, 2).eval(), (np.zeros((1, 2), np.float32),))
    with pytest.raises(gc.GraphcError, match=r"plan.save\(path\)"):
        gc.save(plan, tmp_path / "w.safetensors")
    with pytest.raises(gc.GraphcError, match="cannot write .*missing"):
        gc.save({"a": np.zeros(1)}, tmp_path / "missing" / "w.safetensors")
    with pytest.raises(gc.GraphcError, match="file path"):
        gc.save({"a": np.zeros(1)}, io.BytesIO())


def test_without_the_safetensors_package_the_error_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "w.safetensors"
    gc.save({"a": np.zeros(1)}, path)
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    for call in (lambda: gc.save({"a": np.zeros(1)}, path), lambda: gc.load(path)):
        with pytest.raises(gc.GraphcError, match=r"pip install 'graphc\[safetensors\]'"):
            call()
