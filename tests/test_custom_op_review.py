"""A new user's review of custom ops (``gc.custom_op``, ``gc.autograd.Function``) and
``verify="numeric"``, written from README.md, docs/custom-ops.md and docs/verification.md only.

Passing tests pin what works the way a PyTorch/JAX user expects (eager and compiled numbers
against PyTorch's ``autograd.Function``, kept and inlined calls, plans resumed in a fresh
process, ONNX export, viewers, the verification record). The bugs the review found were strict
xfails with a minimal repro each; they are fixed, and the tests now pin the fixes.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import graphc as gc
from custom_op_examples import log1pexp
from graphc import nn, optim
from graphc.apps.cli import main as cli_main

RNG = np.random.default_rng(0)
X8 = RNG.standard_normal((8, 4)).astype(np.float32)
Y8 = RNG.integers(0, 3, 8)


def _op(name, forward, backward):
    return gc.custom_op(type(name, (), {"forward": staticmethod(forward), "backward": staticmethod(backward)}))


@gc.custom_op
class square:
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@gc.custom_op
class quad:  # a custom op whose forward and backward call another custom op
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return square(square(x))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 4 * square(x) * x * g


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        h = square(self.l(x))
        return quad(h).mean(1) + square(h).sum(1)  # square used twice, quad nests it


def _eager_losses(model, opt, loss_fn, batches):
    out = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(gc.tensor(x)), gc.tensor(y))
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


# ---- PyTorch parity ---------------------------------------------------------------------------
TWIN = '''
class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, alpha):
        t = torch.tanh(x * w)
        ctx.save_for_backward(x, w, t)
        ctx.alpha = alpha
        return t * alpha, t.sum(1)

    @staticmethod
    def backward(ctx, g, gsum):
        x, w, t = ctx.saved_tensors
        d = (g * ctx.alpha + gsum.unsqueeze(1)) * (1 - t * t)
        return d * w, (d * x).sum(0), None

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 6)
        self.w = torch.nn.Parameter(torch.ones(6))
        self.fc2 = torch.nn.Linear(6, 3)

    def forward(self, x):
        h, s = ScaledTanh.apply(self.fc1(x), self.w, 1.5)
        h2, _ = ScaledTanh.apply(h, self.w, 0.5)      # used twice; the second's second output unused
        return self.fc2(h2) + s.unsqueeze(1) * 0.1

model = Net()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.tensor(INIT[name]))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()

def train_step(x, y):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss
'''
INIT = {"fc1.weight": RNG.standard_normal((6, 4)).astype(np.float32) * 0.5,
        "fc1.bias": RNG.standard_normal(6).astype(np.float32) * 0.1,
        "w": RNG.standard_normal(6).astype(np.float32),
        "fc2.weight": RNG.standard_normal((3, 6)).astype(np.float32) * 0.5,
        "fc2.bias": np.zeros(3, np.float32)}


def _twin(module):
    ns = {"torch": module, "INIT": INIT}
    exec(TWIN, ns)
    return ns


def test_a_pytorch_script_under_import_graphc_as_torch_matches_pytorch():
    """The same source text (a Function with two outputs, a plain argument, a ctx attribute,
    used twice, an output unused) run by PyTorch and by graphc: eagerly, as a traced
    zero_grad/backward/step function with the default passes and with passes="none", and at
    another batch size."""
    torch = pytest.importorskip("torch")
    ns = _twin(torch)
    want = [ns["train_step"](torch.tensor(X8), torch.tensor(Y8)).item() for _ in range(3)]
    want.append(ns["train_step"](torch.tensor(X8[:3]), torch.tensor(Y8[:3])).item())

    ns = _twin(gc)
    eager = [float(ns["train_step"](gc.tensor(X8), gc.tensor(Y8))) for _ in range(3)]
    eager.append(float(ns["train_step"](gc.tensor(X8[:3]), gc.tensor(Y8[:3]))))
    np.testing.assert_allclose(eager, want, rtol=2e-6)
    for passes in ("default", "none"):
        ns = _twin(gc)
        step = gc.compile(ns["train_step"], (X8, Y8), passes=passes)
        got = [float(step(X8, Y8)) for _ in range(3)] + [float(step(X8[:3], Y8[:3]))]
        np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=passes)


def test_two_outputs_plain_argument_and_an_unused_output_match_pytorch_eagerly():
    torch = pytest.importorskip("torch")
    x0 = RNG.standard_normal((5, 6)).astype(np.float32)
    w0 = RNG.standard_normal(6).astype(np.float32)
    grads = {}
    for name, mod in (("torch", torch), ("graphc", gc)):
        ns = _twin(mod)
        x, w = mod.tensor(x0, requires_grad=True), mod.tensor(w0, requires_grad=True)
        a, b = ns["ScaledTanh"].apply(x, w, 2.0)
        a2, _ = ns["ScaledTanh"].apply(a, w, 0.5)  # the second output does not reach the loss
        (a2.sum() + (b * b).sum()).backward()
        grads[name] = (x.grad.detach().numpy() if name == "torch" else x.grad.numpy(),
                       w.grad.detach().numpy() if name == "torch" else w.grad.numpy())
    for ours, theirs in zip(grads["graphc"], grads["torch"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_the_docs_sign_ste_matches_pytorch_in_a_compiled_module():
    torch = pytest.importorskip("torch")

    def define(t):
        class SignSTE(t.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return t.sign(x)

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * (x.abs() <= 1).float()

        class Net(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2 = t.nn.Linear(4, 16), t.nn.Linear(16, 3)

            def forward(self, x):
                return self.fc2(SignSTE.apply(self.fc1(x)))
        return Net()

    gc.manual_seed(0)
    ours = define(gc)
    theirs = define(torch)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.tensor(dict(ours.named_parameters())[name].numpy()))
    opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    want = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(theirs(torch.tensor(X8)), torch.tensor(Y8))
        loss.backward()
        opt.step()
        want.append(loss.item())
    step = gc.compile(ours, (X8, Y8), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(ours.parameters(), lr=0.1))
    np.testing.assert_allclose([float(step(X8, Y8)) for _ in range(3)], want, rtol=2e-6)


# ---- compiled: kept and inlined calls, batch sizes, dtypes ---------------------------------------
def test_nested_and_reused_custom_ops_train_the_same_eager_inlined_and_kept():
    x, y = X8 * 0.3, RNG.standard_normal(8).astype(np.float32)
    gc.manual_seed(0)
    model = Nested()
    want = _eager_losses(model, optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(),
                         [(x, y)] * 3 + [(x[:3], y[:3])])
    for passes in ("default", "none"):
        gc.manual_seed(0)
        model = Nested()
        step = gc.compile(model, (x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.01),
                          passes=passes)
        got = [float(step(x, y)) for _ in range(3)] + [float(step(x[:3], y[:3]))]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=passes)
        ops = [n.op for n in step.graph.nodes]
        assert ("custom_call" in ops) == (passes == "none")
    text = str(step.graph)  # kept calls: each body printed once after the graph
    for body in ("square.forward", "square.backward", "quad.forward", "quad.backward"):
        assert text.count(f"body {body}(") == 1, body


def test_an_int_index_input_takes_none_as_its_gradient():
    @gc.custom_op
    class take_rows:
        @staticmethod
        def forward(ctx, table, idx):
            ctx.save_for_backward(idx)
            ctx.n = table.shape[0]
            return nn.functional.embedding(idx, table)

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            onehot = nn.functional.one_hot(idx, ctx.n).to(g.dtype)
            return onehot.transpose(0, 1) @ g, None

    table0 = np.arange(12, dtype=np.float32).reshape(4, 3)
    table = gc.tensor(table0, requires_grad=True)
    out = take_rows(table, gc.tensor(np.array([0, 2, 2, 3])))
    (out * out).sum().backward()
    want = np.zeros_like(table0)
    for i in [0, 2, 2, 3]:
        want[i] += 2 * table0[i]
    np.testing.assert_array_equal(table.grad.numpy(), want)

    class Emb(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(gc.tensor(RNG.standard_normal((10, 3)).astype(np.float32)))

        def forward(self, i):
            return take_rows(self.w, i).sum(1)

    ids, target = np.array([1, 2, 3, 1, 9]), np.ones(5, np.float32)
    losses = {}
    for passes in ("default", "none"):
        gc.manual_seed(0)
        model = Emb()
        model.w = nn.Parameter(gc.tensor(np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3)))
        step = gc.compile(model, (ids, target), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                          passes=passes)
        losses[passes] = [float(step(ids, target)) for _ in range(2)] + [float(step(ids[:2], target[:2]))]
    np.testing.assert_allclose(losses["none"], losses["default"], rtol=1e-6)


def test_float64_stays_float64_eager_and_compiled():
    @gc.custom_op
    class cube:
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = gc.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = cube(x)
    y.sum().backward()
    assert y.dtype == gc.float64 and x.grad.dtype == gc.float64
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(3, 1).double()

        def forward(self, x):
            return cube(self.l(x)).squeeze(1)

    xb, yb = RNG.standard_normal((4, 3)), np.zeros(4)
    model = M()
    step = gc.compile(model, (xb, yb), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.01))
    assert str(step.graph.inputs[0].type) == "f64[N,3]"
    assert step(xb, yb).dtype == np.float64


def test_a_body_using_the_batch_size_as_a_number_fixes_the_batch_with_a_clear_error():
    @gc.custom_op
    class batch_mean:
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.shape[0]
            return x.sum(0) / x.shape[0]

        @staticmethod
        def backward(ctx, g):
            return (g / ctx.n).unsqueeze(0).expand(ctx.n, -1)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 2)

        def forward(self, x):
            return batch_mean(self.l(x))

    plan = gc.compile(M(), (X8,))
    assert plan(X8).shape == (2,)
    with pytest.raises(gc.GraphcError, match="only runs at batch size 8, got 3"):
        plan(X8[:3])


def test_symbolic_batch_shapes_through_ctx_work_at_other_batch_sizes():
    @gc.custom_op
    class flat_center:
        @staticmethod
        def forward(ctx, x):
            y = x.reshape(x.shape[0], -1)
            ctx.shape = x.shape
            return y - y.mean(0, keepdim=True)

        @staticmethod
        def backward(ctx, g):
            return (g - g.mean(0, keepdim=True)).reshape(ctx.shape)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(6, 2)

        def forward(self, x):
            return self.l(flat_center(x))

    x, y = RNG.standard_normal((4, 2, 3)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    gc.manual_seed(0)
    model = M()
    want = _eager_losses(model, optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), [(x, y), (x, y), (x[:2], y[:2])])
    for passes in ("default", "none"):
        gc.manual_seed(0)
        model = M()
        step = gc.compile(model, (x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                          passes=passes)
        got = [float(step(x, y)), float(step(x, y)), float(step(x[:2], y[:2]))]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=passes)


def test_an_int_output_marked_non_differentiable_trains_compiled_like_eager():
    class MaxIdx(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax(1)
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x)
            return x.amax(1), idx

        @staticmethod
        def backward(ctx, g, gidx):
            (x,) = ctx.saved_tensors
            return (x == x.amax(1, keepdim=True)).float() * g.unsqueeze(1)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 5)

        def forward(self, x):
            v, i = MaxIdx.apply(self.l(x))
            return v * 2, i

    def make():
        gc.manual_seed(0)
        model = M()
        opt = optim.SGD(model.parameters(), lr=0.1)

        def train_step(x, y):
            opt.zero_grad()
            v, i = model(x)
            loss = nn.functional.mse_loss(v, y)
            loss.backward()
            opt.step()
            return loss, i
        return train_step

    y = np.ones(8, np.float32)
    eager = make()
    want = [(float(a), b.numpy().tolist()) for a, b in (eager(gc.tensor(X8), gc.tensor(y)) for _ in range(2))]
    for passes in ("default", "none"):
        step = gc.compile(make(), (X8, y), passes=passes)
        got = [(float(a), b.tolist()) for a, b in (step(X8, y) for _ in range(2))]
        assert got[0][1] == want[0][1] and got[1][1] == want[1][1]
        np.testing.assert_allclose([g[0] for g in got], [w[0] for w in want], rtol=1e-6)
        assert step(X8[:2], y[:2])[1].shape == (2,)


# ---- plans: save, load in a fresh process, export, viewers, inspect ----------------------------
RESUME = """
import json, sys, numpy as np, graphc as gc
x, y = np.load(sys.argv[2]), np.load(sys.argv[3])
plan = gc.load(sys.argv[1])
print(json.dumps([float(plan(x, y)) for _ in range(2)] + [float(plan(x[:3], y[:3]))]))
"""


@pytest.mark.parametrize("passes", ["default", "none"])
def test_a_nested_custom_op_plan_resumes_in_a_process_without_the_classes(passes, tmp_path):
    x, y = X8 * 0.3, RNG.standard_normal(8).astype(np.float32)
    gc.manual_seed(0)
    model = Nested()
    step = gc.compile(model, (x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.01,
                                                                                  momentum=0.9), passes=passes)
    step(x, y)
    step.save(tmp_path / "p.graphc")
    want = [float(step(x, y)) for _ in range(2)] + [float(step(x[:3], y[:3]))]
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = subprocess.run([sys.executable, "-c", RESUME, str(tmp_path / "p.graphc"), str(tmp_path / "x.npy"),
                          str(tmp_path / "y.npy")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(json.loads(out.stdout), want)


def test_export_with_a_custom_op_to_onnx_and_graphc(tmp_path):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.bn, self.l2 = nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3)

        def forward(self, x):
            return self.l2(log1pexp(self.bn(self.l1(x))))

    gc.manual_seed(0)
    model = M()
    model(gc.tensor(X8))  # move the BatchNorm statistics off their defaults
    model.eval()
    want = model(gc.tensor(X8)).numpy()
    plan = gc.export(model, (X8,), tmp_path / "m.graphc")
    assert "custom_call" not in [n.op for n in plan.graph.nodes]  # inlined
    np.testing.assert_allclose(gc.load(tmp_path / "m.graphc")(X8[:5]), want[:5], rtol=1e-6, atol=1e-6)
    pytest.importorskip("onnx")
    gc.export(model, (X8,), tmp_path / "m.onnx")
    np.testing.assert_allclose(gc.load(tmp_path / "m.onnx")(X8), want, rtol=1e-5, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    got = session.run(None, {session.get_inputs()[0].name: X8[:3]})[0]
    np.testing.assert_allclose(got, want[:3], rtol=1e-5, atol=1e-6)


def test_viewers_and_inspect_name_kept_custom_ops(tmp_path, capsys):
    x, y = X8 * 0.3, RNG.standard_normal(8).astype(np.float32)
    model = Nested()
    step = gc.compile(model, (x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.01),
                      passes="none")
    gc.viz.write(step, tmp_path / "g.html")
    assert "quad" in (tmp_path / "g.html").read_text()
    step.save(tmp_path / "p.graphc")
    assert cli_main(["viz", str(tmp_path / "p.graphc"), "-o", str(tmp_path / "g.txt")]) == 0
    text = (tmp_path / "g.txt").read_text()
    assert "custom_call[name='quad'" in text and "body quad.backward(" in text
    assert cli_main(["inspect", str(tmp_path / "p.graphc")]) == 0
    out = capsys.readouterr().out
    assert "format: 1.4" in out and "custom_call" in out


def test_a_nan_from_a_custom_backward_is_named_by_find_nonfinite():
    bad = _op("badgrad", lambda ctx, x: (ctx.save_for_backward(x), x * 1)[1],
              lambda ctx, g: g * gc.log(ctx.saved_tensors[0]))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)

        def forward(self, x):
            return bad(self.l(x))

    y = np.zeros((8, 4), np.float32)
    for passes in ("default", "none"):
        model = M()
        step = gc.compile(model, (X8, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                          passes=passes)
        with pytest.raises(gc.NonFiniteError, match="gradient of l.weight"):
            step(X8, y)
        assert "gradient of %1 (custom_call)" in str(gc.debug.find_nonfinite(step, X8, y))


# ---- errors that are clear -------------------------------------------------------------------
def _mul(ctx, x, w):
    return x * w


@pytest.mark.parametrize("backward, message", [
    (lambda ctx, g: (g, g), r"backward's gradient 1 is f32\[3,2\], its input is f32\[2\]"),
    (lambda ctx, g: (g, g.sum(0, keepdim=True)), r"backward's gradient 1 is f32\[1,2\], its input is f32\[2\]"),
    (lambda ctx, g: g, "backward returned 1 gradients for the 2 arguments"),
    (lambda ctx, g: (g.double(), None), r"backward's gradient 0 is f64\[3,2\], its input is f32\[3,2\]"),
    (lambda ctx, g: (g, 3.0), "backward's gradient 1 a float, not a tensor"),
])
def test_wrong_gradients_are_clear_errors_at_the_first_call(backward, message):
    op = _op("bad", _mul, backward)
    with pytest.raises(gc.GraphcError, match=message):
        op(gc.ones(3, 2, requires_grad=True), gc.ones(2, requires_grad=True))


def test_random_ops_and_captured_parameters_are_refused():
    drop = _op("drop", lambda ctx, x: nn.functional.dropout(x, 0.5, True), lambda ctx, g: g)
    with pytest.raises(gc.GraphcError, match="dropout .* cannot be used in a custom op's body"):
        drop(gc.ones(3))
    w = gc.ones(3, requires_grad=True)
    cap = _op("cap", lambda ctx, x: x * w, lambda ctx, g: g)
    with pytest.raises(gc.GraphcError, match="requires grad .* pass it as an argument"):
        cap(gc.ones(3))
    with pytest.raises(gc.GraphcError, match="needs a static backward"):
        class NoBackward(gc.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x
        NoBackward.apply(gc.ones(1))


# ---- verify="numeric" ------------------------------------------------------------------------
class ConvBnDropCustom(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.bn, self.d = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.3)
        self.f = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.f(self.d(log1pexp(self.bn(self.c(x))).flatten(1)))


XI = RNG.standard_normal((5, 1, 6, 6)).astype(np.float32)
YI = RNG.integers(0, 3, 5)


def test_verify_numeric_with_a_custom_op_bn_and_dropout_is_recorded_saved_and_printed(tmp_path, capsys):
    gc.manual_seed(0)
    model = ConvBnDropCustom()
    step = gc.compile(model, (XI, YI), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9), verify="numeric")
    records = step.graph.meta["verification"]
    assert [r["pass"] for r in records] == [p["name"] for p in step.graph.meta["passes"]]
    assert "inline_calls" in [r["pass"] for r in records]
    for r in records:  # the bodies, traced for float32, are widened with the graph: float64 throughout
        assert r["max_rel"] <= r["rtol"] and r["batch"] == 5 and r["dtype"] == "float64"
    assert {r["pass"]: r["dtype"] for r in records}["dce"] == "float64"
    checked = [float(step(XI, YI)) for _ in range(3)]
    gc.manual_seed(0)
    model = ConvBnDropCustom()
    plain = gc.compile(model, (XI, YI), loss_fn=nn.CrossEntropyLoss(),
                       optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    assert [float(plain(XI, YI)) for _ in range(3)] == checked  # the check changes nothing
    step.save(tmp_path / "t.graphc")
    assert gc.load(tmp_path / "t.graphc").graph.meta["verification"] == records
    assert cli_main(["inspect", str(tmp_path / "t.graphc")]) == 0
    out = capsys.readouterr().out
    assert 'numeric verification (verify="numeric", batch 5): every pass within tolerance' in out
    assert "checked in float32" not in out


def test_verify_numeric_on_export_and_a_float64_traced_step(tmp_path):
    gc.manual_seed(0)
    model = ConvBnDropCustom()
    model(gc.tensor(XI))
    model.eval()
    plan = gc.compile(model, (XI,), verify="numeric")
    assert all(r["max_rel"] <= r["rtol"] for r in plan.graph.meta["verification"])
    exported = gc.export(model, (XI,), tmp_path / "m.graphc", verify="numeric")
    fold = {r["pass"]: r for r in exported.graph.meta["verification"]}["fold_bn"]
    assert fold["dtype"] == "float64" and 0 < fold["max_rel"] <= fold["rtol"] == 1e-5

    # bodies traced for float64 are checked in float64 throughout
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.Linear(8, 3)).double()
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(log1pexp(model(x)), y)
        loss.backward()
        opt.step()
        return loss

    xd = RNG.standard_normal((5, 6))
    step = gc.compile(train_step, (xd, YI), verify="numeric")
    assert {r["dtype"] for r in step.graph.meta["verification"]} == {"float64"}
    assert all(r["max_rel"] <= r["rtol"] == 1e-9 for r in step.graph.meta["verification"])


# ---- bugs ------------------------------------------------------------------------------------
def test_backward_returning_none_for_every_input_is_a_zero_gradient():
    stop = _op("stop", lambda ctx, x: x * 2, lambda ctx, g: None)
    x = gc.tensor(np.ones(3, np.float32), requires_grad=True)
    w = gc.tensor(np.ones(3, np.float32), requires_grad=True)
    (stop(x) + w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(3))
    assert x.grad is None or not x.grad.numpy().any()


def test_backward_returning_none_compiled_with_kept_calls():
    stop = _op("stop2", lambda ctx, x: x * 2, lambda ctx, g: None)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)

        def forward(self, x):
            return stop(self.l(x)) + self.l(x)

    y = np.zeros((8, 4), np.float32)
    losses = []
    for passes in ("default", "none"):
        gc.manual_seed(0)
        model = M()
        step = gc.compile(model, (X8, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                          passes=passes)
        losses.append([float(step(X8, y)) for _ in range(2)])
    assert losses[0] == losses[1]


def test_random_tensors_in_a_body_are_refused_or_fresh():
    noisy = _op("noisy", lambda ctx, x: x + gc.randn(2, 2), lambda ctx, g: g)
    x = gc.zeros(2, 2)
    try:
        a, b = noisy(x).numpy(), noisy(x).numpy()
    except gc.GraphcError:
        return
    assert not np.array_equal(a, b)


def test_plain_arguments_that_compare_equal_but_differ_trace_separately():
    def forward(ctx, x, s):
        if isinstance(s, bool):
            return x * 10 if s else x
        return x / s

    op = _op("flagged", forward, lambda ctx, g: (g, None))
    x = gc.tensor(np.ones(2, np.float32))
    op(x, 1)
    np.testing.assert_array_equal(op(x, True).numpy(), [10, 10])
    op(x, 0.0)
    np.testing.assert_array_equal(op(x, -0.0).numpy(), [-np.inf, -np.inf])


def test_zeros_like_gradient_in_a_compiled_backward():
    add = _op("addz", lambda ctx, x, y: x * 2 + y, lambda ctx, g: (g * 2, gc.zeros_like(g)))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)

        def forward(self, x):
            return add(self.l(x), x)

    model = M()
    step = gc.compile(model, (X8, X8), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))
    assert np.isfinite(float(step(X8[:3], X8[:3])))


class Scale(gc.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha=2.0):
        ctx.alpha = alpha
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        return g * ctx.alpha, None


@pytest.mark.parametrize("kwargs, want", [({"alpha": 3.0}, 3.0),  # a keyword argument
                                          ({}, 2.0)])  # the default left out: backward's None for it is fine
def test_apply_with_keyword_and_defaulted_arguments(kwargs, want):
    x = gc.tensor(np.ones(2, np.float32), requires_grad=True)
    Scale.apply(x, **kwargs).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [want, want])


def test_setup_context_style_function():
    class Scale(gc.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = gc.tensor(np.ones(2, np.float32), requires_grad=True)
    Scale.apply(x, 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3, 3])


def test_a_forward_only_function_runs_under_no_grad():
    class Fwd(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise NotImplementedError("inference only")

    with gc.no_grad():
        np.testing.assert_array_equal(Fwd.apply(gc.ones(2)).numpy(), [2, 2])


def test_save_for_backward_accepts_none():
    def forward(ctx, x, bias):
        ctx.save_for_backward(x, None)
        return x * 2

    op = _op("maybe_bias", lambda ctx, x: forward(ctx, x, None), lambda ctx, g: g * 2)
    x = gc.tensor(np.ones(2, np.float32), requires_grad=True)
    op(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2])


def test_a_tuple_of_tensors_on_ctx_is_saved_or_clearly_refused():
    def forward(ctx, x):
        ctx.pair = (x * 2, x * 3)
        return x * 5

    def backward(ctx, g):
        a, b = ctx.pair
        return g * (a - b + 6)

    op = _op("ctxtuple", forward, backward)
    x = gc.tensor(np.ones(2, np.float32), requires_grad=True)
    try:
        op(x).sum().backward()
    except gc.GraphcError as e:
        assert "custom op ctxtuple" in str(e), str(e)
        return
    np.testing.assert_array_equal(x.grad.numpy(), [5, 5])


def test_a_model_buffer_read_in_a_body_is_a_clear_error_when_compiled():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn, self.l = nn.BatchNorm1d(4), nn.Linear(4, 4)

        def forward(self, x):
            return center(self.l(self.bn(x)))

    center = _op("center", lambda ctx, x: x - model.bn.running_mean, lambda ctx, g: g)
    model = M()
    center(gc.tensor(X8))  # eager: fine
    with pytest.raises(gc.GraphcError, match="custom op center"):
        gc.compile(model, (X8, X8), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))


def test_a_captured_numpy_array_in_a_body():
    weights = np.array([1.0, 2.0, 3.0], np.float32)
    mulw = _op("mulw", lambda ctx, x: x * weights, lambda ctx, g: g * weights)
    x = gc.tensor(np.ones(3, np.float32), requires_grad=True)
    mulw(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), weights)
