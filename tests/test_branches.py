"""Python branches on traced values compile into a ``cond`` (graphc/branching.py, ir/join.py),
Python numbers are plan inputs, and ``.item()`` in a compiled step is a traced number
(graphc/core/traced_scalars.py). The lecture's example is compared with PyTorch in float64
(so that float32 noise cannot flip a decision near the threshold)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn


def model(x, y, w1, w2a, w2b, prev_loss):
    """The seed lecture's static-graph example, as written for torch.jit.script."""
    w2 = w2a if prev_loss < 5.0 else w2b
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    return loss


class Weights(nn.Module):
    def __init__(self, arrays):
        super().__init__()
        for name, a in arrays.items():
            setattr(self, name, nn.Parameter(gc.tensor(a)))


def _seed_data(iterations=500):
    rng = np.random.default_rng(7)
    weights = {"w1": rng.standard_normal((10, 20)) * 0.3, "w2a": rng.standard_normal((20, 3)) * 0.3,
               "w2b": rng.standard_normal((20, 3)) * 0.3}
    batches = [(rng.standard_normal((16, 10)), rng.standard_normal((16, 3)) * 0.2) for _ in range(iterations)]
    return weights, batches


LR = 3e-3


def _torch_seed(weights, batches):
    import torch

    w = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
    losses, prev = [], 10.0
    for x, y in batches:
        loss = model(torch.tensor(x), torch.tensor(y), w["w1"], w["w2a"], w["w2b"], prev)
        loss.backward()
        with torch.no_grad():
            for p in w.values():
                if p.grad is not None:
                    p -= LR * p.grad
                    p.grad = None
        prev = loss.item()
        losses.append(prev)
    return {"losses": np.array(losses), **{k: v.detach().numpy() for k, v in w.items()}}


def test_the_lecture_example_compiles_once_and_matches_pytorch_through_a_saved_plan(tmp_path, torch_ref):
    weights, batches = _seed_data()
    params = Weights(weights)
    opt = gc.optim.SGD(params.parameters(), lr=LR)

    def step(x, y, prev_loss):
        loss = model(x, y, params.w1, params.w2a, params.w2b, prev_loss)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    plan = gc.compile(step, (*batches[0], 10.0))
    assert [n.op for n in plan.graph.nodes].count("cond") == 2  # the forward choice and its gradient
    plan.save(tmp_path / "seed.graphc")
    loaded = gc.load(tmp_path / "seed.graphc")  # no model code: the branch is in the file
    losses, prev = [], 10.0
    for x, y in batches:
        prev = float(loaded(x, y, prev))
        losses.append(prev)
    expected = torch_ref([weights, batches], lambda: _torch_seed(weights, batches))
    taken = np.array([10.0, *losses[:-1]]) < 5.0
    assert 20 < taken.sum() < len(batches) - 20, "both branches are taken many times"
    # float64 throughout: the same operations in the same order up to BLAS summation order
    np.testing.assert_allclose(losses, expected["losses"], rtol=1e-9, atol=1e-12)
    for name in weights:
        np.testing.assert_allclose(loaded.state_dict()[name], expected[name], rtol=1e-9, atol=1e-12)


def test_a_branch_picks_at_run_time_and_its_gradient_follows():
    gc.manual_seed(0)
    a, b = nn.Linear(3, 2).double(), nn.Linear(3, 2).double()

    def f(x):
        if x.sum() > 0:
            return a(x).relu().sum()
        return b(x).tanh().sum() * 2.0

    plan = gc.compile(f, (np.ones((4, 3)),))
    for sign in (1.0, -1.0):
        x = np.full((4, 3), sign)
        assert float(plan(x)) == pytest.approx(float(f(gc.tensor(x))), rel=1e-12)


def test_nested_branches_and_and_or_compile():
    def f(x, t):
        y = x * 2.0
        if t > 0 and x.sum() > 0:
            y = y + 1.0
        elif t < -1 or x.mean() < -1:
            y = y - 1.0
        return y.exp() if y.sum() > 3 else y

    plan = gc.compile(f, (np.ones(3), 1.0))
    for x in (np.ones(3), -np.ones(3), np.full(3, -2.0), np.zeros(3)):
        for t in (1.0, 0.0, -2.0):
            np.testing.assert_allclose(plan(x, t), f(gc.tensor(x), t).numpy(), rtol=1e-12)


def test_python_numbers_are_plan_inputs_not_constants():
    plan = gc.compile(lambda x, scale: x * scale + scale, (np.ones(3, np.float32), 2.0))
    assert plan(np.ones(3, np.float32), 5.0).tolist() == [10.0, 10.0, 10.0]
    assert plan(np.ones(3, np.float32), 2.0).dtype == np.float32  # a Python number's weak dtype


def test_item_in_a_compiled_step_is_a_traced_number_without_gradient():
    gc.manual_seed(0)
    actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
    twins = [nn.Linear(4, 2), nn.Linear(4, 1)]
    for twin, module in zip(twins, (actor, critic)):
        twin.load_state_dict(module.state_dict())

    def make_update(actor, critic):
        opt = gc.optim.SGD([*actor.parameters(), *critic.parameters()], lr=0.05)

        def update(state, onehot, reward):
            value = critic(state).sum()
            logp = (actor(state).log_softmax(-1) * onehot).sum()
            advantage = reward - value.item()  # a number: no gradient flows into the critic here
            loss = -logp * advantage + (reward - value) ** 2
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        return update

    compiled = gc.compile(make_update(actor, critic), (np.ones((1, 4), np.float32), np.eye(2, dtype=np.float32)[:1],
                                                       1.0))
    eager = make_update(*twins)
    rng = np.random.default_rng(0)
    for _ in range(20):
        state = rng.standard_normal((1, 4)).astype(np.float32)
        onehot = np.eye(2, dtype=np.float32)[[rng.integers(2)]]
        reward = float(rng.standard_normal())
        got = compiled(state, onehot, reward)
        want = eager(gc.tensor(state), gc.tensor(onehot), reward)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5)  # float32, summation order
    for twin, module in zip(twins, (actor, critic)):
        for k, v in module.state_dict().items():
            np.testing.assert_allclose(np.asarray(v), np.asarray(twin.state_dict()[k]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("use, message", [
    (lambda v: f"{v:.3f}", "formatting"),
    (lambda v: [1, 2, 3][v.__trunc__()], "index"),
    (lambda v: int(v), "int"),
    (lambda v: range(round(v)), "count"),
    (lambda v: {v: 1}, "hashing"),
])
def test_a_traced_number_where_python_needs_a_real_one_is_a_clear_error(use, message):
    def f(x):
        use(x.sum().item())
        return x

    with pytest.raises(gc.TraceError, match=message) as info:
        gc.compile(f, (np.ones(3, np.float32),))
    assert "test_branches.py" in str(info.value)


def test_a_while_loop_on_a_traced_value_names_the_line_and_suggests_while_loop():
    def f(x):
        while x.sum() > 0:
            x = x - 1.0
        return x

    with pytest.raises(gc.TraceError, match="while_loop") as info:
        gc.compile(f, (np.ones(3, np.float32),))
    assert "test_branches.py" in str(info.value)


def test_sides_that_change_python_state_differently_are_refused():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.calls = 0

        def forward(self, x):
            if x.sum() > 0:
                self.calls += 1
            return self.fc(x)

    with pytest.raises(gc.TraceError, match="calls"):
        gc.compile(Counter(), (np.ones((2, 2), np.float32),))


def test_a_stateful_optimizer_with_a_parameter_only_one_side_uses_is_refused():
    params = Weights({"a": np.ones((2, 2), np.float32), "b": np.ones((2, 2), np.float32)})
    opt = gc.optim.Adam(params.parameters(), lr=0.1)

    def step(x, flag):
        loss = (x @ params.a).sum() if flag > 0 else (x @ params.b).sum()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(gc.TraceError, match="Adam"):
        gc.compile(step, (np.ones((2, 2), np.float32), 1.0))


def test_a_number_used_as_a_count_specialises_the_plan_and_a_new_value_traces_again(tmp_path):
    traces = []

    def repeat(x, steps):
        traces.append(steps)
        for _ in range(steps):
            x = x * 2.0
        return x.reshape(-1, steps + 1)

    x = np.ones((2, 12), np.float32)
    plan = gc.compile(repeat, (x, 2))
    assert plan.graph.meta["guards"]["steps"]["value"] == 2
    assert plan(x, 2).tolist() == [[4.0] * 3] * 8
    assert plan(x, 3).shape == (6, 4)  # traced again for 3
    assert float(plan(x, 3)[0, 0]) == 8.0
    count = len(traces)
    plan(x, 3)
    assert len(traces) == count  # the plan for 3 is kept
    plan.save(tmp_path / "repeat.graphc")
    loaded = gc.load(tmp_path / "repeat.graphc")
    assert loaded(x, 2).shape == (8, 3)
    with pytest.raises(gc.ShapeError, match=r"specialised on steps=2 .*test_branches.py.*got 5"):
        loaded(x, 5)


def test_a_training_step_specialised_on_a_number_refuses_another_value():
    params = Weights({"w": np.ones((3, 3), np.float32)})
    opt = gc.optim.SGD(params.parameters(), lr=0.1)

    def step(x, hops):
        for _ in range(hops):
            x = x @ params.w
        loss = x.sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    plan = gc.compile(step, (np.ones((2, 3), np.float32), 2))
    plan(np.ones((2, 3), np.float32), 2)
    with pytest.raises(gc.ShapeError, match="specialised on hops=2"):
        plan(np.ones((2, 3), np.float32), 3)


def test_batch_norm_in_one_side_trains_and_updates_its_statistics_like_eager():
    def make():
        gc.manual_seed(0)
        bn, lin = nn.BatchNorm1d(4), nn.Linear(4, 1)
        opt = gc.optim.SGD([*bn.parameters(), *lin.parameters()], lr=0.1)

        def step(x):
            h = bn(x) if x.mean() > 0 else x  # batch statistics (and their update) on one side only
            loss = lin(h).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        return step, bn, lin

    compiled_step, bn, lin = make()
    eager_step, bn_twin, lin_twin = make()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    plan = gc.compile(compiled_step, (x + 1.0,))
    for shift in (1.0, -1.0, 1.0, -1.0):
        x = rng.standard_normal((8, 4)).astype(np.float32) + shift
        got, want = float(plan(x)), float(eager_step(gc.tensor(x)).numpy())
        assert got == pytest.approx(want, rel=1e-5)  # float32 rounding
    for module, twin in ((bn, bn_twin), (lin, lin_twin)):
        for key, value in module.state_dict().items():
            np.testing.assert_allclose(np.asarray(value), np.asarray(twin.state_dict()[key]), rtol=1e-5, atol=1e-6)


def test_numbers_from_inputs_feed_creation_attrs_and_indices():
    def f(x, scale, n, p):
        y = x + gc.full((3,), scale) + gc.tensor([scale, 2.0, 3.0])
        y = nn.functional.dropout(y, p=p, training=False)
        return y[:, :n].sum(1) * n + y.mean(n - 1).sum()

    x = np.ones((2, 3), np.float32)
    plan = gc.compile(f, (x, 0.5, 1, 0.25))
    for scale in (0.5, 2.0):
        np.testing.assert_allclose(plan(x, scale, 1, 0.25), f(gc.tensor(x), scale, 1, 0.25).numpy(), rtol=1e-6)
    np.testing.assert_allclose(plan(x, 2.0, 2, 0.25), f(gc.tensor(x), 2.0, 2, 0.25).numpy(), rtol=1e-6)


def test_float_of_a_traced_tensor_is_refused_and_item_in_gc_tensor_is_traced():
    with pytest.raises(gc.TraceError, match="float\\(tensor\\)"):
        gc.compile(lambda x: x * float(x.sum()), (np.ones(3, np.float32),))
    plan = gc.compile(lambda x: x * gc.tensor(x.sum().item() - 1.0), (np.ones(3, np.float32),))
    assert plan(np.full(3, 2.0, np.float32)).tolist() == [10.0] * 3


def test_a_check_that_fails_on_the_other_side_says_so():
    def f(x):
        assert x.abs().max() < 1e6, "activations blew up"
        return x * 2.0

    with pytest.raises(gc.TraceError, match="(?s)side of a branch.*AssertionError: activations blew up"):
        gc.compile(f, (np.ones(3, np.float32),))


def test_cond_takes_nested_operands_like_torch_cond():
    def f(x):
        return gc.cond(x.sum() > 0, lambda ab: ab[0] + ab[1], lambda ab: ab[0] - ab[1], ((x, x * 2.0),))

    plan = gc.compile(f, (np.ones((2, 3), np.float32),))
    for sign in (1.0, -1.0):
        x = np.full((2, 3), sign, np.float32)
        np.testing.assert_array_equal(plan(x), f(gc.tensor(x)).numpy())
