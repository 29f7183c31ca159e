"""ONNX external data (issue 29 item 2): weights kept beside the model in ``model.onnx.data``.

A real ``torch.onnx.export`` file (torch's default exporter writes every weight over a few
hundred bytes to ``model.onnx.data``) loads through ``gc.load`` and ``graphc
inspect/convert/viz`` and matches torch. Hand-built files (onnx only) hold the hostile cases:
absolute, ``..`` and symlink-escaping locations, offsets and lengths past the end, lengths
that disagree with the shape, missing and non-regular data files, bad keys and numbers, and
data over the memory budget. Each is a PlanFormatError naming the tensor.
"""
from __future__ import annotations

import builtins
import io
import os

import numpy as np
import pytest

import graphc as gc
from graphc.apps.cli import main

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT


# ---- a real torch export ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch_export(tmp_path_factory):
    """(folder, torch model, example input): ``torch.onnx.export(model, (x,), "model.onnx")``."""
    torch = pytest.importorskip("torch")  # torch's default (dynamo) exporter also needs the onnxscript package
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 5)).eval()
    x = torch.randn(2, 1, 6, 6)
    folder = tmp_path_factory.mktemp("torch_export")
    torch.onnx.export(model, (x,), str(folder / "model.onnx"))
    return folder, model, x


def test_torch_default_export_writes_external_data_and_loads(torch_export):
    folder, model, x = torch_export
    data = folder / "model.onnx.data"
    assert data.exists() and data.stat().st_size >= 4 * 4 * 6 * 6 * 5  # the Linear weight lies there
    plan = gc.load(str(folder / "model.onnx"))
    expected = model(x).detach().numpy()
    # float32 conv + matmul in a different summation order than torch's: a few ulps of the sums
    np.testing.assert_allclose(np.asarray(plan(x.numpy())), expected, rtol=1e-5, atol=1e-5)


def test_torch_export_through_the_cli(torch_export, tmp_path, capsys):
    folder, model, x = torch_export
    source = str(folder / "model.onnx")
    assert main(["inspect", source]) == 0
    assert "ONNX opset" in capsys.readouterr().out
    assert main(["convert", source, str(tmp_path / "m.graphc")]) == 0
    expected = model(x).detach().numpy()
    np.testing.assert_allclose(np.asarray(gc.load(str(tmp_path / "m.graphc"))(x.numpy())), expected,
                               rtol=1e-5, atol=1e-5)  # as above: summation order only
    assert main(["viz", source, "-o", str(tmp_path / "m.html")]) == 0
    assert (tmp_path / "m.html").stat().st_size > 0


# ---- hand-built files ---------------------------------------------------------------------------
WEIGHT = np.arange(4, dtype=np.float32) - 1.5


def external(name="w", location="w.bin", offset=None, length=None, values=WEIGHT, **extra):
    """An initializer whose data is at ``location`` (entries as onnx writes them)."""
    tensor = numpy_helper.from_array(values, name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length, **extra}
    for key, value in entries.items():
        if value is not None:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
    return tensor


def save(folder, tensor, nodes=None, inits=None):
    folder.mkdir(parents=True, exist_ok=True)
    nodes = nodes or [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", FLOAT, None)],
                              initializer=[tensor] if inits is None else inits)
    path = folder / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return str(path)


def refused(path, match, **kwargs) -> str:
    with pytest.raises(gc.PlanFormatError, match=match) as info:
        gc.load(path, **kwargs)
    return str(info.value)


def test_external_data_in_the_model_folder_is_read_at_its_offset(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\xff" * 8 + WEIGHT.tobytes() + b"\xee" * 3)
    path = save(tmp_path, external(offset=8, length=16))
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(np.asarray(gc.load(path)(x)), x + WEIGHT)


def test_external_data_in_a_subfolder_and_without_a_length_is_read(tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "w.bin").write_bytes(WEIGHT.tobytes())
    path = save(tmp_path, external(location="weights/w.bin"))
    np.testing.assert_array_equal(np.asarray(gc.load(path)(np.zeros((1, 4), np.float32))), WEIGHT[None])


def test_external_data_in_a_constant_node_is_read(tmp_path):
    (tmp_path / "c.bin").write_bytes(WEIGHT.tobytes())
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=external("cv", "c.bin")),
             helper.make_node("Mul", ["x", "c"], ["y"], name="mul")]
    path = save(tmp_path, None, nodes=nodes, inits=[])
    np.testing.assert_array_equal(np.asarray(gc.load(path)(np.full((1, 4), 2, np.float32))), 2 * WEIGHT[None])


def test_int64_and_bool_external_data_keep_their_dtype(tmp_path):
    (tmp_path / "s.bin").write_bytes(np.array([-1, 2], "<i8").tobytes())
    shape = external("s", "s.bin", values=np.array([-1, 2], np.int64))
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")]
    path = save(tmp_path, shape, nodes=nodes)
    assert np.asarray(gc.load(path)(np.zeros((3, 4), np.float32))).shape == (6, 2)


def test_a_parent_path_is_refused_and_nothing_but_the_model_is_opened(tmp_path, monkeypatch):
    (tmp_path / "secret.bin").write_bytes(WEIGHT.tobytes())  # a naive loader reads it
    path = save(tmp_path / "models", external("w_secret", "../secret.bin"))
    opened, real_open, real_os_open = [], builtins.open, os.open

    def recording_open(file, *args, **kwargs):
        opened.append(os.path.realpath(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else file)
        return real_open(file, *args, **kwargs)

    def recording_os_open(file, *args, **kwargs):
        opened.append(os.path.realpath(os.fspath(file)))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)
    monkeypatch.setattr(os, "open", recording_os_open)
    refused(path, r"m\.onnx: initializer 'w_secret' keeps its data in '\.\./secret\.bin', a path with '\.\.'")
    # the budget reads the process's limits (/proc, /sys/fs/cgroup); of the user's files, only the model
    ours = {p for p in opened if isinstance(p, str) and p.startswith(os.path.realpath(tmp_path))}
    assert ours == {os.path.realpath(path)}


@pytest.mark.parametrize("location", ["sub/../../secret.bin", "sub\\..\\..\\secret.bin", "./../secret.bin"])
def test_every_parent_component_is_refused(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(WEIGHT.tobytes())
    refused(save(tmp_path / "models", external(location=location)), r"initializer 'w' .* a path with '\.\.'")


def test_an_absolute_path_is_refused_even_inside_the_folder(tmp_path):
    (tmp_path / "w.bin").write_bytes(WEIGHT.tobytes())
    location = str(tmp_path / "w.bin")
    refused(save(tmp_path, external(location=location)), r"initializer 'w' keeps its data in .*, an absolute path")


def test_a_symlink_escaping_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(WEIGHT.tobytes())
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.bin").symlink_to(tmp_path / "secret.bin")
    refused(save(tmp_path / "models", external()), r"initializer 'w' keeps its data in 'w\.bin', which resolves "
                                                     r"outside the model's folder")


def test_a_symlinked_directory_escaping_the_folder_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "w.bin").write_bytes(WEIGHT.tobytes())
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "data").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    refused(save(tmp_path / "models", external(location="data/w.bin")), r"resolves outside the model's folder")


def test_a_symlink_inside_the_folder_is_followed(tmp_path):
    (tmp_path / "real.bin").write_bytes(WEIGHT.tobytes())
    (tmp_path / "w.bin").symlink_to(tmp_path / "real.bin")
    np.testing.assert_array_equal(np.asarray(gc.load(save(tmp_path, external()))(np.zeros((1, 4), np.float32))),
                                  WEIGHT[None])


def test_the_folder_itself_is_refused(tmp_path):
    refused(save(tmp_path, external(location=".")), r"initializer 'w' keeps its data in '\.'")


@pytest.mark.parametrize("offset, length, match", [
    (8, 16, r"at offset 8, length 16, past the end of that 16-byte file"),
    (0, 32, r"declares shape \[4\] \(16 bytes of float32\) but its external data is 32 bytes long"),
    (0, 8, r"declares shape \[4\] \(16 bytes of float32\) but its external data is 8 bytes long"),
    (2**62, 16, r"at offset 4611686018427387904, length 16, past the end"),
    ("-4", 16, r"external data offset '-4', not a whole number of bytes"),
    (0, "1e3", r"external data length '1e3', not a whole number of bytes"),
    ("9" * 40, 16, r"external data offset '9999.*', not a whole number of bytes"),
])
def test_offsets_and_lengths_are_checked_before_reading(tmp_path, offset, length, match):
    (tmp_path / "w.bin").write_bytes(WEIGHT.tobytes())
    refused(save(tmp_path, external(offset=offset, length=length)), r"m\.onnx: initializer 'w' .*" + match)


def test_a_huge_declared_shape_is_refused_against_its_length(tmp_path):
    (tmp_path / "w.bin").write_bytes(WEIGHT.tobytes())
    tensor = external(length=16)
    tensor.ClearField("dims")
    tensor.dims.extend([2**40, 2**40])
    refused(save(tmp_path, tensor), r"declares shape \[1099511627776, 1099511627776\] \(4835703278458516698824704 "
                                    r"bytes of float32\) but its external data is 16 bytes long")


def test_data_over_the_memory_budget_is_refused_before_it_is_read(tmp_path):
    big = np.zeros(4096, np.float32)
    (tmp_path / "w.bin").write_bytes(big.tobytes())
    nodes = [helper.make_node("ReduceSum", ["w"], ["y"], name="sum")]
    path = save(tmp_path, external(values=big), nodes=nodes)
    refused(path, r"initializer 'w' needs 16384 bytes of external data, .* over the memory budget of 10000 bytes",
            memory_budget=10_000)


def test_a_missing_data_file_is_refused_naming_the_tensor(tmp_path):
    refused(save(tmp_path, external("w_missing", "gone.bin")),
            r"initializer 'w_missing' keeps its data in 'gone\.bin', which cannot be opened \(No such file")


def test_a_directory_or_fifo_as_the_data_file_is_refused(tmp_path):
    (tmp_path / "dir.bin").mkdir()
    # O_RDONLY on a directory opens on Linux (then fstat says it is no file) and fails elsewhere
    refused(save(tmp_path, external(location="dir.bin")),
            r"keeps its data in 'dir\.bin', which (is not a regular file|cannot be opened)")
    os.mkfifo(tmp_path / "fifo.bin")  # opening it for reading would wait for a writer forever
    refused(save(tmp_path, external(location="fifo.bin")), r"keeps its data in 'fifo\.bin', which is not a regular")


@pytest.mark.parametrize("change, match", [
    ({"basepath": "/etc"}, r"has the external data key 'basepath'; graphc knows location, offset, length"),
    ({"location": ""}, r"is marked as external data but names no location"),
    ({"location": "w\0.bin"}, r"keeps its data in .*, a location with a NUL character"),
])
def test_bad_external_data_entries_are_refused(tmp_path, change, match):
    (tmp_path / "w.bin").write_bytes(WEIGHT.tobytes())
    refused(save(tmp_path, external(**change)), r"initializer 'w' " + match)


def test_a_duplicate_key_is_refused(tmp_path):
    tensor = external()
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    refused(save(tmp_path, tensor), r"initializer 'w' has the external data key 'location' twice")


def test_inline_data_marked_external_is_refused(tmp_path):
    tensor = external()
    tensor.raw_data = WEIGHT.tobytes()
    refused(save(tmp_path, tensor), r"initializer 'w' is marked as external data but also holds data inline")


def test_external_entries_on_an_inline_tensor_are_refused(tmp_path):
    tensor = numpy_helper.from_array(WEIGHT, "w")
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    refused(save(tmp_path, tensor), r"initializer 'w' has external data entries but is not marked as external")


def test_a_100kb_location_keeps_the_message_short(tmp_path):
    message = refused(save(tmp_path, external(location="../" + "A" * 100_000)), r"a path with '\.\.'")
    assert len(message) < 1000
