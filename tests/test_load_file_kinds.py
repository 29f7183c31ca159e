"""Files ``gc.load`` will not read (issue 29, item 4): pickles of every protocol, ``torch.save``'s
zip of pickles and its legacy format, a plain zip, an ``.npz``, an ``.npy``, random bytes, an
empty file, text, and a few other formats people mistake for weights. Each is a
``gc.PlanFormatError`` (exactly that type) naming the file, saying what it looks like and what
graphc reads instead, raised without unpickling anything; from ``graphc inspect``, ``run`` and
``viz`` it is one ``graphc: error:`` line, exit status 2. A path that cannot be read (missing, a
directory) is a PlanFormatError ``cannot read PATH`` with the OSError as its cause.

Before: protocol 2 to 5 pickles and zips were a bare GraphcError, and protocol 0/1 pickles,
random bytes, text, ``.npy`` and empty files reached the plan loader ("the file should be a map").
"""
from __future__ import annotations

import gzip
import io
import marshal
import os
import pickle
import zipfile

import numpy as np
import pytest

import graphc as gc
from graphc.apps.cli import main

READS = "graphc reads plan files (plan.save, gc.export), safetensors state dicts (gc.save) and ONNX models"
PICKLE = "is a pickle (torch.save's legacy format, or pickle.dump)"
NEVER = "graphc never loads pickles, since unpickling can run arbitrary code"


class Payload:
    """Unpickling this creates ``path``: proof that the file was unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.makedirs, (self.path,))


def zip_of(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, weight=np.zeros((2, 3), np.float32))
    return buffer.getvalue()


def npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.arange(4.0))
    return buffer.getvalue()


def torch_zip(marker) -> bytes:
    """torch.save's layout (a zip whose first member is ``<name>/data.pkl``), built without torch."""
    return zip_of({"archive/data.pkl": pickle.dumps(Payload(marker), protocol=2), "archive/byteorder": b"little",
                   "archive/data/0": bytes(16), "archive/version": b"3\n"})


def torch_legacy(marker) -> bytes:
    """torch.save(..., _use_new_zipfile_serialization=False): pickles one after the other, the magic first."""
    return b"".join(pickle.dumps(obj, protocol=2) for obj in (0x1950A86A20F9469CFC6C, 1001, Payload(marker)))


def files(marker) -> dict:
    """name -> (bytes, what the message must say the file is)."""
    out = {f"pickle{p}.pt": (pickle.dumps(Payload(marker), protocol=p), PICKLE) for p in range(6)}
    out.update({f"dict-pickle{p}.pkl": (pickle.dumps({"w": [1.0, 2.0], "step": 3}, protocol=p), PICKLE)
                for p in range(6)})
    out.update({
        "torch.pt": (torch_zip(marker), "is a pickle in a zip archive (torch.save's format)"),
        "torch-legacy.pt": (torch_legacy(marker), PICKLE),
        "plain.zip": (zip_of({"readme.txt": b"hello"}), "is a zip archive (neither torch.save's nor numpy's)"),
        "empty.zip": (zip_of({}), "is a zip archive"),
        "weights.npz": (npz(), "is a numpy .npz archive"),
        "weights.npy": (npy(), "is a numpy .npy array"),
        "random.graphc": (np.random.default_rng(0).bytes(4096), "is bytes in no format graphc knows (it starts 5f 82"),
        "empty.graphc": (b"", "is an empty file (0 bytes)"),
        "notes.txt": ("a text file, café\nwith two lines\n".encode(), "is text"),
        "config.json": (b'{"lr": 0.1, "layers": [1, 2]}', "is text"),
        "model.h5": (b"\x89HDF\r\n\x1a\n" + bytes(64), "is an HDF5 file"),
        "model.pt.gz": (gzip.compress(pickle.dumps({"w": 1}, protocol=2)), "is gzip-compressed data"),
    })
    return out


NAMES = sorted(files("unused"))


def forbidden(*args, **kwargs):
    raise AssertionError("gc.load unpickled or unmarshalled data")


@pytest.fixture
def no_code_from_data(monkeypatch):
    """No unpickling (the payloads would also leave their marker) and no marshal. eval and exec
    are not patched: the first import of a loader module may use them (dataclasses does)."""
    for module, name in [(pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"), (marshal, "loads")]:
        monkeypatch.setattr(module, name, forbidden)


def written(tmp_path, name):
    marker = tmp_path / "unpickled"
    data, says = files(marker)[name]
    path = tmp_path / name
    path.write_bytes(data)
    return path, says, marker


@pytest.mark.parametrize("name", NAMES)
def test_gc_load_refuses_with_what_the_file_looks_like(tmp_path, name, no_code_from_data):
    path, says, marker = written(tmp_path, name)
    with pytest.raises(gc.PlanFormatError) as info:
        gc.load(path)
    message = str(info.value)
    assert type(info.value) is gc.PlanFormatError
    assert message.startswith(f"{path} {says}"), message
    assert READS in message, message
    if says == PICKLE or "pickle" in says:
        assert NEVER in message and "safetensors.torch import save_file" in message, message
    if name.endswith((".npz", ".npy")):
        assert "np.load(path, allow_pickle=False)" in message, message
    assert not marker.exists()


@pytest.mark.parametrize("command", ["inspect", "run", "viz"])
@pytest.mark.parametrize("name", NAMES)
def test_cli_refuses_in_one_line(tmp_path, capsys, command, name):
    path, says, marker = written(tmp_path, name)
    out = tmp_path / "out"
    args = {"inspect": [], "run": ["--input", path, "--output", out], "viz": ["-o", out]}[command]
    assert main([command, str(path), *map(str, args)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"graphc: error: {path} {says}"), err
    assert not out.exists() and not marker.exists()


@pytest.mark.parametrize("command", ["inspect", "run", "viz", "convert"])
def test_cli_commands_that_need_a_graph_refuse_a_state_dict(tmp_path, capsys, command):
    """A safetensors file loads (a dict of arrays), but holds no graph: before, inspect and
    run ended in "unexpected AttributeError ... 'dict' object has no attribute 'graph'"."""
    path = tmp_path / "w.safetensors"
    gc.save({"w": np.zeros(3, np.float32)}, path)
    out = tmp_path / "out.onnx"
    args = {"inspect": [], "run": ["--input", path, "--output", out], "viz": ["-o", out], "convert": [out]}[command]
    assert main([command, str(path), *map(str, args)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"graphc: error: {path} holds tensors (a state dict), not a model; give a plan file "
                   "(plan.save, gc.export) or an ONNX model"]
    assert not out.exists()


def test_a_missing_file_is_a_plan_format_error_with_the_os_error_as_cause(tmp_path, capsys):
    path = tmp_path / "missing.graphc"
    with pytest.raises(gc.PlanFormatError, match=f"^cannot read {path}: No such file or directory$") as info:
        gc.load(path)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert main(["inspect", str(path)]) == 2
    assert capsys.readouterr().err == f"graphc: error: cannot read {path}: No such file or directory\n"


def test_a_directory_is_refused_as_one(tmp_path, capsys):
    with pytest.raises(gc.PlanFormatError, match=f"^cannot read {tmp_path}: it is a directory, not a file") as info:
        gc.load(tmp_path)
    assert isinstance(info.value.__cause__, IsADirectoryError)
    assert main(["viz", str(tmp_path), "-o", str(tmp_path / "o.svg")]) == 2
    assert "it is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("path", [io.BytesIO(b"x"), 3, None])
def test_a_path_that_is_not_a_path_is_a_graphc_error(path):
    with pytest.raises(gc.GraphcError, match="gc.load reads a file path"):
        gc.load(path)


def test_unknown_bytes_named_onnx_go_to_the_onnx_importer(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(np.random.default_rng(1).bytes(256))
    with pytest.raises(gc.PlanFormatError, match="not a valid ONNX model"):
        gc.load(path)


def test_formats_graphc_reads_are_told_from_their_first_bytes():
    from graphc.file_kinds import kind_of

    # a safetensors header of 640 bytes starts 80 02 00...: the bytes of a protocol 2 pickle's
    # PROTO opcode, but a pickle's next byte is an opcode, never 0
    safetensors = (640).to_bytes(8, "little") + b'{"w": ' + b" " * 634
    assert safetensors[:2] == b"\x80\x02" and kind_of(safetensors, b" ") == "safetensors"
    assert kind_of(pickle.dumps({}, protocol=2), b".") == "pickle"
    assert kind_of(b"\x87\xa5magic\xabgraphc-plan", b"\x00") == "plan"
    assert kind_of(b"\x08\x08\x12\x06graphc", b"\x00") == "onnx"
    # text that ends with a full stop is not a pickle unless it starts like one
    assert kind_of(b"The end.", b".") == "text"
    assert kind_of("ü".encode()[:1], b"\xc3") == "text"  # a character cut by the sniffed length


def test_an_empty_file_named_onnx_goes_to_the_onnx_importer(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"")
    with pytest.raises(gc.PlanFormatError, match="model.onnx is not (a valid ONNX|an ONNX) model"):
        gc.load(path)
