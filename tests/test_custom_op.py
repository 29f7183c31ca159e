"""Custom ops with their own gradient (``gc.custom_op``, ``gc.autograd.Function``): a numerically
stable ``log1pexp`` and a straight-through estimator against PyTorch's ``autograd.Function``
equivalents, eager and compiled; what the passes, the printer and the viewers do with them; a
plan using one saved and resumed in a fresh process with no user code; and clear errors.
Hostile plan files with bodies are tests/test_custom_op_hostile.py's.

Tolerance: 1e-6 relative against PyTorch (float32 elementwise math in both; exp and log1p
differ by an ulp or two between numpy and PyTorch's kernels).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import graphc as gc
from custom_op_examples import log1pexp
from graphc import nn, optim

RTOL = 1e-6  # module docstring


class SignSTE(gc.autograd.Function):
    """sign(x) forward; the gradient passes straight through where |x| <= 1 (hardtanh's STE)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gc.sign(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 1).float()


def torch_functions():
    import torch

    class TorchLog1pExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * torch.sigmoid(x)

    class TorchSignSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sign(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x.abs() <= 1).float()

    return {"log1pexp": TorchLog1pExp.apply, "ste": TorchSignSTE.apply}


OURS = {"log1pexp": log1pexp, "ste": SignSTE.apply}
X = np.array([[-120.0, -30.0, -1.5, -0.5, 0.0], [0.25, 0.9, 1.1, 30.0, 120.0]], np.float32)  # overflow-prone ends
COTANGENT = np.linspace(-1, 1, X.size, dtype=np.float32).reshape(X.shape)


def torch_outputs(name):
    def compute():
        import torch

        x = torch.from_numpy(X.copy()).requires_grad_()
        y = torch_functions()[name](x)
        (y * torch.from_numpy(COTANGENT)).sum().backward()
        return {"y": y.detach(), "grad": x.grad}
    return compute


@pytest.mark.parametrize("name", ["log1pexp", "ste"])
def test_eager_forward_and_backward_match_pytorch(name, torch_ref):
    want = torch_ref([name, X, COTANGENT], torch_outputs(name))
    x = gc.tensor(X, requires_grad=True)
    y = OURS[name](x)
    (y * gc.tensor(COTANGENT)).sum().backward()
    assert np.isfinite(y.numpy()).all()  # log1pexp(±120) neither overflows nor loses the linear part
    np.testing.assert_allclose(y.numpy(), want["y"], rtol=RTOL)
    np.testing.assert_allclose(x.grad.numpy(), want["grad"], rtol=RTOL)


@pytest.mark.parametrize("name", ["log1pexp", "ste"])
@pytest.mark.parametrize("passes", ["default", "none"])  # inlined, or kept and run by the custom_call kernel
def test_compiled_gradients_match_pytorch(name, passes, torch_ref):
    want = torch_ref([name, X, COTANGENT], torch_outputs(name))
    op, cotangent = OURS[name], COTANGENT

    class Probe(nn.Module):  # d/dw of sum(op(x * w) * c) at w = 1 is sum over the batch of x * grad
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(gc.ones(X.shape[1]))

        def forward(self, x):
            return op(x * self.w)

    model = Probe()
    plan = gc.compile(model, (X, cotangent), lambda y, c: (y * c).sum(), optim.SGD(model.parameters(), lr=1.0),
                      passes=passes)
    ops = [n.op for n in plan.graph.nodes]
    assert ("custom_call" in ops) == (passes == "none")
    plan(X, cotangent)
    step_taken = 1.0 - model.w.numpy()  # SGD with lr 1: the gradient itself
    np.testing.assert_allclose(step_taken, (X * want["grad"]).sum(0), rtol=1e-5, atol=1e-5)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)

    def forward(self, x):
        return log1pexp(self.fc(x))


def test_compiled_inference_runs_the_body():
    model = Head().eval()
    infer = gc.compile(model, (X,))
    assert "custom_call" not in [n.op for n in infer.graph.nodes]  # inlined: the arena plans its ops
    np.testing.assert_allclose(infer(X), model(gc.tensor(X)).numpy(), rtol=RTOL)
    np.testing.assert_allclose(infer(X[:1]), model(gc.tensor(X[:1])).numpy(), rtol=RTOL)  # another batch size


@pytest.mark.parametrize("suffix", [".graphc", ".onnx"])
def test_export_inlines_custom_ops(suffix, tmp_path):
    if suffix == ".onnx":
        pytest.importorskip("onnx", reason="the onnx extra (CI installs it)")
    model = Head().eval()
    gc.export(model, (X,), tmp_path / f"m{suffix}")
    loaded = gc.load(tmp_path / f"m{suffix}")  # an ONNX file holds ordinary ONNX ops
    assert "custom_call" not in [n.op for n in loaded.graph.nodes]
    np.testing.assert_allclose(loaded(X), model(gc.tensor(X)).numpy(), rtol=RTOL, atol=1e-6)


def test_a_traced_train_step_uses_the_custom_backward():
    """The classic loop body, compiled: SignSTE's gradient passes through (sign's own is zero)."""
    model = nn.Linear(5, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def train_step(x):
        opt.zero_grad()
        loss = SignSTE.apply(model(x) * 0.5).sum()
        loss.backward()
        opt.step()
        return loss

    before = model.weight.numpy().copy()
    step = gc.compile(train_step, (X / 100,))
    step(X / 100)
    assert not np.allclose(model.weight.numpy(), before)


def test_the_printer_shows_the_call_and_its_bodies_once():
    text = str(gc.jit.trace(lambda x: log1pexp(x) + log1pexp(x * 2), X))
    assert text.count("custom_call[name='log1pexp', forward={log1pexp.forward}, backward={log1pexp.backward}") == 2
    assert text.count("\nbody log1pexp.forward(") == 1 and text.count("\nbody log1pexp.backward(") == 1
    assert "  %0:b1[N,5] = gt(%x0, %c0)" in text  # the body's ops, with their own source lines


def test_viewers_name_the_custom_op_and_show_its_body(tmp_path):
    graph = gc.jit.trace(lambda x: log1pexp(x), X)
    html = gc.viz.write(graph, tmp_path / "g.html").read_text()
    assert "log1pexp" in html and "body log1pexp.forward" not in html  # the label, and the body in the data:
    assert "graph log1pexp.forward(" in html


def test_inspect_lists_the_bodies_a_plan_keeps(tmp_path, capsys):
    from graphc.apps.cli import main

    model = Head()
    plan = gc.compile(model, (X, X[:, :4]), nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), passes="none")
    plan.save(tmp_path / "p.graphc")
    assert main(["inspect", str(tmp_path / "p.graphc")]) == 0
    out = capsys.readouterr().out
    assert "custom op bodies: 2" in out
    assert "log1pexp.forward" in out and "called 1x" in out and "log1pexp.backward" in out


def test_a_custom_op_keeps_a_bounded_number_of_traces():
    from graphc.core.custom_ops import MAX_TRACES

    @gc.custom_op
    class Shift:
        forward = staticmethod(lambda ctx, x, by: x + by)
        backward = staticmethod(lambda ctx, g: (g, None))

    for k in range(MAX_TRACES + 5):  # a plain value that changes every call: a trace each
        assert float(Shift(gc.tensor([1.0]), float(k)).numpy()[0]) == 1.0 + k
    assert len(Shift._traced) == MAX_TRACES


def make_training(passes="default"):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Linear(8, 3))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = model

        def forward(self, x):
            return self.body[1](SignSTE.apply(log1pexp(self.body[0](x))))

    net = Net()
    opt = optim.Adam(net.parameters(), lr=1e-2)
    xs = np.random.default_rng(3).standard_normal((4, 16, 5)).astype(np.float32)
    ys = np.random.default_rng(4).integers(0, 3, (4, 16))
    return gc.compile(net, (xs[0], ys[0]), nn.CrossEntropyLoss(), opt, passes=passes), xs, ys


RESUME = """
import sys, numpy as np, graphc as gc
plan = gc.load(sys.argv[1])
xs, ys = np.load(sys.argv[2])["xs"], np.load(sys.argv[2])["ys"]
print(" ".join(repr(float(plan(x, y))) for x, y in zip(xs[2:], ys[2:])))
"""


@pytest.mark.parametrize("passes", ["default", "none"])
def test_a_plan_with_custom_ops_resumes_training_in_a_fresh_process(passes, tmp_path):
    """The fresh process has no user code (this file is not importable there): with passes
    "none" the bodies travel in the file (format 1.4), by default their inlined ops."""
    step, xs, ys = make_training(passes)
    for x, y in zip(xs[:2], ys[:2]):
        step(x, y)
    step.save(tmp_path / "p.graphc")
    np.savez(tmp_path / "d.npz", xs=xs, ys=ys)
    expected = [float(step(x, y)) for x, y in zip(xs[2:], ys[2:])]
    done = subprocess.run([sys.executable, "-c", RESUME, str(tmp_path / "p.graphc"), str(tmp_path / "d.npz")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [float(v) for v in done.stdout.split()] == expected  # the same plan, bit for bit
    loaded = gc.load(tmp_path / "p.graphc")
    # bodies either way: the custom ops' (passes="none") or the default pipeline's fused_elementwise groups
    assert loaded.format_version == (1, 4)
    assert any(n.op in ("custom_call", "fused_elementwise") for n in loaded.graph.nodes)
    assert sum(n.op == "custom_call" for n in loaded.graph.nodes) == (4 if passes == "none" else 0)


def test_kept_and_inlined_calls_train_identically():
    default, xs, ys = make_training("default")
    kept, _, _ = make_training("none")
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(float(kept(x, y)), float(default(x, y)), rtol=1e-6)


def test_plain_arguments_and_several_outputs():
    @gc.custom_op(name="scaled_pair")
    class ScaledPair:
        @staticmethod
        def forward(ctx, a, scale, b):
            ctx.scale = scale
            ctx.save_for_backward(a, b)
            return a * b * scale, a - b

        @staticmethod
        def backward(ctx, grad_product, grad_difference):
            a, b = ctx.saved_tensors
            return grad_product * b * ctx.scale + grad_difference, None, grad_product * a * ctx.scale - grad_difference

    a, b = gc.tensor([1.0, 2.0], requires_grad=True), gc.tensor([3.0, 4.0], requires_grad=True)
    product, difference = ScaledPair(a, 0.5, b)
    (product.sum() + difference.sum()).backward()
    assert product.numpy().tolist() == [1.5, 4.0] and difference.numpy().tolist() == [-2.0, -2.0]
    assert a.grad.numpy().tolist() == [2.5, 3.0] and b.grad.numpy().tolist() == [-0.5, 0.0]
    ScaledPair(a, 2.0, b)  # another plain value: traced again
    assert len(ScaledPair._traced) == 2


def test_second_derivatives_are_a_clear_error():
    from graphc.tracing import trace_model
    from graphc.ir.builder import Builder
    from graphc.passes.autodiff import autodiff

    model = nn.Linear(5, 5)
    graph, _ = trace_model(lambda x: log1pexp(model(x)).sum(), (X,), root=model)
    graph, grads = autodiff(graph, graph.outputs[0], ["weight"])
    again = Builder(graph).emit1("sum", [grads["weight"]])  # differentiate the gradient: through the backward call
    with pytest.raises(gc.GraphcError, match="custom op 'log1pexp.backward' has no gradient"):
        autodiff(graph, again, ["weight"])


@pytest.mark.parametrize("body, message", [
    (lambda ctx, x: gc.nn.functional.dropout(x, 0.5, True), "dropout (random) cannot be used in a custom op's body"),
    (lambda ctx, x: x * CAPTURED, "a tensor that requires grad (shape (5,)) is used from outside"),
])
def test_impure_bodies_are_refused(body, message):
    class Bad:
        forward = staticmethod(body)
        backward = staticmethod(lambda ctx, g: g)

    with pytest.raises(gc.GraphcError, match=message.replace("(", r"\(").replace(")", r"\)")):
        gc.custom_op(Bad)(gc.tensor(X))


CAPTURED = nn.Parameter(gc.ones(5))


@pytest.mark.parametrize("backward, message", [
    (lambda ctx, g: (g, g), "backward returned 2 gradients for the 1 arguments of forward"),
    (lambda ctx, g: g.sum(), "backward's gradient 0 is f32[], its input is f32[2,5]"),
    (lambda ctx, g: 3, "backward's gradient 0 a int, not a tensor"),
])
def test_bad_backwards_are_clear_errors(backward, message):
    class Bad:
        forward = staticmethod(lambda ctx, x: x * 2)

    Bad.backward = staticmethod(backward)
    with pytest.raises(gc.GraphcError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        gc.custom_op(Bad)(gc.tensor(X))


def test_a_class_without_backward_is_refused():
    class NoBackward:
        @staticmethod
        def forward(ctx, x):
            return x

    with pytest.raises(gc.GraphcError, match="needs a static backward"):
        gc.custom_op(NoBackward)
