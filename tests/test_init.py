"""``nn.init``: PyTorch's gains and fans exactly, and the statistics of every initialiser against
PyTorch's own draws (graphc's generator is not torch's, so samples differ: means, standard
deviations and bounds are compared at sizes where sampling noise is far below the tolerance).
Same seed, same weights; in place on Parameters and ``p.data``; eager only.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.nn import init
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

GAINS = [("linear", None), ("conv2d", None), ("conv_transpose3d", None), ("sigmoid", None), ("tanh", None),
         ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)]
SHAPES = [(8, 3), (16, 3, 5, 5), (4, 2, 3), (6, 4, 2, 3, 3), (5, 0)]


def test_calculate_gain_matches_pytorch(torch_ref):
    want = torch_ref({"gains": repr(GAINS)},
                     lambda: {"gains": np.array([torch.nn.init.calculate_gain(n, p) for n, p in GAINS])})
    got = np.array([init.calculate_gain(n, p) for n, p in GAINS])
    np.testing.assert_allclose(got, want["gains"], rtol=1e-15)


def test_fans_match_pytorch(torch_ref):
    def torch_fans():
        out = []
        for shape in SHAPES:
            t = torch.empty(shape)
            out.append([*torch.nn.init._calculate_fan_in_and_fan_out(t),
                        torch.nn.init._calculate_correct_fan(t, "fan_in"),
                        torch.nn.init._calculate_correct_fan(t, "fan_out")])
        return {"fans": np.array(out)}

    want = torch_ref({"shapes": repr(SHAPES)}, torch_fans)["fans"]
    for shape, row in zip(SHAPES, want):
        t = gc.zeros(*shape)
        got = [*init._calculate_fan_in_and_fan_out(t), init._calculate_correct_fan(t, "fan_in"),
               init._calculate_correct_fan(t, "fan_out")]
        assert got == row.tolist(), shape


# (shape, the same call in both libraries) -> the draw's statistics must agree; for bounded
# draws (uniform, truncated normal) the extremes must approach the same bounds too
UNBOUNDED = {"kaiming_normal_fan_out_relu", "kaiming_normal_leaky", "xavier_normal_conv", "normal", "method_normal",
             "trunc_normal_vit"}  # std 0.02 inside [-2, 2]: the bounds are 100 std away
CASES = {
    "kaiming_uniform_default": ((64, 32, 3, 3), lambda lib, w: lib.nn.init.kaiming_uniform_(w)),
    "kaiming_uniform_linear": ((128, 512), lambda lib, w: lib.nn.init.kaiming_uniform_(w, a=math.sqrt(5))),
    "kaiming_uniform_fan_out_relu": ((64, 32, 3, 3),
                                     lambda lib, w: lib.nn.init.kaiming_uniform_(w, mode="fan_out",
                                                                                 nonlinearity="relu")),
    "kaiming_normal_fan_out_relu": ((64, 32, 3, 3),
                                    lambda lib, w: lib.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")),
    "kaiming_normal_leaky": ((256, 300), lambda lib, w: lib.nn.init.kaiming_normal_(w, a=0.2)),
    "xavier_uniform_tanh": ((300, 200),
                            lambda lib, w: lib.nn.init.xavier_uniform_(w, gain=lib.nn.init.calculate_gain("tanh"))),
    "xavier_normal_conv": ((64, 32, 3, 3), lambda lib, w: lib.nn.init.xavier_normal_(w)),
    "normal": ((200, 300), lambda lib, w: lib.nn.init.normal_(w, mean=1.0, std=0.02)),
    "uniform": ((200, 300), lambda lib, w: lib.nn.init.uniform_(w, -0.3, 0.5)),
    "trunc_normal_vit": ((200, 300), lambda lib, w: lib.nn.init.trunc_normal_(w, std=0.02)),
    "trunc_normal_asymmetric": ((200, 300),
                                lambda lib, w: lib.nn.init.trunc_normal_(w, mean=0.5, std=0.2, a=0.1, b=0.6)),
    "method_normal": ((200, 300), lambda lib, w: w.normal_(0, 0.01)),
    "method_uniform": ((200, 300), lambda lib, w: w.uniform_(-2, 1)),
}


def stats(w: np.ndarray) -> np.ndarray:
    w = w.astype(np.float64)
    return np.array([w.mean(), w.std(), w.min(), w.max(), w.size])


@pytest.mark.parametrize("name", sorted(CASES))
def test_statistics_match_pytorch(name, torch_ref):
    shape, call = CASES[name]

    def torch_stats():
        torch.manual_seed(0)
        with torch.no_grad():
            return {"stats": stats(call(torch, torch.empty(shape)).numpy())}

    want = torch_ref({"case": name, "shape": shape}, torch_stats)["stats"]
    gc.manual_seed(0)
    w = gc.zeros(*shape)
    assert call(gc, w) is w, "initialisers return the tensor they filled"
    got = stats(w.numpy())
    mean, std, lo, hi, n = want
    assert got[4] == n
    # 5 standard errors of a sample mean / std: flaky less than once in a million runs
    assert abs(got[0] - mean) <= 5 * std / math.sqrt(n) + 1e-12, f"mean {got[0]} vs torch {mean}"
    assert abs(got[1] - std) <= 5 * std / math.sqrt(2 * n) + 1e-12, f"std {got[1]} vs torch {std}"
    if name not in UNBOUNDED:
        assert abs(got[2] - lo) <= 1e-3 * (hi - lo) and abs(got[3] - hi) <= 1e-3 * (hi - lo)


def test_bounds_and_stds_are_pytorchs_formulas():
    gc.manual_seed(1)
    w = init.kaiming_uniform_(gc.zeros(256, 64, 3, 3), a=0.5, mode="fan_out", nonlinearity="leaky_relu").numpy()
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 0.25)) / math.sqrt(256 * 9)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.999 * bound
    w = init.xavier_normal_(gc.zeros(400, 600), gain=2.0).numpy()
    assert w.std() == pytest.approx(2.0 * math.sqrt(2.0 / 1000), rel=0.01)
    w = init.trunc_normal_(gc.zeros(200_000), mean=0.5, std=0.2, a=0.1, b=0.6).numpy().astype(np.float64)
    alpha, beta = (0.1 - 0.5) / 0.2, (0.6 - 0.5) / 0.2  # the truncated normal's mean, exactly
    pdf = [math.exp(-z * z / 2) / math.sqrt(2 * math.pi) for z in (alpha, beta)]
    cdf = [(1 + math.erf(z / math.sqrt(2))) / 2 for z in (alpha, beta)]
    assert w.min() >= 0.1 and w.max() <= 0.6
    assert w.mean() == pytest.approx(0.5 + 0.2 * (pdf[0] - pdf[1]) / (cdf[1] - cdf[0]), abs=2e-3)


def test_orthogonal_constant_ones_zeros():
    for shape in [(6, 10), (10, 6), (4, 2, 3, 3)]:
        w = init.orthogonal_(gc.zeros(*shape), gain=2.0).numpy().reshape(shape[0], -1).astype(np.float64)
        small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(small, 4.0 * np.eye(min(w.shape)), atol=1e-5)
    assert init.constant_(gc.zeros(3), 0.25).numpy().tolist() == [0.25] * 3
    assert init.ones_(gc.zeros(2)).numpy().tolist() == [1.0, 1.0]
    assert init.zeros_(gc.ones(2)).numpy().tolist() == [0.0, 0.0]


def test_same_seed_same_weights():
    def draw(seed):
        gc.manual_seed(seed)
        model = nn.Sequential(nn.Linear(8, 16), nn.Conv2d(1, 4, 3))
        init.kaiming_normal_(model[0].weight, nonlinearity="relu")
        init.trunc_normal_(model[1].weight, std=0.02)
        init.orthogonal_(model[0].weight.data)
        model[1].bias.data.uniform_(-1, 1)
        return {k: v.copy() for k, v in model.state_dict().items()}

    a, b, c = draw(3), draw(3), draw(4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not any(np.array_equal(a[k], c[k]) for k in a)


def test_in_place_on_parameters_and_their_data():
    layer = nn.Linear(4, 3)
    weight, array = layer.weight, layer.weight.array
    assert init.xavier_uniform_(layer.weight) is weight and layer.weight.array is array
    data = layer.weight.data.normal_(0, 0.01)  # PyTorch's idiom: .data is a Tensor sharing storage
    assert type(data) is gc.Tensor and data.array is array and not isinstance(data, nn.Parameter)
    layer.bias.data.zero_()
    assert not layer.bias.numpy().any() and float(np.abs(array).max()) < 0.1
    layer.bias.data.fill_(0.5)
    layer.weight.data.copy_(gc.ones(4))  # broadcast like PyTorch
    assert layer.bias.numpy().tolist() == [0.5] * 3 and layer.weight.numpy().tolist() == [[1.0] * 4] * 3


def test_reinitialising_after_compile_changes_what_the_plan_computes():
    model = nn.Linear(4, 2).eval()
    x = np.ones((3, 4), np.float32)
    plan = gc.compile(model, (x,))
    model.apply(lambda m: (init.ones_(m.weight), init.zeros_(m.bias)) if isinstance(m, nn.Linear) else None)
    np.testing.assert_array_equal(plan(x), np.full((3, 2), 4.0, np.float32))
    model.weight.data.mul_(0.5)
    model.bias.data.add_(1)
    np.testing.assert_array_equal(plan(x), np.full((3, 2), 3.0, np.float32))


def test_in_place_init_inside_a_trace_is_a_state_update_and_tracing_changes_nothing():
    class Redraw(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(np.ones((3, 3), np.float32))

        def forward(self, x):
            self.weight.data.normal_(0, 1)  # redrawn by the plan at every call, from its generator
            return x @ self.weight

    model = Redraw()
    plan = gc.compile(model, (np.zeros((2, 3), np.float32),))
    np.testing.assert_array_equal(model.weight.numpy(), np.ones((3, 3), np.float32))  # tracing wrote nothing
    x = np.eye(3, dtype=np.float32)
    first = plan(x)
    np.testing.assert_array_equal(first, model.weight.numpy())  # the plan's update is the model's weight
    assert not np.array_equal(plan(x), first)


def test_in_place_on_a_plan_input_is_a_clear_trace_error():
    for fn in (lambda x: x.fill_(0), lambda x: x.copy_(x), lambda x: x.add_(1), lambda x: x.__setitem__(0, 1.0)):
        with pytest.raises(gc.TraceError, match="input"):
            gc.compile(fn, (np.zeros((2, 3), np.float32),))


def test_bad_arguments_are_graphc_errors():
    with pytest.raises(gc.GraphcError, match="fewer than 2 dimensions"):
        init.kaiming_uniform_(gc.zeros(5))
    with pytest.raises(gc.GraphcError, match="mode 'fan_avg' is not supported"):
        init.kaiming_normal_(gc.zeros(2, 2), mode="fan_avg")
    with pytest.raises(gc.GraphcError, match="unsupported nonlinearity 'gelu'"):
        init.calculate_gain("gelu")
    with pytest.raises(gc.GraphcError, match="generator= is not supported"):
        init.normal_(gc.zeros(2), generator=object())
    with pytest.raises(gc.GraphcError, match="floating-point"):
        gc.zeros(2, dtype=gc.int64).normal_()
    with pytest.raises(gc.GraphcError, match="a <= b"):
        gc.zeros(2).uniform_(1, 0)
    with pytest.raises(gc.GraphcError, match="cannot be stored in place in a int64"):
        gc.zeros(2, dtype=gc.int64).mul_(0.5)
    empty = gc.zeros(0, 3)
    assert init.kaiming_uniform_(empty) is empty and init.xavier_normal_(empty) is empty  # PyTorch skips them


def test_setitem_writes_in_place():
    t = gc.zeros(3, 4)
    t[0] = 1.0
    t[:, 1] = gc.tensor([2.0, 3.0, 4.0])
    t[t > 3.5] = -1.0
    assert t.numpy().tolist() == [[1, 2, 1, 1], [0, 3, 0, 0], [0, -1, 0, 0]]
    with pytest.raises(gc.ShapeError, match="cannot write"):
        t[0] = gc.zeros(5)
