"""More in-place idioms inside compiled functions, found by a new user's review of the first
round: each gave a silent wrong answer or a misleading error before. Compiled and eager runs
are compared in float64 (rtol 1e-12: only the order of BLAS sums may differ)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from test_inplace_trace import side_by_side

RTOL = 1e-12
X = np.random.default_rng(0).standard_normal((6, 3))
Y = np.random.default_rng(1).standard_normal((6, 2))


def linear():
    gc.manual_seed(0)
    return nn.Linear(3, 2).double()


def weights(model):
    return {k: np.array(v) for k, v in model.state_dict().items()}


BATCHES = [(X, Y)] * 3


def assert_models_match(eager, compiled):
    for e, c in zip(eager, compiled):
        for k, v in weights(e).items():
            np.testing.assert_allclose(weights(c)[k], v, rtol=RTOL, atol=1e-15, err_msg=k)


def test_a_clone_is_a_new_tensor():
    """``skip = h.clone(); h.mul_(3)`` must leave ``skip`` alone (clone returned h itself)."""
    def fn(x):
        h = x * 2
        skip = h.clone()
        h.mul_(3)
        return h + skip

    def detached(x):
        h = (x * 2).detach().clone()  # a copy: no longer shares the detached value
        h.mul_(3)
        return h

    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(gc.compile(fn, (x,))(x), np.full((2, 3), 8.0, np.float32))
    np.testing.assert_array_equal(gc.compile(detached, (x,))(x), np.full((2, 3), 6.0, np.float32))


def test_assigning_data_in_a_step_is_an_update():
    """``p.data = p.data - lr * p.grad``: the tutorials' rebinding (it left the model's
    arrays as None and the plan never updated)."""
    def make():
        model = linear()

        def step(x, y):
            model.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            for p in model.parameters():
                p.data = p.data - 0.1 * p.grad
            return loss
        return step, model

    side_by_side(make, BATCHES)


def test_a_target_network_copied_with_load_state_dict_follows_every_step():
    def make():
        model = linear()
        target = copy.deepcopy(model)
        opt = optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            target.load_state_dict(model.state_dict())
            return loss
        return step, model, target

    model, target = side_by_side(make, BATCHES)
    assert_models_match([model], [target])  # the target holds the model's last weights


def test_models_reached_through_helpers_containers_and_defaults_are_found():
    """The step's models may sit in a helper function, a dict, an object or a default argument
    (before: "the loss does not depend on any parameter", or a model changed at trace time)."""
    class Trainer:
        pass

    def through_helper():
        model, other = linear(), linear()
        opt = optim.SGD(model.parameters(), lr=0.1)

        def loss_of(x, y):
            return F.mse_loss(model(x), y)

        def shrink_other():
            with gc.no_grad():
                for p in other.parameters():
                    p.mul_(0.5)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of(x, y)
            loss.backward()
            opt.step()
            shrink_other()
            return loss
        return step, model, other

    def through_containers():
        models, trainer = {"g": linear()}, Trainer()
        trainer.model = linear()
        opt = optim.SGD([*models["g"].parameters(), *trainer.model.parameters()], lr=0.1)

        def step(x, y, scale=2.0, critic=trainer.model):
            opt.zero_grad()
            loss = F.mse_loss(models["g"](x) * scale, y) + F.mse_loss(critic(x), y)
            loss.backward()
            opt.step()
            return loss
        return step, models["g"], trainer.model

    for make in (through_helper, through_containers):
        side_by_side(make, BATCHES)


def test_a_parameter_of_a_model_the_step_cannot_see_is_refused_untouched():
    registry = {"models": [linear()]}  # two levels down: the search for models stops at one
    model = linear()
    opt = optim.SGD(model.parameters(), lr=0.1)
    before = weights(registry["models"][0])

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        with gc.no_grad():
            registry["models"][0].weight.mul_(0.5)  # before: halved once while tracing, never by the plan
        return loss

    with pytest.raises(gc.TraceError, match="not part of the compiled step's models"):
        gc.compile(step, example_inputs=(X, Y))
    for k, v in before.items():
        np.testing.assert_array_equal(weights(registry["models"][0])[k], v)


@pytest.mark.parametrize("kind", ["StepLR", "ReduceLROnPlateau", "CosineAnnealingWarmRestarts"])
def test_scheduler_step_inside_a_compiled_step_is_refused_and_changes_nothing(kind):
    """Every scheduler's step() goes to the trace in hand, which refuses it (before: it ran once,
    while tracing, and the plan kept that learning rate forever)."""
    model = linear()
    opt = optim.SGD(model.parameters(), lr=0.1)
    sched = {"StepLR": lambda: optim.lr_scheduler.StepLR(opt, 1, gamma=0.5),
             "ReduceLROnPlateau": lambda: optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0),
             "CosineAnnealingWarmRestarts": lambda: optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2)}[kind]()

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if kind == "ReduceLROnPlateau":
            sched.step(loss)
        else:
            sched.step()
        return loss

    with pytest.raises(gc.TraceError, match=rf"{kind}.step\(\) inside a compiled function"):
        gc.compile(step, example_inputs=(X, Y))
    assert opt.param_groups[0]["lr"] == 0.1


def test_a_view_of_a_parameter_read_after_its_update_is_refused():
    model = linear()

    def step(x, y):
        model.zero_grad()
        flat = model.weight.view(-1)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        with gc.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        return flat.sum()  # PyTorch shows the updated weights; the graph's view would not

    with pytest.raises(gc.TraceError, match="view of weight .* before its in-place update"):
        gc.compile(step, example_inputs=(X, Y))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_every_augmented_assignment_is_in_place(compiled):
    """``**=`` and ``//=`` rebound the name before (the parameter kept its values)."""
    model = linear()
    w = weights(model)["weight"]

    def update(x, y):
        with gc.no_grad():
            model.weight **= 2
            model.bias //= 0.5
        return model(x).sum()

    if compiled:
        gc.compile(update, example_inputs=(X, Y))(X, Y)
    else:
        update(gc.tensor(X), gc.tensor(Y))
    np.testing.assert_array_equal(model.weight.numpy(), w ** 2)
    t = gc.tensor([1.0, 2.0])
    alias = t
    t **= 2
    assert alias.numpy().tolist() == [1.0, 4.0]


def test_in_place_results_follow_pytorch_casting():
    """A float64 result is stored in a float32 tensor (PyTorch's same-kind rule); a float in an
    integer tensor is refused."""
    a = gc.tensor([1.0, 2.0])
    a += gc.tensor([1.0, 1.0], dtype=gc.float64)
    assert a.dtype == gc.float32 and a.numpy().tolist() == [2.0, 3.0]

    def fn(x):
        h = x * 2
        h += gc.tensor(np.ones(3))  # float64 into float32
        return h

    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(gc.compile(fn, (x,))(x), np.full((2, 3), 3.0, np.float32))
    with pytest.raises(gc.GraphcError, match="cannot be stored in place"):
        gc.tensor([1, 2]).mul_(0.5)


def test_a_numpy_float64_scalar_makes_a_float64_tensor():
    assert gc.tensor(np.float64(2.5)).dtype == gc.float64  # as torch.tensor; a Python float is float32
    assert gc.tensor(2.5).dtype == gc.float32


def test_contiguous_copies_a_non_contiguous_tensor():
    a = gc.tensor(np.arange(6.0).reshape(2, 3))
    b = a.T.contiguous()
    b += 1  # before: b shared a's array and changed it
    assert a.numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert a.contiguous() is a


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_negative_int_with_an_unsigned_tensor_wraps_around_as_in_pytorch(compiled):
    """``uint8 + (-2)`` raised numpy's raw OverflowError; PyTorch wraps (the scalar is cast)."""
    u = np.array([1, 200], np.uint8)
    fn = lambda a: (a + (-2), a * (-1), a - 3)  # noqa: E731
    out = gc.compile(fn, (u,))(u) if compiled else [t.numpy() for t in fn(gc.tensor(u))]
    assert [o.tolist() for o in out] == [[255, 198], [255, 56], [254, 197]]  # torch.uint8's answers
    assert all(o.dtype == np.uint8 for o in out)


def test_a_tensor_filled_twice_in_a_compiled_step_as_dcgan_labels():
    """DCGAN's ``label.fill_(fake_label)`` then ``label.fill_(real_label)``: a fill copies, so
    the label is no view of its fill value and may be written again."""
    def step(x):
        label = gc.full((x.size(0),), 1.0)
        a = x * label
        label.fill_(0.0)
        b = x * label
        label.fill_(1.0)
        label.copy_(label * 2.0)
        return a + b + x * label

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(gc.compile(step, (x,))(x), step(gc.tensor(x)).numpy())
