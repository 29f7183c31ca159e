"""Several optimizers stepped in one compiled function, each over its own parameters (the
seq2seq tutorial's encoder and decoder optimizers): the plan runs both updates every call,
as the eager function does. Eager and compiled run the same function from the same start;
the losses, parameters and optimizer state must agree to float32 rounding of the same ops
(the plan runs them in the same order: measured equal, 1e-6 leaves room for BLAS blocking).
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

RTOL = 1e-6


def build():
    gc.manual_seed(0)
    encoder, decoder = nn.Linear(3, 4), nn.Sequential(nn.Tanh(), nn.Linear(4, 1))
    enc_opt = optim.Adam(encoder.parameters(), lr=0.05)
    dec_opt = optim.SGD(decoder.parameters(), lr=0.1, momentum=0.9)
    return encoder, decoder, enc_opt, dec_opt


def step_of(encoder, decoder, enc_opt, dec_opt):
    def step(x, y):
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        loss = ((decoder(encoder(x)) - y) ** 2).mean()
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        return loss
    return step


def batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 1)).astype(np.float32))
            for _ in range(4)]


def assert_same(models_a, models_b):
    for a, b in zip(models_a, models_b):
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
            np.testing.assert_allclose(np.asarray(q), np.asarray(p), rtol=RTOL, atol=1e-7, err_msg=name)


def test_two_optimizers_train_compiled_as_eagerly_with_a_live_scheduler():
    eager_parts, compiled_parts = build(), build()
    eager, data = step_of(*eager_parts), batches()
    compiled = gc.compile(step_of(*compiled_parts), data[0])
    assert compiled.hyper_inputs == ["lr", "lr.1"]  # one learning rate per group, the first optimizer's first
    schedulers = [optim.lr_scheduler.StepLR(parts[3], step_size=1, gamma=0.5) for parts in (eager_parts,
                                                                                           compiled_parts)]
    for x, y in data:
        loss_e = eager(gc.tensor(x), gc.tensor(y))
        loss_c = compiled(x, y)
        assert float(loss_c) == pytest.approx(float(loss_e.numpy()), rel=RTOL)
        for scheduler in schedulers:
            scheduler.step()
    assert_same(eager_parts[:2], compiled_parts[:2])
    for opt_e, opt_c in zip(eager_parts[2:], compiled_parts[2:]):
        state_e, state_c = opt_e.state_dict(), opt_c.state_dict()
        assert state_e["param_groups"] == state_c["param_groups"]
        for index, slots in state_e["state"].items():
            for slot, value in slots.items():
                np.testing.assert_allclose(np.asarray(state_c["state"][index][slot]), np.asarray(value), rtol=RTOL,
                                           atol=1e-8, err_msg=f"{slot} of parameter {index}")


def test_a_plan_with_two_optimizers_saves_loads_and_resumes(tmp_path):
    eager_parts, compiled_parts = build(), build()
    eager, data = step_of(*eager_parts), batches()
    compiled = gc.compile(step_of(*compiled_parts), data[0])
    for x, y in data[:2]:
        eager(gc.tensor(x), gc.tensor(y))
        compiled(x, y)
    compiled.save(tmp_path / "two.graphc")
    loaded = gc.load(tmp_path / "two.graphc")
    for x, y in data[2:]:
        loss_e = eager(gc.tensor(x), gc.tensor(y))
        assert float(loaded(x, y)) == pytest.approx(float(loss_e.numpy()), rel=RTOL)
    state = loaded.state_dict()  # named by the functions' variables: encoder.weight, decoder.1.bias
    for prefix, module in (("encoder.", eager_parts[0]), ("decoder.", eager_parts[1])):
        for name, value in module.state_dict().items():
            np.testing.assert_allclose(state[prefix + name], np.asarray(value), rtol=RTOL, atol=1e-7, err_msg=name)


def test_saving_schedulers_of_several_optimizers_is_refused_with_what_to_do(tmp_path):
    parts = build()
    compiled = gc.compile(step_of(*parts), batches()[0])
    optim.lr_scheduler.StepLR(parts[2], step_size=1)
    with pytest.raises(gc.GraphcError, match="several optimizers"):
        compiled.save(tmp_path / "two.graphc")


def test_the_same_optimizer_twice_or_a_parameter_updated_twice_is_refused():
    encoder, decoder, enc_opt, dec_opt = build()
    both = optim.SGD(encoder.parameters(), lr=0.1)

    def twice(x, y):
        loss = ((decoder(encoder(x)) - y) ** 2).mean()
        loss.backward()
        enc_opt.step()
        enc_opt.step()
        return loss

    def overlapping(x, y):
        loss = ((decoder(encoder(x)) - y) ** 2).mean()
        loss.backward()
        enc_opt.step()
        both.step()
        return loss
    with pytest.raises(gc.TraceError, match="already called"):
        gc.compile(twice, batches()[0])
    with pytest.raises(gc.TraceError, match="already updated by another optimizer"):
        gc.compile(overlapping, batches()[0])


def test_one_optimizer_in_two_plans_keeps_one_state():
    """A step compiled again at another fixed size (a Transformer LM's plan per sequence
    length): both plans move the same Adam moments and step count, as the eager loop does."""
    def make():
        gc.manual_seed(1)
        model = nn.Linear(4, 1)
        opt = optim.Adam(model.parameters(), lr=0.05)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x).sum(1) - y) ** 2).mean()  # x: (N, T, 4), T fixed per plan
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    rng = np.random.default_rng(2)
    batches = [(rng.standard_normal((3, t, 4)).astype(np.float32), rng.standard_normal((3, 1)).astype(np.float32))
               for t in (3, 5, 3, 5, 5, 3)]
    (eager, model_e, opt_e), (step, model_c, opt_c) = make(), make()
    plans = {}
    for x, y in batches:
        plan = plans.setdefault(x.shape[1], gc.compile(step, (x, y)))
        assert float(plan(x, y)) == pytest.approx(float(eager(gc.tensor(x), gc.tensor(y)).numpy()), rel=RTOL)
    assert len(plans) == 2
    assert_same([model_e], [model_c])
    state_e, state_c = opt_e.state_dict()["state"], opt_c.state_dict()["state"]
    for index, slots in state_e.items():
        for slot, value in slots.items():
            np.testing.assert_allclose(np.asarray(state_c[index][slot]), np.asarray(value), rtol=RTOL, atol=1e-8)
