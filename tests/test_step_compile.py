"""``gc.compile(train_step, example_inputs)``: a user's whole training step traced into one plan.

The same ``train_step`` runs eagerly (``loss.backward()``, ``optimizer.step()`` on ``.grad``)
and compiled; the two agree to float32 rounding. Also: gradient accumulation, train/eval
inside the traced function, a forward-only evaluation function, resuming a saved step in a
fresh process bit for bit, and the errors a traced step gives.

Tolerances: eager and compiled graphc run the same kernels, but a compiled plan fuses
linear+ReLU and conv+BN (one GEMM epilogue, one BN pass) and may sum gradients in another
order, so values agree to float32 rounding accumulated over a few steps (rtol 1e-5, atol 1e-6),
not bit for bit. A saved and reloaded plan runs the very same kernels: bit for bit.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

RTOL, ATOL = 1e-5, 1e-6  # float32 rounding of differently fused/ordered sums (module docstring)


def batches(count, batch=8, features=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, features)).astype(np.float32), rng.integers(0, classes, batch))
            for _ in range(count)]


def mlp(seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def make_step(model, opt, criterion, clip=None):
    def train_step(x, y):
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return train_step


def state_of(model):
    return {k: np.array(v) for k, v in model.state_dict().items()}


def assert_states_close(a, b, rtol=RTOL, atol=ATOL):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("opt_kind", ["sgd", "adam"])
@pytest.mark.parametrize("clip", [None, 0.05])
def test_compiled_step_matches_the_same_function_run_eagerly(opt_kind, clip):
    data = batches(4)
    runs = []
    for compiled in (False, True):
        model = mlp()
        opt = (optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if opt_kind == "sgd"
               else optim.Adam(model.parameters(), lr=1e-2))
        step = make_step(model, opt, nn.CrossEntropyLoss(), clip)
        if compiled:
            step = gc.compile(step, example_inputs=data[0])
        losses = [float(np.asarray(step(gc.tensor(x) if not compiled else x, gc.tensor(y) if not compiled else y)))
                  for x, y in data]
        runs.append((losses, state_of(model), opt.state_dict()["state"]))
    (eager_losses, eager_state, eager_opt), (plan_losses, plan_state, plan_opt) = runs
    np.testing.assert_allclose(plan_losses, eager_losses, rtol=RTOL)
    assert_states_close(plan_state, eager_state)
    assert eager_opt.keys() == plan_opt.keys()
    for i in eager_opt:
        assert eager_opt[i].keys() == plan_opt[i].keys()
        for slot in eager_opt[i]:
            np.testing.assert_allclose(plan_opt[i][slot], eager_opt[i][slot], rtol=RTOL, atol=ATOL)


def test_compiled_step_plan_has_one_graph_with_forward_backward_update_and_guard():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = gc.compile(make_step(model, opt, nn.CrossEntropyLoss()), example_inputs=batches(1)[0])
    phases = {n.meta.get("phase", "forward") for n in step.graph.nodes}
    assert {"forward", "backward", "update", "check"} <= phases
    assert step.kind == "training" and step.input_names == ["x", "y"]
    assert [n.op for n in step.graph.nodes].count("linear_relu") == 1  # forward fused before autodiff
    assert not any(v.name.startswith("grad.") for v in step.graph.inputs)  # every placeholder filled
    assert opt.state_dict()["state"] == {i: {"step": 0.0} for i in range(4)}  # SGD without momentum: only step


def accumulate_step(model, opt):
    def train_step(*micro_batches):  # (x0, y0, x1, y1, ...): one loader batch per micro-step, as nanoGPT
        opt.zero_grad()
        count = len(micro_batches) // 2
        for i in range(count):
            x, y = micro_batches[2 * i], micro_batches[2 * i + 1]
            loss = nn.functional.cross_entropy(model(x), y) / count
            loss.backward()  # gradients add up across the calls
        opt.step()
        return loss
    return train_step


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_gradient_accumulation_over_4_micro_batches_equals_one_big_batch(compiled):
    (x, y), = batches(1, batch=32)
    micro = [a for i in range(4) for a in (x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8])]
    states = []
    for inputs, build in ((micro, accumulate_step), ((x, y), lambda m, o: make_step(m, o, nn.CrossEntropyLoss()))):
        model = mlp()
        opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        step = build(model, opt)
        if compiled:
            step = gc.compile(step, example_inputs=inputs)
        for _ in range(3):
            step(*(inputs if compiled else [gc.tensor(a) for a in inputs]))
        states.append(state_of(model))
    assert_states_close(states[0], states[1])  # the mean of 4 quarter-batch means is the batch mean


def test_accumulated_gradients_add_up_in_the_traced_graph():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    micro = [a for x, y in batches(4) for a in (x, y)]
    step = gc.compile(accumulate_step(model, opt), example_inputs=micro)
    assert step.graph.meta["passes"][3]["name"] == "autodiff"
    guard = next(n for n in step.graph.nodes if n.op == "assert_finite")
    assert guard.attrs["names"][:4] == ("the loss", "the loss of backward() call 2", "the loss of backward() call 3",
                                        "the loss of backward() call 4")


def bn_net():
    gc.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))


def test_train_and_eval_calls_inside_the_traced_function_take_effect_at_trace_time():
    model = bn_net()

    def in_eval(x):
        model.eval()
        return model(x)

    def in_train(x):
        model.train()
        return model(x)

    x = batches(1)[0][0]
    eval_plan, train_plan = gc.compile(in_eval, example_inputs=(x,)), gc.compile(in_train, example_inputs=(x,))
    eval_ops, train_ops = [n.op for n in eval_plan.graph.nodes], [n.op for n in train_plan.graph.nodes]
    assert "batch_norm_train" not in eval_ops and "dropout" not in eval_ops and not eval_plan.graph.updates
    assert "batch_norm_train" in train_ops and "dropout" in train_ops and train_plan.graph.updates


def test_eval_function_compiles_forward_only_and_reads_the_trained_weights():
    model = bn_net()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    data = batches(3)
    step = gc.compile(make_step(model, opt, criterion), example_inputs=data[0])

    def validate(x, y):
        with gc.no_grad():
            return criterion(model(x), y)

    model.eval()
    val = gc.compile(validate, example_inputs=data[0])
    model.train()
    assert val.kind == "inference" and not val.graph.updates
    assert {n.meta.get("phase", "forward") for n in val.graph.nodes} == {"forward"}
    before = float(val(*data[0]))
    for x, y in data:
        step(x, y)
    after = float(val(*data[0]))
    assert after != before  # the plan shares the model's storage: it sees the updated weights
    model.eval()
    with gc.no_grad():
        eager = float(criterion(model(gc.tensor(data[0][0])), gc.tensor(data[0][1])))
    assert after == pytest.approx(eager, rel=RTOL)


RESUME_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, graphc as gc
    plan = gc.load(sys.argv[1])
    data = np.load(sys.argv[2])
    losses = []
    for i in range(3):
        losses.append(np.asarray(plan(data[f"x{i}"], data[f"y{i}"])).tolist())
        for s in plan.lr_schedulers:
            s.step()
    state = {k: np.asarray(v).tolist() for k, v in plan.state.items()}
    print(json.dumps({"losses": losses, "state": state}))
""")


def test_traced_step_saved_to_a_file_resumes_in_a_fresh_process_bit_for_bit(tmp_path):
    model = bn_net()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    data = batches(5)
    step = gc.compile(make_step(model, opt, nn.CrossEntropyLoss()), example_inputs=data[0])
    for x, y in data[:2]:
        step(x, y)
        sched.step()
    step.save(tmp_path / "step.graphc")
    np.savez(tmp_path / "data.npz", **{f"{k}{i}": a for i, (x, y) in enumerate(data[2:]) for k, a in (("x", x), ("y", y))})
    done = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, str(tmp_path / "step.graphc"), str(tmp_path / "data.npz")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    losses = []
    for x, y in data[2:]:  # the original plan goes on in this process
        losses.append(np.asarray(step(x, y)).tolist())
        sched.step()
    assert resumed["losses"] == losses
    for name, array in step.state.items():
        np.testing.assert_array_equal(np.asarray(resumed["state"][name], dtype=array.dtype), array, err_msg=name)


def test_tracing_leaves_eager_gradients_as_they_were():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = batches(1)[0]
    nn.functional.cross_entropy(model(gc.tensor(x)), gc.tensor(y)).backward()
    before = [p.grad.numpy().copy() for p in model.parameters()]
    gc.compile(make_step(model, opt, nn.CrossEntropyLoss()), example_inputs=(x, y))
    for p, g in zip(model.parameters(), before):
        assert not p.grad.is_symbolic
        np.testing.assert_array_equal(p.grad.numpy(), g)


def test_a_step_returning_the_loss_and_outputs_returns_both():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss, out.argmax(dim=1)

    x, y = batches(1)[0]
    loss, pred = gc.compile(train_step, example_inputs=(x, y))(x, y)
    assert np.asarray(loss).shape == () and pred.shape == (8,) and pred.dtype == np.int64


# ---- errors ---------------------------------------------------------------------------------------

def compile_error(fn, *example):
    with pytest.raises(gc.GraphcError) as info:
        gc.compile(fn, example_inputs=example or batches(1)[0])
    return str(info.value)


def test_data_dependent_control_flow_in_a_step_compiles_into_a_cond():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        if loss > 1.0:  # data-dependent: both sides traced, chosen at run time
            loss = loss * 2
        loss.backward()
        opt.step()
        return loss

    x, y = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), np.zeros(4, np.int64)
    step = gc.compile(train_step, (x, y))
    assert "cond" in [n.op for n in step.graph.nodes]
    for scale in (0.0, 50.0):  # the loss decides the side, at run time
        with gc.no_grad():
            plain = float(nn.functional.cross_entropy(model(gc.tensor(x * scale)), gc.tensor(y)).item())
        got = float(step(x * scale, y))
        assert got == pytest.approx(plain * 2 if plain > 1.0 else plain, rel=1e-5)  # float32 rounding


def test_backward_on_a_non_scalar_without_gradient_names_the_line():
    model = mlp()

    def train_step(x, y):
        model(x).backward()

    message = compile_error(train_step)
    assert "only for scalar outputs" in message and "test_step_compile.py" in message


def test_step_without_gradients_and_two_steps_are_refused():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def no_backward(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.step()
        return loss

    def two_steps(x, y):
        for _ in range(2):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return loss

    assert "no parameter has a gradient" in compile_error(no_backward)
    assert "already called" in compile_error(two_steps)  # a plan updates each parameter once per call


def test_backward_of_a_no_grad_value_is_refused():
    model = mlp()

    def train_step(x, y):
        with gc.no_grad():
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    assert "does not require grad" in compile_error(train_step)


def test_an_optimizer_parameter_the_step_never_uses_warns_once():
    model, extra = mlp(), nn.Linear(6, 2)
    opt = optim.SGD(list(model.parameters()) + list(extra.parameters()), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        extra(x)  # used, but not by the loss
        return loss

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = gc.compile(train_step, example_inputs=batches(1)[0])
    relevant = [w for w in caught if "got no gradient" in str(w.message)]
    assert len(relevant) == 1 and "2 parameter(s)" in str(relevant[0].message)
    assert relevant[0].filename.endswith("test_step_compile.py")
    before = extra.weight.numpy().copy()
    step(*batches(1)[0])
    np.testing.assert_array_equal(extra.weight.numpy(), before)  # PyTorch skips parameters without .grad


def test_item_returned_from_a_traced_step_is_the_plans_number():
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # a traced number: the plan returns its value

    x, y = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), np.zeros(4, np.int64)
    with gc.no_grad():
        before = float(nn.functional.cross_entropy(model(gc.tensor(x)), gc.tensor(y)).item())
    assert float(gc.compile(train_step, (x, y))(x, y)) == pytest.approx(before, rel=1e-6)
