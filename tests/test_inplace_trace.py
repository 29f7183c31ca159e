"""In-place writes inside compiled functions (issue: a hand-written parameter update inside a
compiled step corrupted the model). Writes to parameters and buffers become state updates of
the plan; tracing never changes a model's arrays; the compiled step matches the eager one.

Compiled and eager runs are compared in float64, where both compute the same formulas and
only the order of BLAS sums may differ (rtol 1e-12 leaves room for that and nothing else).
"""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim

RTOL = 1e-12  # float64: the plan's fused kernels may sum in another order than eager numpy
LR = 0.1


def _model(seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).double()


def _data(steps=4, batch=16):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((batch, 4)), rng.standard_normal((batch, 2))) for _ in range(steps)]


def _weights(model):
    return {k: np.array(v) for k, v in model.state_dict().items()}


def _assert_same(a: dict, b: dict, rtol=RTOL):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=1e-14, err_msg=k)


def side_by_side(make, data):
    """``make()`` -> (step function, models...): one copy runs eagerly, one compiled (traced on
    the first batch); after every batch the losses and every model's weights must agree."""
    eager, compiled = make(), make()
    plan = gc.compile(compiled[0], example_inputs=data[0])
    for x, y in data:
        want = eager[0](gc.tensor(x), gc.tensor(y)).item()
        assert float(plan(x, y)) == pytest.approx(want, rel=RTOL)
        for e, c in zip(eager[1:], compiled[1:]):
            _assert_same(_weights(c), _weights(e))
    return compiled[1:]


def _update_data_add(model):
    for p in model.parameters():
        p.data.add_(-LR * p.grad)


def _update_alpha(model):
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-LR)


def _update_no_grad(model):
    with gc.no_grad():
        for p in model.parameters():
            p -= LR * p.grad


def _update_copy(model):
    with gc.no_grad():
        for p in model.parameters():
            p.copy_(p - LR * p.grad)


def _update_tutorial(model):
    """The old PyTorch tutorials' loop: assign through ``.data`` and zero the gradient by hand."""
    for p in model.parameters():
        p.data -= LR * p.grad.data
        p.grad.data.zero_()


@pytest.mark.parametrize("update", [_update_data_add, _update_alpha, _update_no_grad, _update_copy,
                                    _update_tutorial])
def test_manual_sgd_compiled_matches_eager_step_for_step(update):
    eager_model, model = _model(), _model()

    def make_step(m):
        def train_step(x, y):
            m.zero_grad()
            loss = F.smooth_l1_loss(m(x), y)
            loss.backward()
            update(m)
            return loss
        return train_step

    data = _data()
    before = _weights(model)
    step = gc.compile(make_step(model), example_inputs=data[0])
    _assert_same(_weights(model), before, rtol=0)  # tracing changed nothing (it wrote NaN before)
    assert step.kind == "training" and set(step.graph.updates) == set(before)
    eager_step = make_step(eager_model)
    for x, y in data:
        want = eager_step(gc.tensor(x), gc.tensor(y)).item()
        got = float(step(x, y))
        assert got == pytest.approx(want, rel=RTOL)
        _assert_same(_weights(model), _weights(eager_model))
    assert not np.allclose(_weights(model)["0.weight"], before["0.weight"])  # it did train


def test_a_manual_step_saves_loads_and_resumes(tmp_path):
    model = _model()

    def train_step(x, y):
        model.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        with gc.no_grad():
            for p in model.parameters():
                p.sub_(LR * p.grad)
        return loss

    data = _data(steps=3)
    step = gc.compile(train_step, example_inputs=data[0])
    step(*data[0])
    step.save(tmp_path / "manual.graphc")
    loaded = gc.load(tmp_path / "manual.graphc")
    for x, y in data[1:]:
        assert float(loaded(x, y)) == pytest.approx(float(step(x, y)), rel=RTOL)
    _assert_same(loaded.state_dict(), step.state_dict())


def test_weight_clipping_after_the_optimizer_step_sees_the_update():
    """WGAN's critic: ``opt.step()`` then ``p.data.clamp_(-c, c)``: the clamp acts on the
    updated values and the plan keeps both (before, the clamp overwrote the update)."""
    def make():
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.5)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            for p in m.parameters():
                p.data.clamp_(-0.3, 0.3)
            return loss
        return train_step, m

    model, = side_by_side(make, _data())
    assert max(np.abs(w).max() for w in _weights(model).values()) == pytest.approx(0.3)


def test_manual_weight_decay_before_the_optimizer_step_is_what_the_optimizer_updates():
    def make():
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            with gc.no_grad():
                for p in m.parameters():
                    p.mul_(0.99)
            opt.step()
            return loss
        return train_step, m

    side_by_side(make, _data())


def test_a_target_network_soft_update_reads_both_models_live():
    """DQN/DDPG: ``target.data.copy_(tau * p.data + (1 - tau) * target.data)``; the eager
    arithmetic on ``.data`` of a model's state is recorded (it was frozen at trace time)."""
    tau = 0.25

    def make():
        net, tgt = _model(0), _model(1)
        opt = optim.SGD(net.parameters(), lr=0.1)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(net(x), tgt(x).detach() + y)
            loss.backward()
            opt.step()
            for p, tp in zip(net.parameters(), tgt.parameters()):
                tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
            return loss
        return train_step, net, tgt

    side_by_side(make, _data())


def test_l2_penalty_over_model_parameters_is_differentiated():
    """``sum(p.pow(2).sum() for p in model.parameters())`` in a compiled step reads the live
    parameters (it was computed once at trace time and its gradient was lost)."""
    def make():
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y) + 0.05 * sum(p.pow(2).sum() for p in m.parameters())
            loss.backward()
            opt.step()
            return loss
        return train_step, m

    side_by_side(make, _data())


class RunningMean(nn.Module):
    """Buffers changed in forward the three ways PyTorch code does it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3).double()
        self.register_buffer("ema", gc.zeros(3, dtype=gc.float64))
        self.register_buffer("calls", gc.zeros((), dtype=gc.int64))
        self.register_buffer("last", gc.zeros(3, dtype=gc.float64))

    def forward(self, x):
        h = self.fc(x)
        with gc.no_grad():
            self.ema.mul_(0.9).add_(h.mean(0), alpha=0.1)  # chained in-place methods
            self.calls += 1  # an augmented assignment on a buffer attribute
        self.last = h.detach().max(0)[0]  # rebinding the attribute, as PyTorch modules do
        return h * self.ema


def test_buffers_written_in_forward_are_plan_updates():
    eager_model, model = RunningMean(), RunningMean()
    eager_model.load_state_dict(model.state_dict())
    xs = [np.random.default_rng(i).standard_normal((5, 3)) for i in range(3)]
    plan = gc.compile(model, (xs[0],))
    assert model.calls.item() == 0 and isinstance(model._buffers["last"].array, np.ndarray)  # untouched
    for x in xs:
        want = eager_model(gc.tensor(x)).numpy()
        np.testing.assert_allclose(plan(x), want, rtol=RTOL)
        _assert_same(_weights(model), _weights(eager_model))
    assert model.calls.item() == 3


def test_in_place_on_a_traced_intermediate_is_rebound():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4).double()

        def forward(self, x):
            h = self.fc(x)
            h.mul_(2).clamp_(min=0)
            h += x
            return h

    model = Net()
    x = np.random.default_rng(0).standard_normal((6, 4))
    plan = gc.compile(model, (x,))
    want = np.maximum(2 * (x @ model.fc.weight.numpy().T + model.fc.bias.numpy()), 0) + x
    np.testing.assert_allclose(plan(x), want, rtol=RTOL)


def test_in_place_through_a_view_is_refused():
    def fn(x):
        h = x * 2
        flat = h.view(-1)
        flat.add_(1)  # must change h too: a rebound value cannot
        return h

    with pytest.raises(gc.TraceError, match="shares storage"):
        gc.compile(fn, (np.zeros((2, 3), np.float32),))


def test_a_traced_value_written_into_an_outside_tensor_is_refused():
    log = gc.zeros(3)

    def fn(x):
        log.copy_(x.sum(0))
        return x

    with pytest.raises(gc.TraceError, match="outside the traced computation"):
        gc.compile(fn, (np.zeros((2, 3), np.float32),))
    np.testing.assert_array_equal(log.numpy(), np.zeros(3, np.float32))


def test_the_loss_after_an_update_in_the_same_step_is_differentiated_at_the_updated_weights():
    """As eagerly: the loss reads the halved weights, so the gradient is taken there (not at the
    weights the step began with, and nothing flows back into the halving)."""
    def make():
        model = _model()

        def train_step(x, y):
            with gc.no_grad():
                for p in model.parameters():
                    p.mul_(0.5)
            loss = F.mse_loss(model(x), y)  # reads the halved weights
            loss.backward()
            with gc.no_grad():
                for p in model.parameters():
                    p -= LR * p.grad
            for p in model.parameters():
                p.grad = None
            return loss
        return train_step, model

    side_by_side(make, _data(3))


def test_augmented_assignment_on_a_parameter_outside_no_grad_is_an_error_as_in_pytorch():
    p = nn.Parameter(np.ones(3, np.float32))
    with pytest.raises(gc.GraphcError, match="leaf tensor that requires grad"):
        p -= 1.0  # before: silently rebound the name, leaving the parameter as it was
    with gc.no_grad():
        p -= 1.0
    np.testing.assert_array_equal(p.numpy(), np.zeros(3, np.float32))


def test_a_non_finite_manual_step_changes_nothing():
    model = _model()

    def train_step(x, y):
        model.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
        return loss

    x, y = _data(1)[0]
    step = gc.compile(train_step, example_inputs=(x, y))
    before = _weights(model)
    with pytest.raises(gc.NonFiniteError):
        step(x, np.full_like(y, np.inf))
    _assert_same(_weights(model), before, rtol=0)


def test_manual_sgd_matches_pytorch(torch_ref):
    """PyTorch as the oracle: the same manual loop (``p.data.add_(p.grad, alpha=-lr)``) in
    float64, four steps, losses and final weights."""
    model = _model()
    init = _weights(model)
    data = _data()

    def compute():
        import torch

        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).double()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
        losses = []
        for x, y in data:
            net.zero_grad()
            loss = torch.nn.functional.smooth_l1_loss(net(torch.from_numpy(x)), torch.from_numpy(y))
            loss.backward()
            for p in net.parameters():
                p.data.add_(p.grad, alpha=-LR)
            losses.append(loss.item())
        return {"losses": np.array(losses), **{k: v.detach().numpy() for k, v in net.state_dict().items()}}

    ref = torch_ref({"init": init, "data": data}, compute)

    def train_step(x, y):
        model.zero_grad()
        loss = F.smooth_l1_loss(model(x), y)
        loss.backward()
        _update_alpha(model)
        return loss

    step = gc.compile(train_step, example_inputs=data[0])
    losses = [float(step(x, y)) for x, y in data]
    np.testing.assert_allclose(losses, ref["losses"], rtol=RTOL)
    _assert_same(_weights(model), {k: ref[k] for k in init})
