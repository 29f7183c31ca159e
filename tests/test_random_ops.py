"""Random draws inside a traced model (``gc.randn_like``, ``gc.rand(x.size(0), ...)``) are
``random`` nodes that draw anew every run from the plan's generator, as PyTorch's eager code
does every call, instead of numbers frozen into the plan when it was traced. The op's own
distribution checks are in the op table (tests/op_table.py, ``_random_table``)."""
from __future__ import annotations

import numpy as np

import graphc as gc
from graphc import nn, optim

X = np.zeros((4, 3), np.float32)


class Noisy(nn.Module):
    def forward(self, x):
        return x + gc.randn_like(x) + gc.rand(x.size(0), 3)


def test_a_compiled_model_draws_new_numbers_every_run_at_any_batch_size():
    plan = gc.compile(Noisy(), (X,))
    assert [n.op for n in plan.graph.nodes].count("random") == 2
    first, second = plan(X), plan(X)
    assert first.shape == (4, 3) and not np.array_equal(first, second)
    assert plan(np.zeros((7, 3), np.float32)).shape == (7, 3)  # the batch dim stayed symbolic


def test_the_draws_follow_the_seed_and_a_saved_plan_continues_its_stream(tmp_path):
    def run_twice():
        gc.manual_seed(5)
        plan = gc.compile(Noisy(), (X,))
        return plan, plan(X)

    plan, first = run_twice()
    np.testing.assert_array_equal(run_twice()[1], first)  # same seed, same numbers
    plan.save(tmp_path / "p.graphc")
    np.testing.assert_array_equal(gc.load(tmp_path / "p.graphc")(X), plan(X))  # the generator's state is saved


def test_eager_draws_keep_shape_dtype_and_seed():
    gc.manual_seed(1)
    a = gc.randn_like(gc.zeros(2, 3, dtype=gc.float64))
    b = gc.rand_like(gc.zeros(5))
    gc.manual_seed(1)
    assert a.dtype == gc.float64 and a.shape == (2, 3) and b.dtype == gc.float32
    np.testing.assert_array_equal(gc.randn_like(gc.zeros(2, 3, dtype=gc.float64)).numpy(), a.numpy())
    assert 0 <= b.numpy().min() and b.numpy().max() < 1


class TinyVAE(nn.Module):
    """The reparameterization trick: z = mu + exp(logvar / 2) * eps with eps = randn_like."""

    def __init__(self):
        super().__init__()
        self.encode, self.decode = nn.Linear(6, 4), nn.Linear(2, 6)

    def forward(self, x):
        mu, logvar = self.encode(x).chunk(2, dim=1)
        z = mu + (logvar * 0.5).exp() * gc.randn_like(mu)
        kl = -0.5 * (1 + logvar - mu * mu - logvar.exp()).sum(dim=1).mean()
        return self.decode(z), kl


def test_a_vae_trains_through_the_noise():
    gc.manual_seed(0)
    vae = TinyVAE()
    data = np.random.default_rng(0).standard_normal((32, 6)).astype(np.float32)
    opt = optim.Adam(vae.parameters(), lr=1e-2)

    def train_step(x):
        opt.zero_grad()
        recon, kl = vae(x)
        loss = ((recon - x) ** 2).mean() + 0.1 * kl
        loss.backward()
        opt.step()
        return loss

    step = gc.compile(train_step, (data,))
    losses = [float(step(data)) for _ in range(60)]
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])
    assert len(set(losses[:5])) == 5  # new noise every step
