"""``gc.compile`` forward plans: eager vs compiled agreement, symbolic batch, ShapeError,
state sharing with the model, state_dict layout, and compiling plain functions."""
from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
from graphc import nn

TOL = 1e-6  # max abs difference allowed between eager and compiled (same kernels, float32)
COMPILE_BATCH = 64


# ---- models --------------------------------------------------------------------------------
class ResidualNet(nn.Module):
    """A user Module subclass: stem, one residual block (``out = bn2(conv2(..)) + x``),
    adaptive average pool, linear head. Counts forward calls to detect retracing."""

    def __init__(self, channels=6, classes=5):
        super().__init__()
        self.stem = nn.Conv2d(1, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding="same", bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.pool = nn.AdaptiveAvgPool2d((3, 3))  # 8 -> 3: non-divisible windows
        self.fc = nn.Linear(channels * 9, classes)
        self.forward_calls = 0

    def forward(self, x):
        self.forward_calls += 1
        x = self.stem(x).relu()
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)) + x
        out = out.relu()
        return self.fc(self.pool(out).flatten(1))


def make_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(),
                         nn.Dropout(0.3), nn.Linear(16, 10))


def make_cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 12, 3, stride=1, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12 * 2 * 2, 10))


def make_resnet():
    return ResidualNet()


MODELS = {"mlp": make_mlp, "cnn": make_cnn, "resnet": make_resnet}
HAS_DROPOUT = {"mlp"}


def build(kind, seed=0):
    gc.manual_seed(seed)
    return MODELS[kind]()


def batch(n, seed=0):
    """Digits-shaped input: (n, 1, 8, 8) float32."""
    return np.random.default_rng(seed).uniform(0, 1, (n, 1, 8, 8)).astype(np.float32)


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def assert_close(got, want, tol=TOL, what="output"):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert max_abs_diff(got, want) <= tol, f"{what}: max abs diff {max_abs_diff(got, want):.3g} > {tol}"


def snapshot(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def assert_states_equal(a: dict, b: dict, tol=TOL):
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert max_abs_diff(a[k], b[k]) <= tol, f"{k}: max abs diff {max_abs_diff(a[k], b[k]):.3g}"


def randomize_bn_stats(model, rng):
    """Give BatchNorm non-trivial running stats and affine params so eval mode is meaningful."""
    for key, a in model.state_dict().items():
        if key.endswith("running_mean"):
            a[...] = rng.standard_normal(a.shape) * 0.3
        elif key.endswith("running_var"):
            a[...] = rng.uniform(0.5, 2.0, a.shape)
        elif key.endswith("num_batches_tracked"):
            a[...] = 11


# ---- eager vs compiled -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_eval_compiled_matches_eager(kind):
    model = build(kind)
    randomize_bn_stats(model, np.random.default_rng(1))
    model.eval()
    before = snapshot(model)
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    assert_states_equal(snapshot(model), before, tol=0.0)  # tracing changed nothing
    for n, seed in [(COMPILE_BATCH, 2), (5, 3), (1, 4)]:
        x = batch(n, seed)
        assert_close(plan(x), model(gc.tensor(x)).numpy(), what=f"batch {n}")
    assert_states_equal(snapshot(model), before, tol=0.0)  # eval never updates buffers


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_train_compiled_matches_eager_including_bn_buffers(kind):
    """Two identical models from the same state: one eager call vs one compiled call must give
    the same outputs and leave the same running_mean/running_var/num_batches_tracked."""
    eager_model, compiled_model = build(kind), build(kind)
    for m in (eager_model, compiled_model):
        randomize_bn_stats(m, np.random.default_rng(1))
        if kind in HAS_DROPOUT:  # dropout RNGs differ between eager and plan: switch it off
            for sub in m.modules():
                if isinstance(sub, nn.Dropout):
                    sub.p = 0.0
        m.train()
    start = snapshot(eager_model)
    assert_states_equal(snapshot(compiled_model), start, tol=0.0)
    plan = gc.compile(compiled_model, example_inputs=(batch(COMPILE_BATCH),))
    assert_states_equal(snapshot(compiled_model), start, tol=0.0)  # tracing updated nothing

    for step, (n, seed) in enumerate([(COMPILE_BATCH, 2), (5, 3), (1, 4)]):
        x = batch(n, seed) * 2 - 0.5
        want = eager_model(gc.tensor(x)).numpy()
        got = plan(x)
        assert_close(got, want, what=f"step {step} (batch {n})")
        eager_state, compiled_state = snapshot(eager_model), snapshot(compiled_model)
        assert_states_equal(compiled_state, eager_state)
        for key in compiled_state:
            if key.endswith("num_batches_tracked"):
                assert int(compiled_state[key]) == 11 + step + 1, key
    # buffers really moved (batch statistics were used and tracked)
    moved = [k for k in start if k.endswith("running_mean") and not np.array_equal(start[k], eager_state[k])]
    assert moved or kind == "mlp"


def test_train_mode_bn_uses_batch_statistics_in_plan():
    """A train-mode plan normalises with the batch's own statistics: per-channel output mean ~ 0."""
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)).train()
    randomize_bn_stats(model, np.random.default_rng(5))
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    out = plan(batch(16, 6) * 5 + 3)
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(out.var(axis=(0, 2, 3)), 1, atol=1e-3)


def test_eval_plan_is_deterministic_and_mlp_dropout_is_identity():
    model = build("mlp").eval()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    x = batch(7, 8)
    np.testing.assert_array_equal(plan(x), plan(x))
    assert not any(node.op == "dropout" for node in plan.graph.nodes)


def test_train_plan_dropout_draws_from_plan_rng():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Dropout(0.5)).train()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    x = np.ones((64, 1, 8, 8), np.float32)
    a, b = plan(x), plan(x)
    assert set(np.unique(a)) <= {0.0, 2.0}
    assert abs((a == 0).mean() - 0.5) < 0.05
    assert not np.array_equal(a, b)  # a fresh mask per call


# ---- symbolic batch dimension ----------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_batch_dim_is_symbolic_no_retrace(kind):
    model = build(kind).eval()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    graph, text = plan.graph, str(plan.graph)
    assert [str(v.type) for v in graph.inputs] == ["f32[N,1,8,8]"]
    assert [str(v.type) for v in graph.outputs] == [f"f32[N,{5 if kind == 'resnet' else 10}]"]
    calls = model.forward_calls if kind == "resnet" else None

    sizes = []
    for n in (COMPILE_BATCH, 5, 1, 5):
        out = plan(batch(n, n))
        assert out.shape[0] == n
        sizes.append(len(plan._programs))
    assert sizes == [1, 2, 3, 3]  # one program per batch size, cached
    assert plan.graph is graph and str(plan.graph) == text  # no retrace
    if calls is not None:
        assert model.forward_calls == calls  # the model's forward ran only while tracing


# ---- ShapeError -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cnn_plan():
    return gc.compile(build("cnn").eval(), example_inputs=(batch(COMPILE_BATCH),))


def shape_error_message(plan, *inputs) -> str:
    with pytest.raises(gc.ShapeError) as info:
        plan(*inputs)
    assert isinstance(info.value, gc.GraphcError)
    return str(info.value)


def test_shape_error_wrong_channel_count(cnn_plan):
    msg = shape_error_message(cnn_plan, np.zeros((5, 3, 8, 8), np.float32))
    assert "'x'" in msg and "f32[N,1,8,8]" in msg and "f32[5,3,8,8]" in msg, msg


def test_shape_error_wrong_spatial_size(cnn_plan):
    msg = shape_error_message(cnn_plan, np.zeros((64, 1, 9, 8), np.float32))
    assert "'x'" in msg and "f32[N,1,8,8]" in msg and "f32[64,1,9,8]" in msg, msg


def test_shape_error_wrong_rank(cnn_plan):
    msg = shape_error_message(cnn_plan, np.zeros((64, 64), np.float32))
    assert "'x'" in msg and "f32[N,1,8,8]" in msg and "f32[64,64]" in msg, msg


def test_shape_error_wrong_dtype(cnn_plan):
    msg = shape_error_message(cnn_plan, np.zeros((5, 1, 8, 8), np.float64))
    assert "'x'" in msg and "f32[N,1,8,8]" in msg and "f64[5,1,8,8]" in msg, msg


@pytest.mark.parametrize("count", [0, 2])
def test_shape_error_wrong_number_of_inputs(cnn_plan, count):
    msg = shape_error_message(cnn_plan, *[np.zeros((5, 1, 8, 8), np.float32)] * count)
    assert re.search(r"\bx\b", msg), msg  # names the expected input
    assert "1" in msg and str(count) in msg, msg  # expected and actual counts


def test_shape_error_plan_still_works_afterwards(cnn_plan):
    with pytest.raises(gc.ShapeError):
        cnn_plan(np.zeros((5, 3, 8, 8), np.float32))
    assert cnn_plan(batch(5)).shape == (5, 10)


def test_shape_error_names_each_input_of_a_function():
    def f(x, y):
        return x * y

    plan = gc.compile(f, example_inputs=(np.ones((4, 3), np.float32), np.ones((4, 3), np.float32)))
    msg = shape_error_message(plan, np.ones((4, 3), np.float32), np.ones((4, 2), np.float32))
    assert "'y'" in msg and "f32[N,3]" in msg and "f32[4,2]" in msg, msg
    # the batch dims of the inputs must agree with each other
    msg = shape_error_message(plan, np.ones((4, 3), np.float32), np.ones((5, 3), np.float32))
    assert "'y'" in msg and "f32[5,3]" in msg, msg


# ---- state sharing ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_compiled_plan_sees_load_state_dict(kind):
    model = build(kind, seed=0).eval()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    x = batch(9, 10)
    old = plan(x)

    other = build(kind, seed=1).eval()
    randomize_bn_stats(other, np.random.default_rng(2))
    model.load_state_dict(other.state_dict())
    new = plan(x)
    assert max_abs_diff(new, old) > 1e-3  # the weights really changed
    assert_close(new, other(gc.tensor(x)).numpy())
    assert_close(new, model(gc.tensor(x)).numpy())


def test_plan_and_model_share_storage():
    model = build("cnn").eval()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    plan_state, model_state = plan.state_dict(), model.state_dict()
    assert set(plan_state) == set(model_state)
    for k in model_state:
        assert np.shares_memory(plan_state[k], model_state[k]), k
    # an in-place edit through the model is visible to the plan
    x = batch(3, 11)
    model[9].bias.numpy()[...] += 1.0
    assert_close(plan(x), model(gc.tensor(x)).numpy())


def test_train_plan_updates_are_visible_to_the_model():
    model = build("cnn").train()
    plan = gc.compile(model, example_inputs=(batch(COMPILE_BATCH),))
    plan(batch(8, 12))
    assert int(model.state_dict()["1.num_batches_tracked"]) == 1
    assert int(model[1].num_batches_tracked.numpy()) == 1
    assert not np.array_equal(model[1].running_mean.numpy(), 0)


# ---- state_dict layout vs torch ------------------------------------------------------------
def _torch_twins():
    import torch

    tnn = torch.nn

    class TorchResidualNet(tnn.Module):
        def __init__(self, channels=6, classes=5):
            super().__init__()
            self.stem = tnn.Conv2d(1, channels, 3, padding=1)
            self.conv1 = tnn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = tnn.BatchNorm2d(channels)
            self.conv2 = tnn.Conv2d(channels, channels, 3, padding="same", bias=False)
            self.bn2 = tnn.BatchNorm2d(channels)
            self.pool = tnn.AdaptiveAvgPool2d((3, 3))
            self.fc = tnn.Linear(channels * 9, classes)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            out = torch.relu(self.bn1(self.conv1(x)))
            out = torch.relu(self.bn2(self.conv2(out)) + x)
            return self.fc(torch.flatten(self.pool(out), 1))

    return {
        "mlp": tnn.Sequential(tnn.Flatten(), tnn.Linear(64, 32), tnn.ReLU(), tnn.Linear(32, 16), tnn.Tanh(),
                              tnn.Dropout(0.3), tnn.Linear(16, 10)),
        "cnn": tnn.Sequential(tnn.Conv2d(1, 8, 3, padding=1), tnn.BatchNorm2d(8), tnn.ReLU(), tnn.MaxPool2d(2),
                              tnn.Conv2d(8, 12, 3, stride=1, padding=1), tnn.BatchNorm2d(12), tnn.ReLU(),
                              tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(12 * 2 * 2, 10)),
        "resnet": TorchResidualNet(),
    }


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_state_dict_keys_match_torch(kind, torch_ref):
    x = batch(6, 13)

    def torch_side():  # torch's own (freshly initialised) state_dict and its eval output on x
        import torch

        torch.manual_seed(0)
        tmodel = _torch_twins()[kind]
        with torch.no_grad():
            out = tmodel.eval()(torch.from_numpy(x))
        return {"out": out, **{f"state.{k}": v.numpy() for k, v in tmodel.state_dict().items()}}

    ref = torch_ref([kind, x], torch_side)
    tsd = {k[len("state."):]: v for k, v in ref.items() if k.startswith("state.")}  # in torch's order
    model = build(kind)
    gsd = model.state_dict()
    assert list(gsd) == list(tsd)
    assert {k: tuple(v.shape) for k, v in gsd.items()} == {k: tuple(v.shape) for k, v in tsd.items()}
    # torch's weights load and the compiled plan then agrees with torch itself (eval mode)
    model.load_state_dict({k: np.array(v, copy=True) for k, v in tsd.items()})
    plan = gc.compile(model.eval(), example_inputs=(batch(COMPILE_BATCH),))
    assert max_abs_diff(plan(x), ref["out"]) <= 1e-5
    assert sorted(plan.state_dict()) == sorted(tsd)


def test_state_dict_keys_without_torch():
    """The expected keys spelled out, so the layout is checked even where torch is absent."""
    assert list(build("resnet").state_dict()) == [
        "stem.weight", "stem.bias", "conv1.weight",
        "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
        "conv2.weight",
        "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var", "bn2.num_batches_tracked",
        "fc.weight", "fc.bias"]


# ---- plain functions -------------------------------------------------------------------------
def test_compile_plain_function():
    def f(x, y):
        z = (x * y + 1.0).sum(dim=1) / 2
        return z + x.exp().mean(dim=1)

    rng = np.random.default_rng(14)
    a, b = (rng.standard_normal((16, 5)).astype(np.float32) for _ in range(2))
    plan = gc.compile(f, example_inputs=(a, b))
    assert plan.input_names == ["x", "y"]
    assert [str(v.type) for v in plan.graph.outputs] == ["f32[N]"]
    for n in (16, 3):
        want = (a[:n] * b[:n] + 1.0).sum(1) / 2 + np.exp(a[:n]).mean(1)
        assert_close(plan(a[:n], b[:n]), f(gc.tensor(a[:n]), gc.tensor(b[:n])).numpy())
        np.testing.assert_allclose(plan(a[:n], b[:n]), want, rtol=1e-5, atol=1e-6)


def test_compile_function_with_several_outputs_and_functional_ops():
    import graphc.nn.functional as F

    def g(x):
        return F.relu(x), F.softmax(x, dim=-1), x.tanh().sum()

    x = np.random.default_rng(15).standard_normal((8, 4)).astype(np.float32)
    plan = gc.compile(g, example_inputs=(x,))
    outs = plan(x)
    assert isinstance(outs, tuple) and len(outs) == 3
    for got, want in zip(outs, g(gc.tensor(x))):
        assert_close(got, want.numpy())
    assert outs[2].shape == ()


def test_compile_accepts_a_single_example_array_and_tensors():
    model = nn.Linear(4, 2).eval()
    x = np.ones((8, 4), np.float32)
    p1 = gc.compile(model, example_inputs=x)
    p2 = gc.compile(model, example_inputs=(gc.tensor(x),))
    assert_close(p1(x[:3]), p2(x[:3]))
    assert_close(p1(x[:3]), model(gc.tensor(x[:3])).numpy())

