"""graphc.distributions against torch.distributions 2.13, and traced into compiled steps.

- Values: log_prob, entropy, mean, variance, stddev, cdf, probs/logits and the MVN matrices of
  every distribution on the same float64 parameters, and the gradients of
  ``log_prob(x).sum() + entropy().sum()`` w.r.t. every parameter (torch.autograd.grad), via
  the ``torch_ref`` fixture (recorded in tests/data/torch_test_distributions.npz). rtol 1e-9.
- Sampling: graphc's generator is not torch's, so samples are checked by their statistics
  (means, variances, frequencies within 5 standard errors at a fixed seed) and by
  determinism under ``gc.manual_seed``; compiled plans draw fresh numbers each run.
- Compiled steps: REINFORCE and actor-critic updates (a policy net, ``Categorical(logits)``,
  ``log_prob(action) * advantage``, an optimizer step) equal the same step run eagerly on the
  same sampled actions; ``rsample`` gradients through a compiled step match the closed form.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.distributions import Bernoulli, Categorical, MultivariateNormal, Normal, Uniform
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

RTOL, ATOL = 1e-9, 1e-12


def _spd(rng, batch, n):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _case(name, rng):
    """(constructor kwargs as float64 numpy, a value to score, the parameters to differentiate)."""
    if name == "categorical_logits":
        return {"logits": rng.standard_normal((3, 5))}, rng.integers(0, 5, (4, 3)), ["logits"]
    if name == "categorical_probs":
        p = rng.random((2, 4)) + 0.1
        return {"probs": p / p.sum(-1, keepdims=True)}, rng.integers(0, 4, (2,)), ["probs"]
    if name == "bernoulli_probs":
        return {"probs": rng.uniform(0.05, 0.95, (3, 4))}, rng.integers(0, 2, (2, 3, 4)).astype(np.float64), ["probs"]
    if name == "bernoulli_logits":
        return {"logits": rng.standard_normal((5,)) * 3}, rng.integers(0, 2, (5,)).astype(np.float64), ["logits"]
    if name == "normal":
        return ({"loc": rng.standard_normal((3,)), "scale": rng.uniform(0.5, 2.0, (3,))},
                rng.standard_normal((4, 3)), ["loc", "scale"])
    if name == "uniform":
        low = rng.standard_normal((3,))
        high = low + rng.uniform(0.5, 2.0, (3,))
        return {"low": low, "high": high}, low + (high - low) * rng.random((4, 3)), ["low", "high"]
    if name == "mvn_scale_tril":
        tril = np.tril(rng.standard_normal((2, 3, 3)))
        tril[..., np.arange(3), np.arange(3)] = rng.uniform(0.5, 1.5, (2, 3))
        return ({"loc": rng.standard_normal((2, 3)), "scale_tril": tril}, rng.standard_normal((4, 2, 3)),
                ["loc", "scale_tril"])
    if name == "mvn_covariance":
        return ({"loc": rng.standard_normal((3,)), "covariance_matrix": _spd(rng, (2,), 3)},
                rng.standard_normal((4, 2, 3)), ["loc", "covariance_matrix"])
    if name == "mvn_precision":
        return ({"loc": rng.standard_normal((2, 4)), "precision_matrix": _spd(rng, (), 4)},
                rng.standard_normal((2, 4)), ["loc", "precision_matrix"])
    raise KeyError(name)


CASES = ["categorical_logits", "categorical_probs", "bernoulli_probs", "bernoulli_logits", "normal", "uniform",
         "mvn_scale_tril", "mvn_covariance", "mvn_precision"]
CLASSES = {"categorical": Categorical, "bernoulli": Bernoulli, "normal": Normal, "uniform": Uniform,
           "mvn": MultivariateNormal}


def _outputs(name):
    out = ["log_prob", "entropy"]
    if name.startswith(("categorical", "bernoulli")):
        out += ["probs", "logits"]
    if not name.startswith("categorical"):
        out += ["mean", "variance", "stddev"]
    if name in ("normal", "uniform"):
        out += ["cdf"]
    if name.startswith("mvn"):
        out += ["scale_tril", "covariance_matrix", "precision_matrix"]
    return out


def _evaluate(dist, value, name):
    got = {}
    for key in _outputs(name):
        if key in ("log_prob", "cdf"):
            got[key] = getattr(dist, key)(value)
        elif key == "entropy":
            got[key] = dist.entropy()
        else:
            got[key] = getattr(dist, key)
    return got


def _symmetric(a, wrt):
    """PyTorch's and graphc's gradients w.r.t. a full covariance/precision matrix differ by how
    the matrix's symmetry is used (torch's Cholesky backward symmetrises); compare (G + G^T)/2."""
    return (a + np.swapaxes(a, -1, -2)) / 2 if wrt in ("covariance_matrix", "precision_matrix") else a


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_match_torch(name, torch_ref):
    kwargs, value, wrt = _case(name, np.random.default_rng(CASES.index(name)))
    cls = CLASSES[name.split("_")[0]]

    def compute():
        params = {k: torch.tensor(v, requires_grad=k in wrt) for k, v in kwargs.items()}
        dist = getattr(torch.distributions, cls.__name__)(**params)
        out = {k: v.detach().numpy() for k, v in _evaluate(dist, torch.tensor(value), name).items()}
        total = dist.log_prob(torch.tensor(value)).sum() + dist.entropy().sum()
        for k, g in zip(wrt, torch.autograd.grad(total, [params[k] for k in wrt])):
            out[f"grad_{k}"] = g.numpy()
        return out

    want = torch_ref([name, kwargs, value], compute)
    params = {k: gc.tensor(v, requires_grad=k in wrt) for k, v in kwargs.items()}
    dist = cls(**params)
    for key, got in _evaluate(dist, gc.tensor(value), name).items():
        assert got.dtype == gc.float64, key
        np.testing.assert_allclose(got.numpy(), want[key], rtol=RTOL, atol=ATOL, err_msg=key)
    (dist.log_prob(gc.tensor(value)).sum() + dist.entropy().sum()).backward()
    for k in wrt:
        np.testing.assert_allclose(_symmetric(params[k].grad.numpy(), k), _symmetric(want[f"grad_{k}"], k),
                                   rtol=1e-7, atol=1e-10, err_msg=f"grad {k}")


def test_shapes_and_torch_alias():
    import graphc as torch_alias

    assert torch_alias.distributions.Categorical is Categorical
    d = Categorical(logits=gc.zeros(2, 3, 5))
    assert (d.batch_shape, d.event_shape, d.sample().shape, d.sample((4,)).shape) == ((2, 3), (), (2, 3), (4, 2, 3))
    assert d.sample().dtype == gc.int64 and d.enumerate_support().shape == (5, 2, 3)
    n = Normal(gc.zeros(3), 1.0)
    assert (n.batch_shape, n.rsample((2, 4)).shape) == ((3,), (2, 4, 3))
    assert Normal(0.0, 1.0).sample((7,)).shape == (7,) and Normal(0.0, 1.0).batch_shape == ()
    m = MultivariateNormal(gc.zeros(4, 2), scale_tril=gc.tensor(np.eye(2, dtype=np.float32)))
    assert (m.batch_shape, m.event_shape, m.rsample((3,)).shape) == ((4,), (2,), (3, 4, 2))
    assert Bernoulli(probs=gc.full((3,), 0.5)).sample((2,)).dtype == gc.float32
    assert not Categorical.has_rsample and Normal.has_rsample and MultivariateNormal.has_rsample


@pytest.mark.parametrize("build, message", [
    (lambda: Normal(0.0, -1.0), "Expected parameter scale (Tensor of shape ()) of distribution Normal(loc: 0.0, "
     "scale: -1.0) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:"),
    (lambda: Categorical(), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: Bernoulli(probs=0.5, logits=0.0), "Either `probs` or `logits` must be specified, but not both."),
    (lambda: Categorical(logits=gc.tensor(1.0)), "`logits` parameter must be at least one-dimensional."),
    (lambda: Categorical(logits=gc.zeros(3)).log_prob(gc.tensor(3)),
     "Expected value argument (Tensor of shape ()) to be within the support (IntegerInterval(lower_bound=0, "
     "upper_bound=2)) of the distribution Categorical(logits: Size([3])), but found invalid values:"),
    (lambda: Bernoulli(probs=gc.tensor([0.5, 1.5])), "Expected parameter probs (Tensor of shape (2,)) of distribution "
     "Bernoulli(probs: Size([2])) to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: Uniform(1.0, 0.0), "Expected parameter low (Tensor of shape ()) of distribution Uniform(low: 1.0, "
     "high: 0.0) to satisfy the constraint LessThan(upper_bound=0.0), but found invalid values:"),
    (lambda: Uniform(0.0, 1.0).log_prob(gc.tensor(2.0)), "to be within the support (Interval(lower_bound=0.0, "
     "upper_bound=1.0)) of the distribution Uniform(low: 0.0, high: 1.0)"),
    (lambda: Normal(0.0, 1.0).log_prob(1.0), "The value argument to log_prob must be a Tensor"),
    (lambda: MultivariateNormal(gc.tensor(0.0), gc.ones(1, 1)), "loc must be at least one-dimensional."),
    (lambda: MultivariateNormal(gc.zeros(2)),
     "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."),
    (lambda: MultivariateNormal(gc.zeros(2), scale_tril=gc.ones(2)),
     "scale_tril matrix must be at least two-dimensional, with optional leading batch dimensions"),
    (lambda: MultivariateNormal(gc.zeros(2), scale_tril=gc.ones(2, 2)), "LowerCholesky()"),
    (lambda: MultivariateNormal(gc.zeros(2), covariance_matrix=-gc.ones(2, 2)), "PositiveDefinite()"),
])
def test_validation_messages_are_pytorchs(build, message):
    with pytest.raises(ValueError) as e:
        build()
    assert message in str(e.value)


def test_validate_args_false_skips_checks():
    assert Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    gc.distributions.Distribution.set_default_validate_args(False)
    try:
        assert np.isinf(Uniform(0.0, 1.0).log_prob(gc.tensor(2.0)).item())
    finally:
        gc.distributions.Distribution.set_default_validate_args(True)


def _within(samples, mean, var, what):
    """The sample mean within 5 standard errors of ``mean``, the sample variance within 5%."""
    n = samples.shape[0]
    np.testing.assert_array_less(np.abs(samples.mean(0) - mean), 5 * np.sqrt(var / n) + 1e-12, err_msg=what)
    np.testing.assert_allclose(samples.var(0), var, rtol=0.05, err_msg=what)


def test_sampling_statistics():
    gc.manual_seed(7)
    n = 40000
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    s = Categorical(probs=gc.tensor(probs)).sample((n,)).numpy()
    freq = np.stack([(s == k).mean(0) for k in range(3)], -1)
    np.testing.assert_array_less(np.abs(freq - probs), 5 * np.sqrt(probs * (1 - probs) / n))
    logits = np.array([0.3, -1.0, 2.0, 0.0])
    s = Categorical(logits=gc.tensor(logits)).sample((n,)).numpy()
    p = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_array_less(np.abs(np.bincount(s, minlength=4) / n - p), 5 * np.sqrt(p * (1 - p) / n))
    p = np.array([0.05, 0.5, 0.9])
    _within(Bernoulli(probs=gc.tensor(p)).sample((n,)).numpy(), p, p * (1 - p), "bernoulli")
    loc, scale = np.array([-1.0, 0.0, 3.0]), np.array([0.5, 1.0, 2.0])
    _within(Normal(gc.tensor(loc), gc.tensor(scale)).sample((n,)).numpy(), loc, scale ** 2, "normal")
    low, high = np.array([-1.0, 2.0]), np.array([1.0, 5.0])
    s = Uniform(gc.tensor(low), gc.tensor(high)).rsample((n,)).numpy()
    _within(s, (low + high) / 2, (high - low) ** 2 / 12, "uniform")
    assert ((s >= low) & (s < high)).all()
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    mu = np.array([1.0, -2.0, 0.5])
    s = MultivariateNormal(gc.tensor(mu), covariance_matrix=gc.tensor(cov)).sample((n,)).numpy()
    _within(s, mu, np.diag(cov), "mvn")
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.05)


def test_seeding_is_deterministic():
    def draws():
        return [Categorical(logits=gc.zeros(6)).sample((5,)).numpy(), Normal(0.0, 1.0).sample((3,)).numpy(),
                Bernoulli(probs=0.3).sample((4,)).numpy(), Uniform(0.0, 2.0).sample((2,)).numpy(),
                MultivariateNormal(gc.zeros(2), scale_tril=gc.ones(2, 2).tril()).sample((2,)).numpy()]

    gc.manual_seed(3)
    first = draws()
    gc.manual_seed(3)
    again = draws()
    gc.manual_seed(4)
    other = draws()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other))


def test_compiled_sampling_draws_fresh_values_each_run_and_is_seeded():
    mu = np.zeros((64, 3), np.float32)

    def sample(mu):
        return (Categorical(logits=mu).sample(), Normal(mu, 1.0).rsample(), Normal(0.0, 1.0).sample((8,)),
                Bernoulli(logits=mu).sample(), Uniform(mu, mu + 1).rsample(),
                MultivariateNormal(mu, scale_tril=gc.ones(3, 3).tril()).rsample())

    runs = []
    for _ in range(2):
        gc.manual_seed(11)
        plan = gc.compile(sample, example_inputs=(mu,))
        runs.append([plan(mu), plan(mu)])
    for a, b, c, d in zip(runs[0][0], runs[0][1], runs[1][0], runs[1][1]):
        assert not np.array_equal(a, b)  # a random node, not numbers frozen at trace time
        np.testing.assert_array_equal(a, c)  # the plan's generator is seeded from gc.manual_seed
        np.testing.assert_array_equal(b, d)
    cat = np.concatenate([runs[0][0][0], runs[0][1][0]])
    assert set(np.unique(cat)) == {0, 1, 2}
    small = plan(mu[:5])  # the batch size stays symbolic
    assert [a.shape for a in small] == [(5,), (5, 3), (8,), (5, 3), (5, 3), (5, 3)]


def _policy(seed, critic=False):
    gc.manual_seed(seed)
    trunk = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
    heads = nn.ModuleList([nn.Linear(16, 3)] + ([nn.Linear(16, 1)] if critic else []))
    return nn.ModuleDict({"trunk": trunk, "heads": heads})


def _episodes(rng, steps=3, batch=8):
    return [(rng.standard_normal((batch, 4)).astype(np.float32), rng.integers(0, 3, batch),
             rng.standard_normal(batch).astype(np.float32)) for _ in range(steps)]


@pytest.mark.parametrize("critic", [False, True], ids=["reinforce", "actor_critic"])
def test_compiled_policy_gradient_step_matches_eager(critic):
    def make():
        net = _policy(5, critic)
        opt = optim.Adam(net.parameters(), lr=1e-2) if critic else optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        trunk, heads = net["trunk"], net["heads"]

        def step(obs, action, ret):
            opt.zero_grad()
            h = trunk(obs)
            dist = Categorical(logits=heads[0](h))
            if critic:
                value = heads[1](h).squeeze(-1)
                advantage = ret - value.detach()
                loss = (-(dist.log_prob(action) * advantage).mean() + 0.5 * ((value - ret) ** 2).mean()
                        - 0.01 * dist.entropy().mean())
            else:
                loss = -(dist.log_prob(action) * ret).mean()
            loss.backward()
            opt.step()
            return loss

        return net, step

    data = _episodes(np.random.default_rng(2))
    eager_net, eager_step = make()
    eager_losses = [eager_step(gc.tensor(o), gc.tensor(a), gc.tensor(r)).item() for o, a, r in data]
    net, step = make()
    plan = gc.compile(step, example_inputs=data[0])
    losses = [float(plan(*batch)) for batch in data]
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    state = net.state_dict()  # the plan writes its parameters back to the module
    for k, v in eager_net.state_dict().items():
        np.testing.assert_allclose(np.asarray(state[k]), np.asarray(v), rtol=1e-5, atol=1e-6, err_msg=k)


def test_compiled_rsample_gradient_matches_closed_form():
    """loss = sum(x^2), x = loc + eps * exp(log_scale): d/dloc = 2 sum x, d/dlog_scale = 2 sum x * (x - loc)."""
    gc.manual_seed(0)
    model = nn.Module()
    model.loc = loc = nn.Parameter(gc.tensor([0.5, -1.0]))
    model.log_scale = log_scale = nn.Parameter(gc.tensor([0.0, -0.5]))
    opt = optim.SGD(model.parameters(), lr=1.0)

    def step(k):
        opt.zero_grad()
        x = Normal(model.loc, model.log_scale.exp()).rsample((k.shape[0],))
        loss = (x ** 2).sum()
        loss.backward()
        opt.step()
        return loss, x

    plan = gc.compile(step, example_inputs=(np.zeros(16, np.float32),))
    before = loc.detach().numpy().copy(), log_scale.detach().numpy().copy()
    loss, x = plan(np.zeros(64, np.float32))
    assert x.shape == (64, 2)
    np.testing.assert_allclose(loss, (x ** 2).sum(), rtol=1e-5)
    got_loc, got_ls = loc.detach().numpy(), log_scale.detach().numpy()
    np.testing.assert_allclose(got_loc, before[0] - 2 * x.sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_ls, before[1] - 2 * (x * (x - before[0])).sum(0), rtol=1e-4, atol=1e-4)
    _, x2 = plan(np.zeros(64, np.float32))
    assert not np.allclose(x, x2)


def test_reinforce_log_prob_gradient_matches_torch(torch_ref):
    """Eager REINFORCE loss gradient w.r.t. the logits, float64, against torch."""
    rng = np.random.default_rng(9)
    logits, action, adv = rng.standard_normal((6, 4)), rng.integers(0, 4, 6), rng.standard_normal(6)

    def compute():
        t = torch.tensor(logits, requires_grad=True)
        d = torch.distributions.Categorical(logits=t)
        loss = -(d.log_prob(torch.tensor(action)) * torch.tensor(adv)).mean() - 0.1 * d.entropy().mean()
        loss.backward()
        return {"loss": loss.detach().numpy(), "grad": t.grad.numpy()}

    want = torch_ref([logits, action, adv], compute)
    t = gc.tensor(logits, requires_grad=True)
    d = Categorical(logits=t)
    loss = -(d.log_prob(gc.tensor(action)) * gc.tensor(adv)).mean() - 0.1 * d.entropy().mean()
    loss.backward()
    np.testing.assert_allclose(loss.numpy(), want["loss"], rtol=RTOL)
    np.testing.assert_allclose(t.grad.numpy(), want["grad"], rtol=1e-9, atol=1e-12)


class _Fit(nn.Module):
    """Learnable parameters of every distribution, fitted by maximum likelihood."""

    def __init__(self):
        super().__init__()
        self.logits = nn.Parameter(gc.zeros(3))
        self.b_logit = nn.Parameter(gc.tensor([0.3, -0.2]))
        self.loc = nn.Parameter(gc.tensor([0.1, -0.1]))
        self.log_scale = nn.Parameter(gc.tensor([0.2, -0.3]))
        self.tril = nn.Parameter(gc.tensor(np.array([[1.0, 0.0], [0.3, 0.8]], np.float32)))
        self.low = nn.Parameter(gc.tensor([-3.0, -2.6]))

    def forward(self, k, b, x):
        tril = self.tril.tril()  # the optimizer moves the whole matrix; the factor is its lower part
        mvn = MultivariateNormal(self.loc, scale_tril=tril)
        cov = MultivariateNormal(self.loc, covariance_matrix=tril @ tril.T)
        terms = [Categorical(logits=self.logits).log_prob(k), Bernoulli(logits=self.b_logit).log_prob(b).sum(-1),
                 Normal(self.loc, self.log_scale.exp()).log_prob(x).sum(-1), mvn.log_prob(x), cov.log_prob(x),
                 Uniform(self.low, gc.tensor([3.0, 3.0])).log_prob(x).sum(-1)]
        ent = (Categorical(logits=self.logits).entropy() + Normal(self.loc, self.log_scale.exp()).entropy().sum()
               + mvn.entropy() + Bernoulli(logits=self.b_logit).entropy().sum())
        return -sum(t.mean() for t in terms) - 0.1 * ent


def test_compiled_maximum_likelihood_step_matches_eager_for_every_distribution():
    rng = np.random.default_rng(4)
    data = [(rng.integers(0, 3, 16), rng.integers(0, 2, (16, 2)).astype(np.float32),
             rng.uniform(-2, 2, (16, 2)).astype(np.float32)) for _ in range(3)]

    def make():
        model = _Fit()
        opt = optim.SGD(model.parameters(), lr=0.05)

        def step(k, b, x):
            opt.zero_grad()
            loss = model(k, b, x)
            loss.backward()
            opt.step()
            return loss

        return model, step

    eager_model, eager_step = make()
    eager = [eager_step(*(gc.tensor(a) for a in batch)).item() for batch in data]
    model, step = make()
    plan = gc.compile(step, example_inputs=data[0])
    np.testing.assert_allclose([float(plan(*batch)) for batch in data], eager, rtol=1e-5, atol=1e-6)
    for key, value in eager_model.state_dict().items():
        np.testing.assert_allclose(np.asarray(model.state_dict()[key]), np.asarray(value), rtol=1e-5, atol=1e-6,
                                   err_msg=key)
    assert float(plan(*(a[:5] for a in data[0]))) == pytest.approx(eager_model(*(gc.tensor(a[:5]) for a in data[0])).item(),
                                                                   rel=1e-5)
