"""``verify="numeric"``: every pass of every pipeline checked on real inputs (passes/numeric_check.py).

Every pipeline (inference, training, a traced step function, export, ONNX import) runs with
``verify="numeric"`` on every model family of tests/models (the PyTorch MNIST example,
ResNet, MobileNetV2, GPT) and on the demo's CNN; each pass's record must exist, run in
float64 and stay within its tolerance. Negative controls: passes broken on purpose (relu
turned into sigmoid, a weight nudged by one part in a million, a training graph's forward
changed) are caught, and the error names the pass and the node with its source line. The
record survives ``plan.save`` / ``gc.load`` and ``graphc inspect`` prints it.
"""
from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.apps.cli import main as cli_main
from graphc.apps.describe import describe_plan
from graphc.tracing import trace_model
from graphc.apps.demo import build_model
from graphc.executor.run_node import run_graph_node
from graphc.ir.graph import Node
from graphc.passes import manager
from graphc.passes.freeze import freeze
from graphc.passes.numeric_check import RTOL, Example
from test_pytorch_models import load_model_file, logits_only, own_loss, perturb_norm_stats

BATCH = 2
PIPELINES = ["inference", "training", "step", "export", "import"]
FAMILIES = ["demo", "mnist", "resnet", "mobilenetv2", "gpt"]


# ---- the model families, small ----------------------------------------------------------------
def images(shape, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, *shape)).astype(np.float32), rng.integers(0, 10, BATCH).astype(np.int64)


def tokens(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 32, (BATCH, 8)).astype(np.int64)
    return x, np.roll(x, -1, axis=1)


def family(name: str):
    """``(model in training mode, (x, y), optimizer factory, train_step factory)``; norm layers'
    affine parameters and running statistics perturbed, so that folding BatchNorm does work."""
    gc.manual_seed(0)
    model, batch, make_opt, make_step = _family(name)
    perturb_norm_stats(model, np.random.default_rng(2))
    return model, batch, make_opt, make_step


def _family(name: str):
    if name == "demo":
        model, batch = build_model(), images((1, 8, 8))
        return model, batch, lambda m: optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4), None
    m = load_model_file(name, "graphc")
    if name == "gpt":
        model = m.GPT(m.GPTConfig(dropout=0.1))
        return model, tokens(), lambda mm: mm.configure_optimizers(0.1, 1e-2, (0.9, 0.95)), m.make_train_step
    if name == "mnist":
        return m.Net(), images((1, 28, 28)), lambda mm: m.make_optimizer(mm)[0], m.make_train_step
    model = m.resnet_tiny() if name == "resnet" else m.mobilenet_v2_tiny()
    shape = (3, 16, 16) if name == "resnet" else (3, 32, 32)
    return model, images(shape), m.make_optimizer, m.make_train_step


def demo_step(model, opt):
    criterion = nn.CrossEntropyLoss()

    def train_step(x, y):  # the demo's loop body
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return train_step


def compile_with(name: str, pipeline: str, tmp_path, verify="numeric"):
    """The plan (or graph, for ONNX import) of ``pipeline`` on family ``name``."""
    model, (x, y), make_opt, make_step = family(name)
    if pipeline == "inference":
        return gc.compile(model.eval(), (x,), verify=verify)
    if pipeline == "training":
        if name == "gpt":
            return gc.compile(model, (x, y, y), loss_fn=own_loss, optimizer=make_opt(model), verify=verify)
        return gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=make_opt(model), verify=verify)
    if pipeline == "step":
        opt = make_opt(model)
        step = demo_step(model, opt) if make_step is None else make_step(model, opt)
        return gc.compile(step, (x, y), verify=verify)
    model = logits_only(model.eval()) if name == "gpt" else model.eval()
    if pipeline == "export":
        return gc.export(model, (x,), tmp_path / "m.graphc", verify=verify)
    return imported(model, x, tmp_path, verify)


def imported(model, x, tmp_path, verify):
    """The ``import`` pipeline on the model's ONNX export (gc.load runs it without verify, so
    the test builds the imported graph and runs the pipeline itself). Without the onnx package
    it runs on the traced model frozen into constants: the same kind of graph (no state, the
    weights as constants), without ONNX's MatMul+Add spellings."""
    if importlib.util.find_spec("onnx") is not None:
        from graphc.onnx.importer import ModelReader, read_model

        path = tmp_path / "m.onnx"
        gc.export(model, (x,), path)
        graph = ModelReader(read_model(str(path)), "m.onnx", 1 << 30).to_graph()
    else:
        traced, tracer = trace_model(model, (x,), root=model)
        graph = freeze(traced, tracer.state_arrays)
    return manager.run_pipeline(graph, "import", "default", run_graph_node, verify, example=Example([x], {}))


def graph_of(result):
    return getattr(result, "graph", result)


def assert_within_tolerance(records, passes):
    assert [r["pass"] for r in records] == [p["name"] for p in passes]
    for r in records:
        assert r["dtype"] == "float64", r
        assert r["max_rel"] <= r["rtol"], r
        assert r["outputs"] + r["kept"] > 0, r
        assert r["batch"] == BATCH


# ---- every pipeline on every family ------------------------------------------------------------
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", FAMILIES)
def test_every_pipeline_on_every_family_passes_the_numeric_check(name, pipeline, tmp_path):
    graph = graph_of(compile_with(name, pipeline, tmp_path))
    assert_within_tolerance(graph.meta["verification"], graph.meta["passes"])
    last = graph.meta["verification"][-1]  # updated parameters are new after the optimizer, then compared
    assert last["outputs"] == len(graph.outputs) + len(graph.updates)


def test_verify_true_checks_structure_only_and_other_values_are_refused():
    model, (x, _), _, _ = family("demo")
    assert "verification" not in gc.compile(model.eval(), (x,), verify=True).graph.meta
    for bad in ("yes", "numerics", 1.0, None):
        with pytest.raises(gc.GraphcError, match="verify must be False, True .* or 'numeric'"):
            gc.compile(model.eval(), (x,), verify=bad)
    with pytest.raises(gc.GraphcError, match="needs the example inputs"):
        manager.run_passes(gc.jit.trace(model, x), ["dce"], run_graph_node, verify="numeric")


def test_checking_changes_nothing_in_the_plan():
    """Same seed, same graph text, same first step with and without the check: it runs on
    copies of the state and its own generator."""
    results = []
    for verify in (False, "numeric"):
        model, (x, y), make_opt, _ = family("demo")
        step = gc.compile(demo_step(model, make_opt(model)), (x, y), verify=verify)
        results.append((str(step.graph).split("\n", 1)[1], float(step(x, y)), model.state_dict()["0.weight"].copy()))
    assert results[0][0] == results[1][0] and results[0][1] == results[1][1]
    np.testing.assert_array_equal(results[0][2], results[1][2])


# ---- negative controls: broken passes -----------------------------------------------------------
def relu_to_sigmoid(graph):
    out = graph.copy()
    out.nodes = [Node("sigmoid", n.inputs, n.outputs, {}, n.meta) if n.op == "relu" else n for n in graph.nodes]
    return out


def nudge_a_weight(graph):
    """Scale the first float constant by 1 + 1e-6, keeping its name: far below what any output
    test would notice, a thousand times the float64 tolerance."""
    out = graph.copy()
    name = next(k for k, a in graph.constant_data.items() if a.dtype == np.float32 and a.size > 1)
    out.constant_data[name] = (graph.constant_data[name] * np.float32(1 + 1e-6)).astype(np.float32)
    return out


def demo_graph(x, train=False):
    model, _, _, _ = family("demo")
    graph, tracer = trace_model(model.train(train), (x,))
    return graph, tracer


def test_a_broken_pass_is_caught_and_named_with_the_node():
    _, (x, _), _, _ = family("demo")
    graph, tracer = demo_graph(x)
    names = manager.resolve("default", "inference")
    names.insert(names.index("cse") + 1, "relu_to_sigmoid")
    example = Example([x], tracer.state_arrays)
    with pytest.raises(gc.VerifyError) as err:
        manager.run_passes(graph, names, run_graph_node, "numeric", {"relu_to_sigmoid": relu_to_sigmoid}, example)
    message = str(err.value)
    assert "pass 'relu_to_sigmoid' changed" in message and "sigmoid)" in message, message
    assert "2 (ReLU) at demo.py:" in message, message  # the first ReLU of the demo's Sequential, and its line
    passes = [p["name"] for p in graph.meta.get("passes", [])]
    assert "relu_to_sigmoid" not in passes  # the input graph is untouched


def test_a_weight_nudged_by_one_part_in_a_million_is_caught():
    _, (x, _), _, _ = family("demo")
    graph, tracer = demo_graph(x)
    names = manager.resolve("default", "export")
    names.insert(names.index("freeze") + 1, "nudge")
    extra = {"freeze": functools.partial(freeze, arrays=tracer.state_arrays), "nudge": nudge_a_weight}
    with pytest.raises(gc.VerifyError, match=r"pass 'nudge' changed .* of its scale .*tolerance 1e-09") as err:
        manager.run_passes(graph, names, run_graph_node, "numeric", extra, Example([x], tracer.state_arrays))
    assert "demo.py:" in str(err.value)


def test_a_broken_pass_in_a_training_pipeline_is_caught(monkeypatch):
    """A broken fusion (the first pass) in gc.compile's training pipeline: the forward values
    it keeps differ."""
    table = manager.pass_table
    monkeypatch.setattr(manager, "pass_table", lambda evaluate=None: {**table(evaluate),
                                                                      "fuse_linear_relu": relu_to_sigmoid})
    model, (x, y), make_opt, _ = family("demo")
    with pytest.raises(gc.GraphcError, match="pass 'fuse_linear_relu' changed") as err:
        gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=make_opt(model), verify="numeric")
    assert "(ReLU) at demo.py:" in str(err.value)
    with pytest.raises(gc.GraphcError, match="pass 'fuse_linear_relu' changed"):  # and in a traced step
        gc.compile(demo_step(model, make_opt(model)), (x, y), verify="numeric")


def test_a_graph_that_cannot_run_in_float64_is_checked_in_float32_and_says_so():
    """An evaluator whose relu kernel answers float32 whatever it is given (as an op without a
    float64 kernel would): the check falls back to float32 for that pass and records why."""
    def evaluate(node, arrays, **kw):
        out = run_graph_node(node, arrays, **kw)
        return [a.astype(np.float32) for a in out] if node.op == "relu" else out

    _, (x, _), _, _ = family("demo")
    graph, tracer = demo_graph(x)
    example = Example([x], tracer.state_arrays)
    out = manager.run_passes(graph, ["cse", "fuse_conv_bn"], evaluate, "numeric", example=example)
    cse, fused = out.meta["verification"]
    assert cse["dtype"] == "float32" and "relu kernel returns float32" in cse["note"]
    assert cse["rtol"] > RTOL and cse["max_rel"] <= cse["rtol"]
    assert fused["dtype"] == "float32"


def test_values_are_compared_exactly_for_integers_and_nan_in_place():
    from graphc.passes.numeric_check import difference

    assert difference(np.array([1, 2]), np.array([1, 2])) == 0
    assert difference(np.array([np.inf, 1.0]), np.array([np.inf, 1.25])) == 0.25
    assert difference(np.array([np.nan, 1.0]), np.array([1.0, 1.0])) == np.inf
    assert difference(np.zeros(2), np.zeros(3)) == np.inf


# ---- the record in plan files and in graphc inspect -----------------------------------------------
def test_the_record_survives_save_and_load_and_inspect_prints_it(tmp_path, capsys):
    model, (x, y), make_opt, _ = family("demo")
    step = gc.compile(demo_step(model, make_opt(model)), (x, y), verify="numeric")
    path = tmp_path / "train.graphc"
    step.save(path)
    loaded = gc.load(path)
    assert loaded.graph.meta["verification"] == step.graph.meta["verification"]
    assert cli_main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert 'numeric verification (verify="numeric", batch 2): every pass within tolerance' in text
    for record in step.graph.meta["verification"]:
        assert f"  {record['pass']:<20}  float64" in text
    assert "numeric verification" not in describe_plan(gc.compile(model.eval(), (x,)))
    nothing = gc.compile(model.eval(), (x,), passes="none", verify="numeric")
    assert nothing.graph.meta["verification"] == []
    assert 'numeric verification (verify="numeric"): no passes ran' in describe_plan(nothing)


def test_a_hand_edited_record_is_refused_or_printed_safely(tmp_path):
    from graphc.executor.plan_format import check_meta

    with pytest.raises(gc.PlanFormatError, match="graph.meta.verification"):
        check_meta({"verification": [{"pass": 3}]})
    with pytest.raises(gc.PlanFormatError, match="graph.meta.verification"):
        check_meta({"verification": "all fine"})
    model, (x, _), _, _ = family("demo")
    plan = gc.compile(model.eval(), (x,))
    plan.graph.meta["verification"] = [{"pass": "cse", "max_abs": [1], "worst": {"a": 1}}]
    assert "  cse                   ?" in describe_plan(plan)


def test_collective_ops_are_checked_as_in_one_process():
    """SyncBatchNorm's allreduce runs as the identity (one process): the check never talks to
    other processes, and the training step is still checked in float64."""
    gc.manual_seed(0)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                                                                  nn.Flatten(), nn.Linear(4 * 6 * 6, 10)))
    x, y = images((1, 8, 8))
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                      verify="numeric")
    assert any(n.op == "allreduce" for n in step.graph.nodes)
    assert_within_tolerance(step.graph.meta["verification"], step.graph.meta["passes"])


def _cuda_missing() -> str:
    from graphc.executor.backends import get_backend

    try:
        get_backend("cuda")
    except gc.DeviceError as e:
        return str(e)
    return ""


@pytest.mark.gpu
@pytest.mark.skipif(bool(_cuda_missing()), reason=f"GPU test: {_cuda_missing()}")
def test_a_gpu_plan_is_checked_on_host_copies():
    """The model's arrays live on the GPU; the check runs on host copies and the plan on cupy."""
    model, (x, y), make_opt, _ = family("demo")
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=make_opt(model), device="cuda",
                      verify="numeric")
    assert_within_tolerance(step.graph.meta["verification"], step.graph.meta["passes"])
    assert step.device.startswith("cuda") and np.isfinite(float(step.backend.to_numpy(step(x, y))))


def test_the_demo_prints_its_training_steps_report_and_saves_it(tmp_path, capsys):
    """``graphc demo --verify``: the report the issue asks the notes to show, printed by the demo
    and kept in its saved training plan for ``graphc inspect``."""
    assert cli_main(["demo", "--epochs", "1", "--verify", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert 'numeric verification (verify="numeric", batch 64): every pass within tolerance' in printed
    for name in ("autodiff", "inline_calls", "cse", "dce"):
        assert f"  {name} " in printed
    assert cli_main(["inspect", str(tmp_path / "train.graphc")]) == 0
    assert "every pass within tolerance" in capsys.readouterr().out
