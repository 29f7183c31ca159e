"""graphc/ops/random_more.py: randint, normal with tensor parameters, bernoulli, multinomial
and the in-place exponential_/cauchy_/geometric_/log_normal_/bernoulli_ draws. Random values
are not PyTorch's stream, so the checks are statistical (seeded, with bounds several standard
errors wide: 20,000 draws give a standard error of the mean below 1% of the scale), plus
shapes, dtypes, seeding, gradients and fresh draws in compiled plans."""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc

N = 20_000


def test_randint_forms_bounds_and_dtype():
    gc.manual_seed(0)
    a = gc.randint(10, (N,)).numpy()
    b = gc.randint(-3, 4, size=(50, 40)).numpy()
    assert a.dtype == np.int64 and a.min() == 0 and a.max() == 9
    assert b.shape == (50, 40) and b.min() == -3 and b.max() == 3
    assert abs(a.mean() - 4.5) < 0.1  # sd 2.87 / sqrt(20000) = 0.02
    assert gc.randint(5, (3,), dtype=gc.float32).dtype == gc.float32
    assert gc.randint_like(gc.zeros(4, 2), 2, 6).dtype == gc.float32
    with pytest.raises(gc.GraphcError, match="low < high"):
        gc.randint(5, 5, (2,))


def test_seeded_draws_repeat():
    gc.manual_seed(7)
    first = gc.randint(100, (20,)).numpy(), gc.multinomial(gc.ones(10), 5).numpy()
    gc.manual_seed(7)
    again = gc.randint(100, (20,)).numpy(), gc.multinomial(gc.ones(10), 5).numpy()
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)


def test_normal_with_tensor_parameters_and_its_gradient():
    gc.manual_seed(1)
    mean = gc.full((N,), 2.0, requires_grad=True)
    std = gc.full((N,), 0.5, requires_grad=True)
    x = gc.normal(mean, std)
    assert abs(float(x.mean()) - 2.0) < 0.02 and abs(float(x.std()) - 0.5) < 0.02
    x.sum().backward()
    np.testing.assert_array_equal(mean.grad.numpy(), np.ones(N, np.float32))  # d(mean + std eps)/dmean = 1
    eps = (x.detach().numpy() - 2.0) / 0.5
    np.testing.assert_allclose(std.grad.numpy(), eps, rtol=1e-5, atol=1e-5)  # float32 rounding of (x - 2) / 0.5
    assert gc.normal(1.0, 2.0, size=(3, 4)).shape == (3, 4)
    assert gc.normal(gc.zeros(3, 1), 1.0).shape == (3, 1)


def test_bernoulli_and_its_zero_gradient():
    gc.manual_seed(2)
    p = gc.full((N,), 0.3, requires_grad=True)
    x = gc.bernoulli(p)
    assert set(np.unique(x.detach().numpy())) <= {0.0, 1.0} and abs(float(x.mean()) - 0.3) < 0.02
    x.sum().backward()  # PyTorch's derivative of a draw: zero
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(N, np.float32))
    assert abs(float(gc.zeros(N).bernoulli_(0.8).mean()) - 0.8) < 0.02


def test_multinomial_with_and_without_replacement():
    gc.manual_seed(3)
    w = gc.tensor([[1.0, 0.0, 3.0, 0.0], [0.0, 2.0, 0.0, 2.0]])
    drawn = gc.multinomial(w, N, replacement=True).numpy()
    assert drawn.shape == (2, N) and drawn.dtype == np.int64
    assert set(np.unique(drawn[0])) == {0, 2} and set(np.unique(drawn[1])) == {1, 3}
    assert abs((drawn[0] == 2).mean() - 0.75) < 0.02
    rows = gc.multinomial(gc.ones(3, 6), 6).numpy()
    assert all(sorted(r) == list(range(6)) for r in rows)  # without replacement: a permutation
    first = np.array([gc.multinomial(gc.tensor([1.0, 8.0, 1.0]), 1).item() for _ in range(300)])
    assert 0.7 < (first == 1).mean() < 0.9
    with pytest.raises(gc.GraphcError, match="at most 3"):
        gc.multinomial(gc.ones(3), 4)


@pytest.mark.parametrize("method, args, mean, var", [
    ("exponential_", (2.0,), 0.5, 0.25),
    ("geometric_", (0.25,), 4.0, 12.0),
    ("log_normal_", (0.0, 0.5), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
])
def test_in_place_draws_have_their_moments(method, args, mean, var):
    gc.manual_seed(4)
    x = getattr(gc.zeros(N, dtype=gc.float64), method)(*args).numpy()
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / N)
    assert abs(x.var() - var) < 0.1 * var


def test_cauchy_median_and_quartiles():
    gc.manual_seed(5)
    x = gc.zeros(N).cauchy_(1.0, 2.0).numpy()
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(med - 1.0) < 0.1 and abs((q3 - q1) / 2 - 2.0) < 0.15  # the quartiles are median -+ sigma


def test_compiled_plans_draw_fresh_values_every_run():
    def sample(x):
        return gc.randint_like(x, 0, 1000), gc.bernoulli(x), gc.normal(x, 1.0), x.clone().exponential_()

    x = np.full((4, 8), 0.5, np.float32)
    plan = gc.compile(sample, (x,))
    one, two = plan(x), plan(x)
    for a, b in zip(one, two):
        assert a.shape == (4, 8) and not np.array_equal(a, b)
    assert plan(np.full((6, 8), 0.5, np.float32))[0].shape == (6, 8)  # the batch stays symbolic
