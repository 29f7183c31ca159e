"""Symbolic dims beyond the batch (``gc.compile(..., dynamic_dims=...)``): a scan over a sequence
of any length and a fully convolutional net at any image size run from one trace, trained,
saved and reloaded, against eager graphc (which runs every size for real); a fixed dim that
differs stays a ShapeError; declarations that cannot hold are refused up front."""
from __future__ import annotations

import copy
import importlib.util

import numpy as np
import pytest

import graphc as gc
from graphc import nn


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.wx, self.wh, self.out = nn.Linear(3, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, xs, h0):
        h, ys = gc.scan(lambda h, x: ((self.wx(x) + self.wh(h)).tanh(),) * 2, h0, xs, dim=1)
        return self.out(ys).pow(2).mean() + h.sum() * 0.1


def _sgd_step(model):
    opt = gc.optim.SGD(model.parameters(), lr=0.1)

    def step(xs, h0):
        loss = model(xs, h0)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step


def test_a_scan_over_a_symbolic_sequence_length_trains_at_every_length(tmp_path):
    gc.manual_seed(0)
    model, twin = RNN(), None
    twin = copy.deepcopy(model)
    rng = np.random.default_rng(0)
    xs, h0 = rng.standard_normal((4, 6, 3)).astype(np.float32), np.zeros((4, 8), np.float32)
    step = gc.compile(_sgd_step(model), (xs, h0), dynamic_dims={"xs": {1: "T"}})
    assert [str(v.type) for v in step.graph.inputs[:2]] == ["f32[N,T,3]", "f32[N,8]"]
    eager = _sgd_step(twin)
    for length in (6, 2, 11, 6):
        xs = rng.standard_normal((4, length, 3)).astype(np.float32)
        got, want = float(step(xs, h0)), float(eager(gc.tensor(xs), gc.tensor(h0)).numpy())
        assert got == pytest.approx(want, rel=1e-5)  # float32; the same ops in the same order
    step.save(tmp_path / "rnn.graphc")
    loaded = gc.load(tmp_path / "rnn.graphc")
    xs = rng.standard_normal((4, 9, 3)).astype(np.float32)
    assert float(loaded(xs, h0)) == pytest.approx(float(eager(gc.tensor(xs), gc.tensor(h0)).numpy()), rel=1e-5)


def test_time_major_input_declares_its_batch_dim_too():
    gc.manual_seed(0)
    cell = nn.Linear(5, 5)

    def run(xs, h0):
        return gc.scan(lambda h, x: ((cell(x) + h).tanh(),) * 2, h0, xs)[1]

    xs, h0 = np.ones((7, 3, 5), np.float32), np.zeros((3, 5), np.float32)
    plan = gc.compile(run, (xs, h0), dynamic_dims={"xs": {0: "T", 1: "N"}})
    assert str(plan.graph.inputs[0].type) == "f32[T,N,5]"
    for t, n in ((7, 3), (2, 5)):
        xs = np.linspace(-1, 1, t * n * 5, dtype=np.float32).reshape(t, n, 5)
        h0 = np.zeros((n, 5), np.float32)
        np.testing.assert_allclose(plan(xs, h0), run(gc.tensor(xs), gc.tensor(h0)).numpy(), rtol=1e-6, atol=1e-7)


def fcn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))


def test_a_fully_convolutional_net_trains_and_exports_at_any_image_size(tmp_path):
    gc.manual_seed(1)
    model = fcn()
    twin = copy.deepcopy(model)
    opt, opt_twin = gc.optim.SGD(model.parameters(), lr=0.1), gc.optim.SGD(twin.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3, 8, 10)).astype(np.float32), np.array([0, 1])
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt,
                      dynamic_dims={"x": {2: "H", 3: "W"}})
    for h, w in ((8, 10), (5, 7), (12, 6)):
        x, y = rng.standard_normal((3, 3, h, w)).astype(np.float32), np.array([0, 1, 1])
        got = step(x, y)
        loss = nn.CrossEntropyLoss()(twin(gc.tensor(x)), gc.tensor(y))
        loss.backward()
        opt_twin.step()
        opt_twin.zero_grad()
        assert float(got[0] if isinstance(got, (tuple, list)) else got) == pytest.approx(float(loss.numpy()), rel=1e-5)
    model.eval()
    twin.eval()
    exported = gc.export(model, (x,), tmp_path / "fcn.graphc", dynamic_dims={0: {2: "H", 3: "W"}})
    assert str(exported.graph.inputs[0].type) == "f32[N,3,H,W]"
    image = rng.standard_normal((1, 3, 9, 13)).astype(np.float32)
    # BatchNorm folded into the conv in float64 and cast back: float32 rounding apart
    np.testing.assert_allclose(gc.load(tmp_path / "fcn.graphc")(image), twin(gc.tensor(image)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_a_fixed_dim_that_differs_is_a_shape_error_naming_the_input_and_sizes():
    plan = gc.compile(lambda x: x.sum(1), (np.ones((2, 5, 3), np.float32),), dynamic_dims={0: {1: "T"}})
    assert plan(np.ones((2, 9, 3), np.float32)).shape == (2, 3)
    with pytest.raises(gc.ShapeError, match=r"input 'x': expected f32\[N,T,3\] \(N=2, T=9\), got f32\[2,9,4\]"):
        plan(np.ones((2, 9, 4), np.float32))


def test_a_symbolic_dim_used_as_a_plain_number_pins_the_plan_to_its_size():
    def f(x):
        return x * float(x.shape[1] + 1)  # the length as a Python number: baked in

    plan = gc.compile(f, (np.ones((2, 5), np.float32),), dynamic_dims={0: {1: "T"}})
    assert plan(np.ones((3, 5), np.float32)).tolist() == [[6.0] * 5] * 3
    with pytest.raises(gc.ShapeError, match="only runs with T=5"):
        plan(np.ones((3, 4), np.float32))


def test_windows_that_change_a_symbolic_size_are_refused_with_the_formula():
    with pytest.raises(gc.ShapeError, match=r"max_pool2d: on the symbolic dim H.*floor\(\(H - 2\) / 2\) \+ 1"):
        gc.compile(nn.MaxPool2d(2), (np.ones((1, 3, 8, 8), np.float32),), dynamic_dims={0: {2: "H"}})


@pytest.mark.parametrize("dims, message", [
    ({"y": {0: "T"}}, "'y' is not an input"),
    ({"x": {3: "T"}}, "has no dim 3"),
    ({"x": {1: "2T"}}, "is not a name for a dim"),
    ({"x": {2: "T"}}, "has size 1 in the example"),
    ({"x": {0: "T", 1: "T"}}, None),  # sizes 4 and 5: one symbol, two sizes
])
def test_declarations_that_cannot_hold_are_refused(dims, message):
    x = np.ones((4, 5, 1), np.float32)
    with pytest.raises(gc.GraphcError, match=message or "one symbol must have one size"):
        gc.compile(lambda x: x * 2.0, (x,), dynamic_dims=dims)


def test_a_list_of_dims_names_their_symbols_after_the_input():
    graph = gc.jit.trace(lambda tokens: tokens * 2, np.ones((2, 6), np.int64), dynamic_dims={"tokens": (1,)})
    assert str(graph.inputs[0].type) == "i64[N,tokens_1]"


HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")
def test_onnx_exports_carry_the_symbols_as_named_dims(tmp_path):
    import onnxruntime

    gc.manual_seed(2)
    model = fcn().eval()
    gc.export(model, (np.ones((1, 3, 8, 8), np.float32),), tmp_path / "fcn.onnx", dynamic_dims={0: {2: "H", 3: "W"}})
    session = onnxruntime.InferenceSession(str(tmp_path / "fcn.onnx"))
    assert [d for d in session.get_inputs()[0].shape] == ["N", 3, "H", "W"]
    for hw in ((8, 8), (5, 11)):
        x = np.random.default_rng(0).standard_normal((2, 3, *hw)).astype(np.float32)
        got = session.run(None, {session.get_inputs()[0].name: x})[0]
        # onnxruntime's own convolutions and BN folding: float32 rounding apart
        np.testing.assert_allclose(got, model(gc.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_shapes_read_off_a_traced_tensor_stay_symbolic_in_creation_and_expand():
    def f(x):
        ones = gc.ones(1, 4).expand(x.shape[0], 4)
        return gc.zeros((x.shape[0], 4)) + gc.full((x.shape[0], 4), 2.0) + ones + x

    plan = gc.compile(f, (np.zeros((3, 4), np.float32),))
    assert "fixed_batch" not in plan.graph.meta
    assert plan(np.zeros((5, 4), np.float32)).tolist() == [[3.0] * 4] * 5


def test_a_size_read_as_a_number_then_mixed_with_its_symbol_traces_that_dim_fixed():
    """``x + pe[:len(x)]`` (a positional table sliced by ``len``): ``len`` is a plain int, so the
    slice has the example's length while ``x`` has the symbol; the trace starts again with
    that dim fixed, the other symbols kept."""
    pe = gc.ones(10, 1, 3)

    def f(x):
        return x + pe[:len(x)]
    x = np.ones((4, 2, 3), np.float32)
    plan = gc.compile(f, (x,), dynamic_dims={"x": {0: "T", 1: "N"}})
    assert str(plan.graph.inputs[0].type) == "f32[4,N,3]"
    np.testing.assert_array_equal(plan(np.ones((4, 5, 3), np.float32)), np.full((4, 5, 3), 2.0, np.float32))
    with pytest.raises(gc.ShapeError, match="expected f32\\[4,N,3\\]"):
        plan(np.ones((6, 5, 3), np.float32))
    batch_plan = gc.compile(lambda x: x + gc.ones(4, 3)[:len(x)], (np.ones((2, 3), np.float32),))
    assert str(batch_plan.graph.inputs[0].type) == "f32[2,3]"  # the batch read by len(): fixed
