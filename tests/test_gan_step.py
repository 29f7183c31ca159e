"""A GAN's classic training step compiled as written (issue 33, point 4): two ``backward()``
calls accumulating into the discriminator's ``.grad``, its optimizer stepped, then the
generator's loss read through the discriminator it just updated, and the generator's optimizer
stepped; also the same two halves compiled as two plans sharing the modules. Against PyTorch
2.13 from the same weights (``torch_ref``: recorded in tests/data/torch_test_gan_step.npz).

float64 on both sides: the same ops, summed in other orders, so 1e-9 relative leaves room for
rounding through three Adam steps and catches a gradient taken at the discriminator's old
weights (that changes the generator's update at 1e-3).
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

RTOL, ATOL = 1e-9, 1e-12
STEPS = 3


def build(lib):
    """The generator and discriminator, their Adams (DCGAN's betas) and BCELoss."""
    net_g = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 6), lib.nn.Tanh()).double()
    net_d = lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.LeakyReLU(0.2), lib.nn.Linear(8, 1),
                              lib.nn.Sigmoid()).double()
    opt_d = lib.optim.Adam(net_d.parameters(), lr=0.01, betas=(0.5, 0.999))
    opt_g = lib.optim.Adam(net_g.parameters(), lr=0.01, betas=(0.5, 0.999))
    return net_g, net_d, opt_d, opt_g, lib.nn.BCELoss()


def halves(lib, net_g, net_d, opt_d, opt_g, criterion):
    def d_step(real, noise):
        ones, zeros = lib.ones(real.shape[0], 1).double(), lib.zeros(real.shape[0], 1).double()
        net_d.zero_grad()
        err_real = criterion(net_d(real), ones)
        err_real.backward()
        fake = net_g(noise)
        err_fake = criterion(net_d(fake.detach()), zeros)
        err_fake.backward()
        opt_d.step()
        return err_real + err_fake

    def g_step(noise):
        ones = lib.ones(noise.shape[0], 1).double()
        net_g.zero_grad()
        err_g = criterion(net_d(net_g(noise)), ones)
        err_g.backward()
        opt_g.step()
        return err_g

    def train_step(real, noise):  # the step, as written: fake computed once, used twice
        ones, zeros = lib.ones(real.shape[0], 1).double(), lib.zeros(real.shape[0], 1).double()
        net_d.zero_grad()
        err_real = criterion(net_d(real), ones)
        err_real.backward()
        fake = net_g(noise)
        err_fake = criterion(net_d(fake.detach()), zeros)
        err_fake.backward()
        opt_d.step()
        net_g.zero_grad()
        err_g = criterion(net_d(fake), ones)
        err_g.backward()
        opt_g.step()
        return err_real + err_fake, err_g
    return d_step, g_step, train_step


def data():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((5, 6)), rng.standard_normal((5, 4))) for _ in range(STEPS)]


def start():
    gc.manual_seed(0)
    net_g, net_d, *_ = build(gc)
    return {f"g.{k}": np.asarray(v) for k, v in net_g.state_dict().items()} | {
        f"d.{k}": np.asarray(v) for k, v in net_d.state_dict().items()}


def run(lib, weights, how):
    """``how``: "one" (the step as one function) or "two" (d_step then g_step), eager or
    compiled ("compiled-one", "compiled-two"); returns the losses and the final weights."""
    parts = build(lib)
    net_g, net_d = parts[0], parts[1]
    for prefix, net in (("g.", net_g), ("d.", net_d)):
        net.load_state_dict({k[2:]: lib.tensor(v) for k, v in weights.items() if k.startswith(prefix)})
    d_step, g_step, train_step = halves(lib, *parts)
    batches = data()
    if how.startswith("compiled"):
        real, noise = batches[0]
        if how.endswith("one"):
            train_step = gc.compile(train_step, (real, noise))
        else:
            d_step, g_step = gc.compile(d_step, (real, noise)), gc.compile(g_step, (noise,))
    wrap = (lambda a: a) if how.startswith("compiled") else lib.tensor
    out = {}
    for i, (real, noise) in enumerate(batches):
        if how.endswith("one"):
            err_d, err_g = train_step(wrap(real), wrap(noise))
        else:
            err_d = d_step(wrap(real), wrap(noise))
            err_g = g_step(wrap(noise))
        out[f"loss{i}"] = np.array([float(np.asarray(e.detach() if hasattr(e, "detach") else e)) for e in (err_d, err_g)])
    for prefix, net in (("g.", net_g), ("d.", net_d)):
        out.update({prefix + k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v)
                    for k, v in net.state_dict().items()})
    return out


@pytest.mark.parametrize("how", ["one", "two", "compiled-one", "compiled-two"])
def test_gan_step_matches_torch(how, torch_ref):
    weights = start()

    def torch_run():
        import torch

        return run(torch, weights, how.replace("compiled-", ""))
    want = torch_ref([weights, data(), how.replace("compiled-", "")], torch_run, name=how.replace("compiled-", ""))
    got = run(gc, weights, how)
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=RTOL, atol=ATOL, err_msg=key)


def test_the_generator_loss_is_differentiated_through_the_updated_discriminator():
    """One plan, as the step is written: the gradient node of the generator's loss reads the
    discriminator's updated weights (the optimizer's outputs), not the ones the step began with."""
    gc.manual_seed(0)
    parts = build(gc)
    *_, train_step = halves(gc, *parts)
    real, noise = data()[0]
    plan = gc.compile(train_step, (real, noise))
    updated = {v.name for v in plan.graph.updates.values()}
    reads = [n for n in plan.graph.nodes if n.op == "stop_gradient" and n.inputs[0].name in updated]
    assert reads, "the generator's half reads the discriminator through its updated weights"


def test_a_loss_reading_a_parameter_before_and_after_its_update_is_refused():
    gc.manual_seed(0)
    layer = nn.Linear(3, 1).double()
    opt = optim.SGD(layer.parameters(), lr=0.1)

    def step(x):
        before = layer(x).sum()
        before.backward()
        opt.step()
        after = layer(x).sum() + before * 0.5
        after.backward()
        return after
    with pytest.raises(gc.TraceError, match="before and after its update"):
        gc.compile(step, (np.ones((2, 3)),))
