"""PyTorch parity (values, dtypes, shapes and gradients) of issue #34's reduction and shape
composites (graphc/ops/reductions_more.py, shaping_more.py): all/any, prod, cumsum, cumprod,
count_nonzero, var/std (correction, unbiased), var_mean/std_mean, logsumexp, amin, norm, flip,
fliplr/flipud, roll, movedim/moveaxis, diagonal, diag, diag_embed, eye, linspace, logspace.
They are composites, so they have no op-table rows (the table holds IR ops); the inputs hold
zeros (a zero column too) so prod/cumprod's gradient at zeros is checked. Also the compiled
plans: a symbolic batch dim passes where the op allows and is refused with a TraceError where
the composite needs the dim's size.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

_A = np.random.default_rng(20261130).standard_normal((3, 4, 5)).astype(np.float32)
_A[0, 1, 2] = 0
_A[1, :, 3] = 0

CASES = {
    "all": lambda m, x: x.all(1),
    "any_dims_keepdim": lambda m, x: m.any(x, dim=(0, 2), keepdim=True),
    "all_bool": lambda m, x: (x > 0).all(),
    "prod": lambda m, x: x.prod(1),
    "prod_keepdim": lambda m, x: m.prod(x, 2, keepdim=True),
    "prod_all": lambda m, x: x[1].prod(),
    "prod_int": lambda m, x: (x > 0).prod(0),
    "cumsum": lambda m, x: x.cumsum(1),
    "cumsum_bool": lambda m, x: (x > 0).cumsum(2),
    "cumprod": lambda m, x: x.cumprod(1),
    "count_nonzero": lambda m, x: m.count_nonzero(x, (0, 2)),
    "var": lambda m, x: x.var(1),
    "var_correction0": lambda m, x: x.var((0, 2), correction=0, keepdim=True),
    "var_all": lambda m, x: x.var(),
    "std_biased": lambda m, x: x.std(2, unbiased=False),
    "var_mean": lambda m, x: m.var_mean(x, 1)[0] + m.var_mean(x, 1)[1],
    "std_mean": lambda m, x: m.std_mean(x, 1)[0] * m.std_mean(x, 1)[1],
    "logsumexp": lambda m, x: x.logsumexp(1),
    "logsumexp_dims": lambda m, x: m.logsumexp(x, (0, 2), keepdim=True),
    "amin": lambda m, x: x.amin((0, 1)),
    "norm": lambda m, x: x.norm(),
    "norm_of_zeros": lambda m, x: x[1, :, 3].norm() + x.std(1).sum(),
    "norm1": lambda m, x: x.norm(1, dim=1),
    "norm_inf": lambda m, x: x.norm(float("inf"), 2, True),
    "norm3": lambda m, x: x.norm(3, 0),
    "flip": lambda m, x: x.flip(0, 2),
    "flip_dims": lambda m, x: m.flip(x, dims=[1]),
    "fliplr": lambda m, x: m.fliplr(x),
    "flipud": lambda m, x: m.flipud(x),
    "roll_flat": lambda m, x: x.roll(2),
    "roll_dims": lambda m, x: m.roll(x, (1, -2), (0, 2)),
    "movedim": lambda m, x: m.movedim(x, (0, 1), (2, 0)),
    "moveaxis": lambda m, x: x.moveaxis(0, -1),
    "diagonal": lambda m, x: x.diagonal(),
    "diagonal_negative": lambda m, x: m.diagonal(x, -1, 2, 0),
    "diagonal_offset": lambda m, x: x.diagonal(2, 1, 2),
    "diag_vector": lambda m, x: m.diag(x[0, 0], 1),
    "diag_vector_below": lambda m, x: m.diag(x[0, 0], -2),
    "diag_matrix": lambda m, x: m.diag(x[0], -1),
    "diag_embed": lambda m, x: m.diag_embed(x, 1, 0, 2),
    "diag_embed_default": lambda m, x: x.diag_embed(),
    "eye": lambda m, x: m.eye(3, 4) + x[0, :3, :4],
    "linspace": lambda m, x: m.linspace(-1, 2.5, 7) + x[0, 0, 0],
    "logspace": lambda m, x: m.logspace(-1, 2.5, 7, base=2) + x[0, 0, 0],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch_values_and_gradients(name):
    fn = CASES[name]
    t, g = torch.tensor(_A, requires_grad=True), gc.tensor(_A, requires_grad=True)
    expected, got = fn(torch, t), fn(gc, g)
    assert tuple(got.shape) == tuple(expected.shape)
    assert str(expected.dtype).split(".")[-1] == np.dtype(got.dtype.numpy).name.replace("bool_", "bool")
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    if expected.dtype.is_floating_point:
        (expected * expected).sum().backward()
        (got * got).sum().backward()
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_compiled_with_a_symbolic_batch_dim():
    def model(x):
        return (x.var(0), x.std(1, correction=0), x.prod(1), x.cumsum(1), x.cumprod(1), x.logsumexp(0),
                x.all(1), x.flip(1), x.roll(1, 1), x.norm(dim=1), x.amin(0))
    plan = gc.compile(model, [gc.ones(4, 3)])
    a = _A[:, :, 0].T.copy()  # (5, 3): another batch size than traced
    for got, want in zip(plan(gc.tensor(a)), model(torch.tensor(a))):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [lambda x: x.cumsum(0), lambda x: x.cumprod(0), lambda x: x.prod(0),
                                lambda x: x.flip(0), lambda x: x.roll(1, 0), lambda x: x.prod()])
def test_along_the_batch_dim_compiles_at_the_example_batch(fn):
    """An op that needs the batch size (a cumsum along it) traces again at the example's batch
    size, as torch.compile specializes: the plan matches eager there and refuses another batch
    size naming the op and the source line."""
    x = _A[:, :, 0].T[:4].copy()  # (4, 3)
    plan = gc.compile(fn, [x])
    np.testing.assert_allclose(plan(x), fn(gc.tensor(x)).numpy(), rtol=1e-6)
    with pytest.raises(gc.ShapeError, match=r"only runs at batch size 4, got 5.*(batch|symbolic) dim.*test_reductions_shape_more.py:\d+"):
        plan(np.ones((5, 3), np.float32))
