"""The ``graphc`` command line: ``inspect`` and ``run`` on plan files, one-line errors with exit
status 2, and the console-script entry point."""
from __future__ import annotations

import collections
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest

import graphc as gc
from conftest import HAVE_TORCH
from graphc import nn, optim
from graphc.executor.serialize import WITH_BODIES, WITHOUT_BODIES

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden-v1.0.graphc"
CONSOLE_SCRIPT = Path(sys.executable).parent / "graphc"
WRITTEN_FORMAT = ".".join(map(str, WITHOUT_BODIES))  # what this graphc writes without bodies (golden: 1.0)
# a training plan's update and activation gradients are fused_elementwise nodes, whose bodies
# are nested graphs: the format that describes those (1.4)
WITH_BODIES_FORMAT = ".".join(map(str, WITH_BODIES))


def graphc(*args, cwd=None, exe=None) -> subprocess.CompletedProcess:
    cmd = [str(exe)] if exe else [sys.executable, "-m", "graphc"]
    return subprocess.run(cmd + [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=60)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("graphc: error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 6)
        self.a = nn.Linear(6, 2)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        h = self.body(x).relu()
        return self.a(h), self.b(h).sigmoid()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An exported CNN, an exported two-output model, a training plan, and inputs."""
    d = tmp_path_factory.mktemp("cli")
    gc.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(64, 3))
    gc.export(cnn, (x,), d / "cnn.graphc")
    np.save(d / "x.npy", x)
    np.save(d / "x7.npy", rng.standard_normal((7, 1, 8, 8)).astype(np.float32))
    np.save(d / "x_wrong_shape.npy", x[:, :, :6, :6].copy())
    np.save(d / "x_f64.npy", x.astype(np.float64))
    gc.export(TwoHeads(), (np.zeros((4, 5), np.float32),), d / "two.graphc")
    np.save(d / "t.npy", rng.standard_normal((4, 5)).astype(np.float32))
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.ReLU(), nn.Linear(10, 3))
    y = rng.integers(0, 3, 5).astype(np.int64)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), 0.1, momentum=0.9))
    step(x, y)
    step(x, y)
    step.save(d / "train.graphc")
    data = (d / "cnn.graphc").read_bytes()
    (d / "truncated.graphc").write_bytes(data[:len(data) // 2])
    (d / "empty.graphc").write_bytes(b"")
    (d / "garbage.npy").write_bytes(b"this is not a numpy file at all")
    (d / "empty.npy").write_bytes(b"")
    good = (d / "x.npy").read_bytes()
    (d / "truncated.npy").write_bytes(good[:len(good) - 40])
    np.save(d / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return d


# ---- inspect -------------------------------------------------------------------------------------
def test_inspect_training_plan(files):
    proc = graphc("inspect", files / "train.graphc")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    plan = gc.load(files / "train.graphc")
    assert "kind: training" in out
    assert f"producer: graphc {gc.__version__}" in out
    assert any(n.op == "fused_elementwise" for n in plan.graph.nodes)
    assert f"format: {WITH_BODIES_FORMAT}" in out
    assert "inputs:  x f32[N,1,8,8], target i64[N]" in out
    assert "outputs: loss f32[], output f32[N,3]" in out
    params = [a for k, a in plan.state_dict().items() if plan.graph.state_roles[k] == "param"]
    count, nbytes = sum(a.size for a in params), sum(a.nbytes for a in params)
    assert count == 64 * 10 + 10 + 10 * 3 + 3
    assert f"parameters: 4 tensors, {count:,} values, {nbytes / 1024:.1f} KiB" in out, out
    assert "training steps so far: 2" in out
    assert "lr=0.1" in out
    histogram = collections.Counter(n.op for n in plan.graph.nodes)
    assert f"nodes: {len(plan.graph.nodes)}" in out
    lines = out.splitlines()
    for op, n in histogram.items():
        assert any(line.split() == [op, str(n)] for line in lines), (op, n)


def test_inspect_golden_file():
    proc = graphc("inspect", GOLDEN)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kind: training" in out and "producer: graphc 0.1.0" in out and "format: 1.0" in out
    assert "inputs:  x f32[N,1,8,8], target i64[N]" in out
    assert "parameters: 6 tensors, 243 values, 972 B" in out
    assert "buffers: 3 tensors, 9 values, 40 B" in out
    assert "training steps so far: 2" in out
    assert "  conv2d " in out and "  max_pool2d_grad " in out
    assert out.startswith(f"file: {GOLDEN}")


def test_inspect_inference_plan(files):
    proc = graphc("inspect", files / "cnn.graphc")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    plan = gc.load(files / "cnn.graphc")
    assert "kind: inference" in out and f"format: {WRITTEN_FORMAT}" in out
    assert f"producer: graphc {gc.__version__}" in out
    assert "inputs:  x f32[N,1,8,8]" in out
    assert "outputs: output f32[N,3]" in out
    histogram = collections.Counter(n.op for n in plan.graph.nodes)
    lines = out.splitlines()
    for op, n in histogram.items():
        assert any(line.split() == [op, str(n)] for line in lines), (op, n)
    assert "training steps" not in out


def test_inspect_inference_plan_shows_weight_count_and_bytes(files):
    """An exported plan's weights are constants (frozen), not state: inspect should still report
    how many weight values the plan holds and their size. Today it prints neither."""
    proc = graphc("inspect", files / "cnn.graphc")
    plan = gc.load(files / "cnn.graphc")
    arrays = [*plan.graph.constant_data.values(), *plan._state.values()]
    count = sum(int(a.size) for a in arrays)
    nbytes = sum(int(a.nbytes) for a in arrays)
    assert count > 200  # conv + linear weights (BN folded in)
    lines = [line for line in proc.stdout.splitlines() if f"{count:,}" in line]
    assert lines, f"no line reports the {count:,} weight values:\n{proc.stdout}"
    assert any(f"{nbytes / 1024:.1f} KiB" in line or f"{nbytes} B" in line for line in lines), lines


def _golden_with_passes(path, passes):
    outer = msgpack.unpackb(GOLDEN.read_bytes(), raw=False)
    body = msgpack.unpackb(outer["body"], raw=False)
    body["graph"]["meta"]["passes"] = passes
    outer["body"] = msgpack.packb(body, use_bin_type=True)
    outer["checksum"] = "sha256:" + hashlib.sha256(outer["body"]).hexdigest()
    path.write_bytes(msgpack.packb(outer, use_bin_type=True))
    return path


def test_inspect_loadable_file_with_odd_meta(tmp_path, capsys):
    """describe_plan reads meta['passes'] entries as dicts with name/nodes_before/nodes_after;
    the loader refuses other shapes, so inspect gives one clear error line, never a traceback."""
    proc = graphc("inspect", _golden_with_passes(tmp_path / "a.graphc", [{"name": "fold_bn"}]))
    assert "Traceback" not in proc.stderr, proc.stderr[-300:]
    if proc.returncode != 0:
        assert_one_line_error(proc)
    from graphc.apps.cli import main

    for k, passes in enumerate(("fold_bn", [1])):  # in-process: an exception here is the traceback
        status = main(["inspect", str(_golden_with_passes(tmp_path / f"{k}.graphc", passes))])
        assert status in (0, 2)
        capsys.readouterr()


# ---- run -----------------------------------------------------------------------------------------
def test_run_writes_the_same_array_as_load(files, tmp_path):
    for name in ("x.npy", "x7.npy"):  # the batch dim is symbolic
        out = tmp_path / f"out_{name}"
        proc = graphc("run", files / "cnn.graphc", "--input", files / name, "--output", out)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        expected = gc.load(files / "cnn.graphc")(np.load(files / name))
        got = np.load(out)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected)
        assert f"wrote {out}" in proc.stdout


def test_run_several_outputs_to_npz(files, tmp_path):
    out = tmp_path / "out.npz"
    proc = graphc("run", files / "two.graphc", "--input", files / "t.npy", "--output", out)
    assert proc.returncode == 0, proc.stderr
    a, b = gc.load(files / "two.graphc")(np.load(files / "t.npy"))
    with np.load(out) as got:
        assert sorted(got.files) == ["output0", "output1"]
        assert np.array_equal(got["output0"], a) and np.array_equal(got["output1"], b)
    proc = graphc("run", files / "two.graphc", "--input", files / "t.npy", "--output", tmp_path / "out.npy")
    assert_one_line_error(proc, ".npz")


def test_run_output_path_is_the_one_reported(files, tmp_path):
    """np.save appends '.npy' to other names: the CLI reports 'wrote out.bin' while the array
    is in out.bin.npy. The file the CLI names must exist (or the name must be refused)."""
    out = tmp_path / "out.bin"
    proc = graphc("run", files / "cnn.graphc", "--input", files / "x.npy", "--output", out)
    if proc.returncode == 2:
        assert_one_line_error(proc)
        return
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}:" in proc.stdout
    assert out.exists(), f"the CLI said it wrote {out.name}, but the folder has {os.listdir(tmp_path)}"


# ---- errors --------------------------------------------------------------------------------------
def test_error_missing_plan_file(files, tmp_path):
    assert_one_line_error(graphc("inspect", tmp_path / "nope.graphc"), "nope.graphc")
    assert_one_line_error(graphc("run", tmp_path / "nope.graphc", "--input", files / "x.npy",
                                 "--output", tmp_path / "o.npy"), "nope.graphc")


def test_error_truncated_or_empty_plan_file(files, tmp_path):
    assert_one_line_error(graphc("inspect", files / "truncated.graphc"), "invalid plan file")
    assert_one_line_error(graphc("inspect", files / "empty.graphc"), "empty.graphc is an empty file (0 bytes)")
    assert_one_line_error(graphc("run", files / "truncated.graphc", "--input", files / "x.npy",
                                 "--output", tmp_path / "o.npy"), "invalid plan file")
    assert not (tmp_path / "o.npy").exists()


def test_error_training_plan_given_to_run(files, tmp_path):
    assert_one_line_error(graphc("run", files / "train.graphc", "--input", files / "x.npy",
                                 "--output", tmp_path / "o.npy"), "training plan")
    assert not (tmp_path / "o.npy").exists()


def test_error_wrong_input_shape_dtype_or_count(files, tmp_path):
    line = assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", files / "x_wrong_shape.npy",
                                        "--output", tmp_path / "o.npy"))
    assert "f32[N,1,8,8]" in line and "f32[5,1,6,6]" in line, line
    assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", files / "x_f64.npy",
                                 "--output", tmp_path / "o.npy"), "f64")
    assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", files / "x.npy", "--input",
                                 files / "x.npy", "--output", tmp_path / "o.npy"), "input")
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("name", ["garbage.npy", "truncated.npy", "object.npy", "missing.npy", "empty.npy"])
def test_error_unreadable_npy(files, tmp_path, name):
    line = assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", files / name,
                                        "--output", tmp_path / "o.npy"))
    assert name in line
    assert not (tmp_path / "o.npy").exists()


def test_error_unwritable_output(files, tmp_path):
    assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", files / "x.npy",
                                 "--output", tmp_path / "no" / "such" / "dir" / "o.npy"))


def test_usage_errors_exit_2(files):
    for args in (("frobnicate",), ("run", files / "cnn.graphc")):  # unknown command, no --input/--output
        proc = graphc(*args)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
        assert "usage: graphc" in proc.stderr


# ---- entry points --------------------------------------------------------------------------------
@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason=f"no console script at {CONSOLE_SCRIPT}")
def test_console_script(files, tmp_path):
    proc = graphc("inspect", files / "cnn.graphc", exe=CONSOLE_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert "kind: inference" in proc.stdout
    out = tmp_path / "o.npy"
    proc = graphc("run", files / "cnn.graphc", "--input", files / "x.npy", "--output", out, exe=CONSOLE_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.load(out), gc.load(files / "cnn.graphc")(np.load(files / "x.npy")))
    assert_one_line_error(graphc("inspect", files / "truncated.graphc", exe=CONSOLE_SCRIPT), "invalid plan file")


def test_main_function_returns_status(files, tmp_path, capsys):
    """``graphc.apps.cli.main`` in-process, for more error cases without a process each."""
    from graphc.apps.cli import main

    assert main(["inspect", str(files / "cnn.graphc")]) == 0
    assert "kind: inference" in capsys.readouterr().out
    for argv in (["inspect", str(files / "truncated.graphc")], ["inspect", str(files / "x.npy")],
                 ["inspect", str(tmp_path)], ["inspect", str(files / "garbage.npy")],
                 ["run", str(files / "two.graphc"), "--input", str(files / "x.npy"), "--output", str(tmp_path / "o.npz")],
                 ["run", str(files / "cnn.graphc"), "--input", str(tmp_path), "--output", str(tmp_path / "o.npy")]):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.err.startswith("graphc: error:") and len(captured.err.strip().splitlines()) == 1, argv
        assert captured.out == ""
    assert os.listdir(tmp_path) == []


# ---- viz -----------------------------------------------------------------------------------------
def test_viz_writes_each_format_and_refuses_unknown_extensions(files, tmp_path):
    for ext in ("svg", "html", "dot", "txt"):
        out = tmp_path / f"graph.{ext}"
        proc = graphc("viz", files / "cnn.graphc", "-o", out)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_size > 0
    proc = graphc("viz", files / "cnn.graphc", "-o", tmp_path / "graph.xyz")
    assert_one_line_error(proc)


# ---- bench ---------------------------------------------------------------------------------------
def test_bench_help_and_a_small_part_run(capsys):
    proc = graphc("bench", "--help")
    assert proc.returncode == 0 and "graphc bench" in proc.stdout
    from graphc.apps import bench

    bench.chain_overhead(1)
    assert "us/node" in capsys.readouterr().out


# ---- messages and option checks -----------------------------------------------
def assert_one_line_error_in_process(capsys, argv, *fragments):
    """``graphc.apps.cli.main(argv)`` returns 2 and prints one ``graphc: error:`` line (an exception
    escaping main is the traceback a user would see)."""
    from graphc.apps.cli import main

    assert main([str(a) for a in argv]) == 2, argv
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphc: error:"), captured.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _refuse_to_run(monkeypatch, module, *names):
    """Option checks must happen before any work: the work itself fails the test."""
    def ran(*args, **kwargs):
        raise AssertionError("the command started working before checking its options")

    for name in names:
        monkeypatch.setattr(module, name, ran)


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--rounds", "0"], ["--steps", "-3"], ["--rounds=-1"],
                                  ["--steps", "two"]])
def test_bench_counts_below_one_are_refused_before_running(argv, monkeypatch, capsys):
    from graphc.apps import bench

    _refuse_to_run(monkeypatch, bench, "train_pair", "infer_pair", "chain_overhead", "compile_time_and_memory")
    option = argv[0].split("=")[0]
    line = assert_one_line_error_in_process(capsys, ["bench", *argv], option, ">= 1")
    assert "StatisticsError" not in line


@pytest.mark.parametrize("value", ["W4", "", "W2,", "W2;W5", "w1,nope"])
def test_bench_only_unknown_parts_are_refused_before_running(value, monkeypatch, capsys):
    from graphc.apps import bench

    _refuse_to_run(monkeypatch, bench, "train_pair", "infer_pair", "chain_overhead", "compile_time_and_memory")
    line = assert_one_line_error_in_process(capsys, ["bench", "--only", value], "--only", "W1, W2, W3, W5, MNV2")
    assert repr(value) in line


def test_bench_only_runs_the_named_parts_in_order(monkeypatch, capsys):
    from graphc.apps import bench

    calls = []
    monkeypatch.setattr(bench, "train_pair", lambda kind, batch, opt: calls.append((kind, batch, opt)) or (0, list, 0))
    monkeypatch.setattr(bench, "ab", lambda name, *args, **kwargs: calls.append(name))
    monkeypatch.setattr(bench, "chain_overhead", lambda steps: calls.append("overhead"))
    monkeypatch.setattr(bench, "print_profile", lambda *args, **kwargs: calls.append("profile"))
    _refuse_to_run(monkeypatch, bench, "infer_pair", "compile_time_and_memory")
    assert bench.main(["--only", "overhead, w5,W2,w5", "--no-profile"]) == 0
    assert calls == ["overhead", ("w5", 32, "sgd"), "W5 train inverted-residual b32 sgd",
                     ("cnn", 64, "sgd"), "W2 train cnn b64 sgd"]
    calls.clear()
    assert bench.main(["--only", "W2"]) == 0  # the profile is on unless --no-profile
    assert calls[-1] == "profile"
    assert "numpy BLAS: " in capsys.readouterr().out


def test_bench_models_have_torch_twins_with_the_same_keys():
    from graphc.apps import bench

    for kind in bench.WORKLOADS:
        model = bench.build(kind)
        names = list(model.state_dict())
        assert names and names == list(bench.build(kind).state_dict())
        if HAVE_TORCH:
            assert list(bench.torch_twin(model, kind).state_dict()) == names


def test_bench_report_lines_never_fail(monkeypatch, capsys):
    from graphc.apps import bench_harness

    assert bench_harness.blas_line().startswith("numpy BLAS: ")
    monkeypatch.setattr(bench_harness.np, "show_config", None)  # what an odd numpy build could do
    monkeypatch.setattr(bench_harness, "_threadpoolctl_blas", lambda: None)
    monkeypatch.setattr(bench_harness.ctypes, "CDLL", None)
    assert bench_harness.blas_line() == "numpy BLAS: unknown"
    monkeypatch.setattr(bench_harness.importlib.util, "find_spec", lambda name: None)
    assert bench_harness.ort_status() == (
        "onnxruntime rows skipped: onnx, onnxruntime not installed (pip install onnx onnxruntime)")
    assert bench_harness.ort_pair(nn.Linear(2, 2), np.zeros((1, 2), np.float32)) is None
    model = nn.Sequential(nn.Linear(4, 3))
    x, y = np.ones((2, 4), np.float32), np.zeros(2, np.int64)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1))
    bench_harness.print_profile(step, x, y, steps=1, limit=3)
    assert " nodes, batch 2" in capsys.readouterr().out


@pytest.mark.parametrize("argv, option, bound", [
    (["--epochs", "0"], "--epochs", ">= 1"), (["--batch-size", "1"], "--batch-size", ">= 2"),
    (["--seed", "-1"], "--seed", ">= 0"), (["--epochs", "ten"], "--epochs", ">= 1")])
def test_demo_bad_numbers_are_refused_before_training(argv, option, bound, monkeypatch, capsys, tmp_path):
    from graphc.apps import demo

    _refuse_to_run(monkeypatch, demo, "train")
    assert_one_line_error_in_process(capsys, ["demo", "--out", tmp_path / "out", *argv], option, bound)


def test_run_text_file_says_what_was_expected(files, tmp_path):
    """np.load reads anything that is not .npy/.npz as a pickle and suggests allow_pickle."""
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes, not an array\n")
    line = assert_one_line_error(graphc("run", files / "cnn.graphc", "--input", notes, "--output", tmp_path / "o.npy"),
                                 str(notes), ".npy", "numpy.save", ".npz")
    assert "pickle" not in line, line


@pytest.mark.parametrize("name", ["garbage.npy", "truncated.npy", "object.npy", "empty.npy"])
def test_run_never_suggests_allow_pickle(files, tmp_path, name, capsys):
    line = assert_one_line_error_in_process(
        capsys, ["run", files / "cnn.graphc", "--input", files / name, "--output", tmp_path / "o.npy"], name)
    assert "allow_pickle" not in line and "pickle.load" not in line, line


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, image, mask):
        return self.proj(image) * mask


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    """A plan with inputs `image` and `mask`, and arrays for them."""
    d = tmp_path_factory.mktemp("npz")
    rng = np.random.default_rng(1)
    image, mask = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
    plan = gc.export(TwoInputs(), (image, mask), d / "two_in.graphc")
    assert plan.input_names == ["image", "mask"]
    return d, image, mask


def test_run_npz_inputs_are_matched_by_name(two_inputs, tmp_path, capsys):
    from graphc.apps.cli import main

    d, image, mask = two_inputs
    expected = gc.load(d / "two_in.graphc")(image, mask)
    np.savez(tmp_path / "in.npz", mask=mask, image=image)  # not in the plan's order: names decide
    assert main(["run", str(d / "two_in.graphc"), "--input", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "o.npy")]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert np.array_equal(np.load(tmp_path / "o.npy"), expected)


@pytest.mark.parametrize("arrays, wrong", [({"image": 0}, "missing mask"),
                                           ({"image": 0, "mask": 1, "bias": 1}, "unexpected bias"),
                                           ({"img": 0, "mask": 1}, "missing image")])
def test_run_npz_with_missing_or_extra_names(two_inputs, tmp_path, capsys, arrays, wrong):
    d, image, mask = two_inputs
    np.savez(tmp_path / "in.npz", **{name: (image, mask)[k] for name, k in arrays.items()})
    line = assert_one_line_error_in_process(
        capsys, ["run", d / "two_in.graphc", "--input", tmp_path / "in.npz", "--output", tmp_path / "o.npy"],
        str(tmp_path / "in.npz"), "image, mask", wrong)
    assert not (tmp_path / "o.npy").exists(), line


def test_run_npz_with_one_array_for_a_one_input_plan(files, tmp_path, capsys):
    """np.savez(path, x) names the array arr_0: for a single-input plan any key will do."""
    from graphc.apps.cli import main

    x = np.load(files / "x.npy")
    for k, arrays in enumerate(({"x": x}, {"arr_0": x}, {"images": x})):
        np.savez(tmp_path / f"in{k}.npz", **arrays)
        out = tmp_path / f"o{k}.npy"
        assert main(["run", str(files / "cnn.graphc"), "--input", str(tmp_path / f"in{k}.npz"),
                     "--output", str(out)]) == 0, capsys.readouterr().err
        assert np.array_equal(np.load(out), gc.load(files / "cnn.graphc")(x))
    capsys.readouterr()
    np.savez(tmp_path / "two.npz", x=x, y=x)  # two arrays for one input: which one is unclear
    assert_one_line_error_in_process(
        capsys, ["run", files / "cnn.graphc", "--input", tmp_path / "two.npz", "--output", tmp_path / "o.npy"],
        "named x", "unexpected y")


def test_run_npz_must_be_the_only_input(two_inputs, tmp_path, capsys):
    d, image, mask = two_inputs
    np.savez(tmp_path / "in.npz", image=image)
    np.save(tmp_path / "mask.npy", mask)
    assert_one_line_error_in_process(
        capsys, ["run", d / "two_in.graphc", "--input", tmp_path / "in.npz", "--input", tmp_path / "mask.npy",
                 "--output", tmp_path / "o.npy"], str(tmp_path / "in.npz"), "only --input")


def test_run_damaged_npz_names_the_file(files, tmp_path, capsys):
    np.savez(tmp_path / "good.npz", x=np.load(files / "x.npy"))
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:len(data) // 2])
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    for name in ("cut.npz", "objects.npz"):
        line = assert_one_line_error_in_process(
            capsys, ["run", files / "cnn.graphc", "--input", tmp_path / name, "--output", tmp_path / "o.npy"],
            str(tmp_path / name))
        assert "allow_pickle" not in line


def test_version():
    proc = graphc("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"graphc {gc.__version__}\n"
    from graphc.ir import _version

    assert gc.__version__ == _version.__version__


def _subcommand_parsers():
    from graphc.apps import bench, demo
    from graphc.apps.cli import build_parser

    top = build_parser()
    [sub] = [a for a in top._actions if a.choices and "run" in a.choices]
    return {"graphc": top, "inspect": sub.choices["inspect"], "run": sub.choices["run"],
            "viz": sub.choices["viz"], "demo": demo.build_parser(), "bench": bench.build_parser()}


@pytest.mark.parametrize("command", ["graphc", "inspect", "run", "viz", "demo", "bench"])
def test_help_describes_every_option(command, capsys):
    from graphc.apps.cli import main

    parser = _subcommand_parsers()[command]
    with pytest.raises(SystemExit) as exit_:
        main(([] if command == "graphc" else [command]) + ["--help"])
    assert exit_.value.code == 0
    squeezed = "".join(capsys.readouterr().out.split())  # help lines wrap anywhere, hyphens included
    for action in parser._actions:
        assert action.help and action.help.strip(), (command, action.dest)
        text = action.help % dict(vars(action), prog=parser.prog)
        assert "".join(text.split()) in squeezed, (command, action.dest, text)
        for option in action.option_strings:
            assert option in squeezed, (command, option)
    if command == "run":
        assert ".npz" in squeezed and "single-input" in squeezed


def test_viz_unwritable_output_names_the_users_path(files, tmp_path, capsys):
    out = tmp_path / "missing" / "dir" / "m.svg"
    line = assert_one_line_error_in_process(capsys, ["viz", files / "cnn.graphc", "-o", out], str(out))
    assert ".tmp" not in line, line
    with pytest.raises(FileNotFoundError) as err:  # the library call names it too, same error type
        gc.viz.write(gc.load(files / "cnn.graphc"), out)
    assert err.value.filename == str(out)


@pytest.mark.parametrize("where", ["under_a_file", "is_a_file"])
def test_demo_unusable_out_fails_before_training(where, tmp_path, monkeypatch, capsys):
    from graphc.apps import demo

    _refuse_to_run(monkeypatch, demo, "train")
    (tmp_path / "notes.txt").write_text("a regular file\n")
    out = tmp_path / "notes.txt" / "demo" if where == "under_a_file" else tmp_path / "notes.txt"
    assert_one_line_error_in_process(capsys, ["demo", "--out", out, "--epochs", "1"], f"--out {out}")


def test_demo_out_check_creates_the_folder_and_leaves_it_empty(tmp_path, monkeypatch, capsys):
    from graphc.apps import demo

    def stop(*args, **kwargs):
        raise gc.GraphcError("stopped after the folder check")

    monkeypatch.setattr(demo, "train", stop)
    out = tmp_path / "a" / "b"
    assert_one_line_error_in_process(capsys, ["demo", "--out", out], "stopped after the folder check")
    assert out.is_dir() and os.listdir(out) == []


@pytest.mark.parametrize("args", [
    ("demo", "--out", "{tmp}/notes.txt/demo", "--epochs", "1"), ("demo", "--epochs", "0"),
    ("demo", "--seed", "-1", "--out", "{tmp}/d"), ("bench", "--steps", "0"),
    ("run", "{files}/cnn.graphc", "--input", "{tmp}/notes.txt", "--output", "{tmp}/o.npy"),
    ("viz", "{files}/cnn.graphc", "-o", "{tmp}/missing/m.svg")])
def test_error_paths_in_a_process_are_one_line(files, tmp_path, args):
    (tmp_path / "notes.txt").write_text("a regular file\n")
    assert_one_line_error(graphc(*[a.format(tmp=tmp_path, files=files) for a in args]))


@pytest.mark.parametrize("args", [("--nope",), ("demo", "--nope"), ("bench", "--nope"), ("viz",)])
def test_usage_errors_of_every_command_exit_2(args):
    proc = graphc(*args)
    assert proc.returncode == 2, (args, proc.stderr)
    assert "Traceback" not in proc.stderr and "usage: graphc" in proc.stderr, proc.stderr
