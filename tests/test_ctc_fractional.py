"""F.fractional_max_pool2d/3d and F.ctc_loss against PyTorch in float64 (values, indices and
gradients, through tests/test_nn_functional_more.py's comparison), and their compiled plans.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
import test_nn_functional_more as base  # noqa: E402  (the float64 comparison)

_const = base._const


@pytest.mark.parametrize("n, shape, kernel, out", [(2, (2, 3, 7, 9), (2, 3), (4, 5)), (3, (2, 2, 5, 6, 7), (2, 2, 3), (3, 4, 3)),
                                                    (2, (3, 8, 8), 2, (4, 4))], ids=["2d", "3d", "2d_unbatched"])
def test_fractional_max_pool_matches_torch(n, shape, kernel, out):
    r = np.random.default_rng(9)
    samples = _const(r.random((shape[0] if len(shape) == n + 2 else 1, shape[-n - 1], n)))
    name = f"fractional_max_pool{n}d"
    case = ("", lambda x, u: getattr(F, name)(x, kernel, output_size=out, return_indices=True, _random_samples=u),
            lambda x, u: getattr(TF, name)(x, kernel, output_size=out, return_indices=True, _random_samples=u),
            [r.standard_normal(shape), samples], {})
    base.test_matches_torch_float64(case)


def test_fractional_max_pool_draws_windows_in_a_plan():
    x = np.random.default_rng(2).standard_normal((3, 2, 9, 9)).astype(np.float32)
    plan = gc.compile(lambda t: F.fractional_max_pool2d(t, 2, output_ratio=0.5), example_inputs=(x,))
    out = np.asarray(plan(x[:2]))
    assert out.shape == (2, 2, 4, 4)
    assert np.isin(out, x[:2]).all()  # every output is one of the input values


def _ctc_inputs():
    r = np.random.default_rng(12)
    x = r.standard_normal((12, 3, 5))
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    targets = r.integers(1, 5, (3, 4))
    targets[0, 1] = targets[0, 2]  # a repeated label needs a blank between
    return lp, targets


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_matches_torch(reduction, zero_infinity):
    lp, targets = _ctc_inputs()
    kw = {"reduction": reduction, "zero_infinity": zero_infinity}
    case = ("", lambda p, t: F.ctc_loss(p, t, [12, 9, 7], [4, 2, 0], **kw),
            lambda p, t: TF.ctc_loss(p, t, [12, 9, 7], [4, 2, 0], **kw), [lp, targets], {})
    base.test_matches_torch_float64(case)


def test_ctc_loss_concatenated_targets_and_infeasible():
    lp, targets = _ctc_inputs()
    flat = np.concatenate([targets[0], targets[1, :2]])
    got = F.ctc_loss(gc.tensor(lp), gc.tensor(flat), [12, 9, 7], [4, 2, 0], reduction="none").numpy()
    want = TF.ctc_loss(torch.tensor(lp), torch.tensor(flat), [12, 9, 7], [4, 2, 0], reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9)
    short = F.ctc_loss(gc.tensor(lp), gc.tensor(targets), [3, 9, 7], [4, 2, 0], reduction="none").numpy()
    assert np.isinf(short[0]) and np.isfinite(short[1:]).all()


def test_ctc_loss_compiles_batch_first():
    lp, targets = _ctc_inputs()
    x = np.ascontiguousarray(lp.transpose(1, 0, 2)).astype(np.float32)  # (N, T, C): the batch first
    lens, tlens = np.array([12, 9, 7]), np.array([4, 2, 1])

    def fn(x, t, il, tl):
        return F.ctc_loss(x.transpose(0, 1), t, il, tl, reduction="none")

    plan = gc.compile(fn, example_inputs=(x, targets, lens, tlens))
    for n in (3, 2):
        np.testing.assert_allclose(np.asarray(plan(x[:n], targets[:n], lens[:n], tlens[:n])),
                                   fn(*[gc.tensor(a[:n]) for a in (x, targets, lens, tlens)]).numpy(), rtol=1e-5)
    # time-major input: the recursion needs the length of dim 0 (the batch dim of the trace),
    # so the plan is specialized at it and refuses another length
    plan = gc.compile(lambda p, t: F.ctc_loss(p, t, [12, 9, 7], [4, 2, 1]), example_inputs=(lp.astype(np.float32), targets))
    with pytest.raises(gc.ShapeError, match="only runs at batch size 12.*time dim"):
        plan(lp[:10].astype(np.float32), targets)
