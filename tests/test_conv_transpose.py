"""nn.ConvTranspose1d/2d, nn.Unfold/Fold and the conv modules' padding options against
torch.nn's modules loading the same state dict: forward and gradients (input, weight, bias)
in float64, eagerly and as compiled plans (symbolic batch), a compiled SGD step, and ONNX
round trips. The ops' own rows are in tests/op_table_conv_transpose.py."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim

torch = pytest.importorskip("torch")
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None

MODULES = {  # name -> (graphc module, torch module, input shape)
    "ct2d-dcgan": (lambda m: m.ConvTranspose2d(8, 4, 4, stride=2, padding=1), (3, 8, 5, 5)),
    "ct2d-outpad-groups": (lambda m: m.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                           (2, 4, 4, 3)),
    "ct2d-dilation-nobias": (lambda m: m.ConvTranspose2d(3, 5, (2, 3), stride=(1, 2), dilation=(2, 1), bias=False),
                             (2, 3, 4, 4)),
    "ct2d-depthwise": (lambda m: m.ConvTranspose2d(4, 4, 3, stride=2, groups=4), (2, 4, 3, 3)),
    "ct1d": (lambda m: m.ConvTranspose1d(4, 3, 3, stride=2, padding=1, output_padding=1), (3, 4, 7)),
    "ct1d-groups-dilation": (lambda m: m.ConvTranspose1d(4, 6, 2, stride=3, groups=2, dilation=2, padding=1),
                             (2, 4, 5)),
    "conv1d-all": (lambda m: m.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), (2, 4, 11)),
    "conv1d-same": (lambda m: m.Conv1d(3, 4, 4, padding="same"), (2, 3, 9)),
    "conv1d-valid": (lambda m: m.Conv1d(3, 4, 3, padding="valid", bias=False), (2, 3, 9)),
    "conv2d-same-even": (lambda m: m.Conv2d(3, 4, (2, 4), padding="same", dilation=(1, 1)), (2, 3, 6, 7)),
}
for _mode in ("reflect", "replicate", "circular"):
    MODULES[f"conv2d-{_mode}"] = (lambda m, mode=_mode: m.Conv2d(3, 4, 3, padding=(1, 2), padding_mode=mode),
                                  (2, 3, 6, 7))
    MODULES[f"conv1d-{_mode}"] = (lambda m, mode=_mode: m.Conv1d(3, 4, 3, stride=2, padding=2, padding_mode=mode),
                                  (2, 3, 8))
    MODULES[f"conv2d-same-{_mode}"] = (lambda m, mode=_mode: m.Conv2d(2, 3, (3, 4), padding="same",
                                                                       padding_mode=mode), (2, 2, 5, 6))
MODULES["conv2d-zeros-explicit"] = (lambda m: m.Conv2d(3, 4, 3, stride=2, padding=1, padding_mode="zeros"),
                                    (2, 3, 7, 7))


def _pair(name):
    make, shape = MODULES[name]
    ref = make(torch.nn).double()
    ours = make(nn)
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    ours.to(gc.float64)
    return ours, ref, shape


def _torch_grads(ref, x, r):
    xt = torch.tensor(x, requires_grad=True)
    y = ref(xt)
    (y * torch.tensor(r)).sum().backward()
    return y.detach().numpy(), [xt.grad.numpy()] + [p.grad.numpy() for p in ref.parameters()]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_matches_torch_forward_and_gradients(name):
    ours, ref, shape = _pair(name)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    y_ref, grads_ref = _torch_grads(ref, x, r := rng.standard_normal(ref(torch.tensor(x)).shape))
    xt = gc.tensor(x, requires_grad=True)
    y = ours(xt)
    assert y.shape == y_ref.shape
    np.testing.assert_allclose(y.numpy(), y_ref, rtol=1e-10, atol=1e-10)
    (y * gc.tensor(r)).sum().backward()
    grads = [xt.grad.numpy()] + [p.grad.numpy() for p in ours.parameters()]
    assert len(grads) == len(grads_ref)
    for g, gr in zip(grads, grads_ref):
        np.testing.assert_allclose(g, gr, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["ct2d-dcgan", "ct1d", "conv2d-reflect", "conv1d-circular", "conv2d-same-even"])
def test_compiled_plan_symbolic_batch(name):
    ours, ref, shape = _pair(name)
    rng = np.random.default_rng(1)
    plan = gc.compile(ours.eval(), example_inputs=(rng.standard_normal(shape),))
    for batch in (shape[0], 5, 1):
        x = rng.standard_normal((batch,) + shape[1:])
        np.testing.assert_allclose(np.asarray(plan(x)), ref(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["ct2d-dcgan", "ct2d-outpad-groups", "ct1d", "conv2d-replicate"])
def test_compiled_sgd_step_matches_torch(name):
    ours, ref, shape = _pair(name)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    target = rng.standard_normal(ref(torch.tensor(x)).shape)
    step = gc.compile(ours.train(), example_inputs=(x, target), loss_fn=nn.MSELoss(),
                      optimizer=optim.SGD(ours.parameters(), lr=0.1, momentum=0.9))
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        loss = step(x, target)
        topt.zero_grad()
        tloss = torch.nn.functional.mse_loss(ref(torch.tensor(x)), torch.tensor(target))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(float(loss), tloss.item(), rtol=1e-10)
    for key, value in ref.state_dict().items():
        np.testing.assert_allclose(np.asarray(ours.state_dict()[key]), value.numpy(), rtol=1e-9, atol=1e-12)


def test_output_size_and_its_errors():
    ours, ref, _ = _pair("ct2d-outpad-groups")
    x = np.random.default_rng(3).standard_normal((2, 4, 4, 3))
    for size in ([7, 5], [8, 6], (2, 6, 8, 5)):
        got = ours(gc.tensor(x), output_size=size).numpy()
        np.testing.assert_allclose(got, ref(torch.tensor(x), output_size=size).detach().numpy(), atol=1e-12)
    with pytest.raises(gc.GraphcError, match="valid sizes range"):
        ours(gc.tensor(x), output_size=[10, 5])
    with pytest.raises(gc.GraphcError, match="zeros"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


def test_init_statistics_match_torch_bounds():
    m = nn.ConvTranspose2d(16, 8, 4, groups=2)
    assert m.weight.shape == (16, 4, 4, 4) and m.bias.shape == (8,)
    bound = 1 / np.sqrt(4 * 16)  # PyTorch: fan_in = weight.size(1) * kernel = out/groups * kH * kW
    assert np.abs(m.weight.numpy()).max() <= bound and np.abs(m.weight.numpy()).max() > 0.8 * bound
    assert np.abs(m.bias.numpy()).max() <= bound


def test_unbatched_and_functional_forms():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 2, 3, 3)), rng.standard_normal(2)
    got = F.conv_transpose2d(gc.tensor(x), gc.tensor(w), gc.tensor(b), stride=2, padding=1).numpy()
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=2, padding=1)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-12)
    assert gc.conv_transpose1d.__wrapped__ is F.conv_transpose1d  # gc.x adds out= (graphc/core/out_arg.py)
    x1, w1 = rng.standard_normal((3, 6)), rng.standard_normal((3, 2, 2))
    np.testing.assert_allclose(F.conv_transpose1d(gc.tensor(x1), gc.tensor(w1), stride=2).numpy(),
                               torch.nn.functional.conv_transpose1d(torch.tensor(x1), torch.tensor(w1), stride=2),
                               atol=1e-12)
    img = rng.standard_normal((2, 5, 6))
    cols = F.unfold(gc.tensor(img), (2, 3), padding=1).numpy()
    # unfold only copies values (float64, no arithmetic): they must be equal
    np.testing.assert_array_equal(cols, torch.nn.functional.unfold(torch.tensor(img), (2, 3), padding=1).numpy())
    np.testing.assert_allclose(F.fold(gc.tensor(cols), (5, 6), (2, 3), padding=1).numpy(),
                               torch.nn.functional.fold(torch.tensor(cols), (5, 6), (2, 3), padding=1), atol=1e-12)


def test_fold_unfold_modules_and_gradients():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 7, 6))
    kw = dict(kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    xt, xr = gc.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    cols, cols_ref = nn.Unfold(**kw)(xt), torch.nn.Unfold(**kw)(xr)
    back, back_ref = nn.Fold((7, 6), **kw)(cols * cols), torch.nn.Fold((7, 6), **kw)(cols_ref * cols_ref)
    np.testing.assert_allclose(back.numpy(), back_ref.detach().numpy(), rtol=1e-12)
    r = rng.standard_normal(back.shape)
    (back * gc.tensor(r)).sum().backward()
    (back_ref * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert repr(nn.Fold((7, 6), 2)) == repr(torch.nn.Fold((7, 6), 2))


class _Exported(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.conv = nn.Conv2d(6, 3, 3, padding=1, padding_mode="reflect")
        self.unfold = nn.Unfold((2, 3), padding=1, stride=(1, 2), dilation=(2, 1))
        self.fold = nn.Fold((10, 10), (2, 3), padding=1, stride=(1, 2), dilation=(2, 1))
        self.circular = nn.Conv1d(3, 2, 4, padding="same", padding_mode="circular")
        self.same = nn.Conv1d(3, 2, 4, padding="same")
        self.up1d = nn.ConvTranspose1d(3, 2, 3, stride=2)

    def forward(self, x):
        y = self.conv(self.up(x))
        cols = self.unfold(y)
        r = y.reshape(y.shape[0], 3, 100)
        return y, cols, self.fold(cols), self.circular(r), self.same(r), self.up1d(r)


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
def test_onnx_export_runs_in_onnxruntime_at_two_batch_sizes(tmp_path):
    import onnxruntime as ort

    model = _Exported().eval()
    rng = np.random.default_rng(6)
    path = str(tmp_path / "conv.onnx")
    gc.export(model, (rng.standard_normal((2, 4, 5, 5)).astype(np.float32),), path)
    session = ort.InferenceSession(path)
    for batch in (2, 3):
        x = rng.standard_normal((batch, 4, 5, 5)).astype(np.float32)
        got = session.run(None, {session.get_inputs()[0].name: x})
        want = [t.numpy() for t in model(gc.tensor(x))]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
