"""torch.fft and complex tensors against PyTorch: values and result dtypes of every transform
(real and complex inputs, n/s/dim/norm), gradients through complex intermediates, compiled ==
eager, and the refusals (ops without complex kernels or complex gradient rules, plan files,
ONNX)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(34)
X = RNG.standard_normal((4, 6, 5))
Z = X + 1j * RNG.standard_normal((4, 6, 5))

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn"]
KWARGS_1D = [{}, {"n": 8, "dim": 1, "norm": "ortho"}, {"n": 3, "norm": "forward"}, {"dim": 0}]
KWARGS_ND = [{}, {"s": (3, 8), "dim": (1, 2), "norm": "ortho"}, {"s": (4,)}, {"dim": (0, 2), "norm": "forward"},
             {"s": (-1, 7)}]


def _np(t):
    return t.detach().resolve_conj().numpy() if hasattr(t, "resolve_conj") else t.numpy()


def _same(g, t, tol):
    a, e = g.numpy(), _np(t)
    assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
    np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, float(np.abs(e).max(initial=0))))


CASES = [(name, kw) for name in ONE_D for kw in KWARGS_1D] + [(name, kw) for name in N_D for kw in KWARGS_ND]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("data,dtype", [(X, np.float32), (X, np.float64), (Z, np.complex64), (Z, np.complex128)],
                         ids=["f32", "f64", "c64", "c128"])
def test_transform_matches_torch(name, kwargs, data, dtype):
    a = data.astype(dtype)
    try:
        expected = getattr(torch.fft, name)(torch.from_numpy(a), **kwargs)
    except RuntimeError:
        with pytest.raises(gc.GraphcError):
            getattr(gc.fft, name)(gc.tensor(a), **kwargs)
        return
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    _same(getattr(gc.fft, name)(gc.tensor(a), **kwargs), expected, tol)


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("dim", [None, 0, (1, 2), -1])
def test_shifts_match_torch(name, dim):
    for a in (X, Z.astype(np.complex64), np.arange(30).reshape(5, 6, 1)):
        _same(getattr(gc.fft, name)(gc.tensor(a), dim=dim), getattr(torch.fft, name)(torch.from_numpy(a), dim=dim), 0)


def test_frequencies_match_torch():
    for n in (1, 4, 7):
        _same(gc.fft.fftfreq(n, 0.5), torch.fft.fftfreq(n, 0.5), 1e-7)
        _same(gc.fft.rfftfreq(n), torch.fft.rfftfreq(n), 1e-7)


W = RNG.standard_normal((4, 6, 5))
W2 = RNG.standard_normal((4, 3, 7))
GRAD_CASES = {
    "rfft-real-sq": lambda L, x: (L.fft.rfft(x, dim=1).real ** 2).sum(),
    "rfft-imag-n": lambda L, x: (L.fft.rfft(x, n=9, norm="ortho").imag * 3).sum(),
    "fft-view_as_real": lambda L, x: (L.view_as_real(L.fft.fft(x, n=4, dim=0)) ** 2).sum(),
    "fftn-angle": lambda L, x: (L.angle(L.fft.fftn(x, s=(3, 7))) * L.tensor(W2)).sum(),
    "ifft2-real": lambda L, x: (L.fft.ifft2(x, norm="forward").real * L.tensor(W)).sum(),
    "irfft-rfft": lambda L, x: (L.fft.irfft(L.fft.rfft(x), n=5) * L.tensor(W)).sum(),
    "irfftn-fftn": lambda L, x: (L.fft.irfftn(L.fft.fftn(x), s=(6, 5), dim=(1, 2)) * L.tensor(W)).sum(),
    "irfft-real-input": lambda L, x: (L.fft.irfft(x, n=7, norm="ortho") * L.tensor(W[:, :, :1])).sum(),
    "hfft-ihfft": lambda L, x: (L.fft.hfft(L.fft.ihfft(x, norm="ortho"), n=7) ** 2).sum(),
    "hfft2-real-input": lambda L, x: (L.fft.hfft2(x, s=(5, 6)) * L.tensor(W[:, :5, :1])).sum(),
    "complex-conj": lambda L, x: L.view_as_real(L.conj(L.complex(x, x * 2)) + L.complex(x * x, x)).sum(),
    "polar": lambda L, x: L.view_as_real(L.polar(x.abs() + 1, x)).pow(2).sum(),
    "sgn": lambda L, x: L.view_as_real(L.sgn(L.fft.fft(x)) * 3).pow(2).sum() + L.sgn(x).sum(),
    "rfft-abs": lambda L, x: (L.fft.rfft(x, dim=1).abs() * L.tensor(W[:, :4, :])).sum(),
    "fft-abs-zero": lambda L, x: abs(L.fft.fft(x * 0 + 1)).sum(),
    "fftshift-fft": lambda L, x: L.view_as_real(L.fft.fftshift(L.fft.fft(x), dim=(0, 2))).pow(2).sum(),
    "complex-mul-div": lambda L, x: L.view_as_real(L.fft.fft(x) * L.fft.fft(x * x) / (L.fft.fft(x + 3) + 1)).sum(),
    "cast-complex": lambda L, x: L.view_as_real(L.fft.fft(x.to(L.complex128) * 2 - x)).pow(2).sum(),
    "view_as_complex": lambda L, x: L.view_as_real(L.view_as_complex(x.reshape(4, 15, 2)) * 2).pow(3).sum(),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_through_complex_values_match_torch(name):
    f = GRAD_CASES[name]
    x = gc.tensor(X, requires_grad=True)
    f(gc, x).backward()
    tx = torch.tensor(X, requires_grad=True)
    f(torch, tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_compiled_matches_eager_with_symbolic_batch():
    def fn(a, b):
        spectrum = gc.fft.rfft2(a, norm="ortho") * gc.fft.fft(b, n=3)[..., :1]
        return gc.fft.irfft2(spectrum, s=(6, 5), norm="ortho"), gc.view_as_real(gc.fft.fftshift(spectrum, dim=(0, 1)))

    a, b = X.astype(np.float32), Z.astype(np.complex64)
    plan = gc.compile(fn, example_inputs=(a, b))
    for n in (4, 2):
        got = plan(a[:n], b[:n])
        want = fn(gc.tensor(a[:n]), gc.tensor(b[:n]))
        for g, w in zip(got, want):
            assert g.dtype == w.numpy().dtype
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6)


def test_compiled_gradient_through_fft():
    model = gc.nn.Linear(5, 5).double()
    opt = gc.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = gc.view_as_real(gc.fft.rfft(model(x))).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    x = X[:, 0, :]
    eager = gc.nn.Linear(5, 5).double()
    eager.load_state_dict(model.state_dict())
    plan = gc.compile(step, example_inputs=(x,))
    plan(x)
    loss = gc.view_as_real(gc.fft.rfft(eager(gc.tensor(x)))).pow(2).sum()
    loss.backward()
    np.testing.assert_allclose(model.weight.numpy(), eager.weight.numpy() - 0.1 * eager.weight.grad.numpy(),
                               rtol=1e-9, atol=1e-9)


def test_dtypes_and_promotion():
    assert gc.cfloat is gc.complex64 and gc.cdouble is gc.complex128
    z = gc.tensor([1 + 2j])
    assert z.dtype is gc.complex64 and z.is_complex() and not z.is_floating_point()
    assert (z + gc.tensor([1.0], dtype=gc.float64)).dtype is gc.complex128
    assert (z * 2.5).dtype is gc.complex64 and (z.cdouble() + 1).dtype is gc.complex128
    assert gc.tensor([1.0]).cfloat().dtype is gc.complex64 and gc.tensor([1]).cdouble().dtype is gc.complex128
    assert z.real.dtype is gc.float32 and z.imag.numpy().tolist() == [2.0]
    assert z.float().numpy().tolist() == [1.0]  # complex to real keeps the real part, as PyTorch


def test_real_input_parts_match_torch():
    x = X.astype(np.float32)
    for name in ("real", "conj", "resolve_conj", "resolve_neg", "angle", "conj_physical", "isreal"):
        _same(getattr(gc, name)(gc.tensor(x)), getattr(torch, name)(torch.from_numpy(x)), 1e-6)
    special = np.array([-1.0, 0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    _same(gc.angle(gc.tensor(special)), torch.angle(torch.from_numpy(special)), 0)
    _same(gc.angle(gc.tensor(np.array([-2, 0, 3]))), torch.angle(torch.tensor([-2, 0, 3])), 0)
    with pytest.raises(gc.GraphcError, match="non-complex"):
        gc.imag(gc.tensor(x))
    with pytest.raises(gc.GraphcError, match="complex tensors"):
        gc.view_as_real(gc.tensor(x))


def test_refusals():
    z = gc.tensor(Z.astype(np.complex64))
    with pytest.raises(gc.ShapeError, match="exp does not take complex"):
        gc.exp(z)
    with pytest.raises(gc.ShapeError, match="real input"):
        gc.fft.rfft(z)
    with pytest.raises(gc.ShapeError, match="Invalid normalization"):
        gc.fft.fft(z, norm="both")
    with pytest.raises(gc.ShapeError, match="Invalid number of data points"):
        gc.fft.fft(z, n=0)
    with pytest.raises(gc.ShapeError, match="last dimension of size 2"):
        gc.view_as_complex(gc.zeros(3, 3))
    with pytest.raises(gc.ShapeError, match="float32 or float64"):
        gc.complex(gc.zeros(2), gc.zeros(2, dtype=gc.float64))


def test_where_on_complex_values_differentiates():
    def f(L, x):
        spectrum = L.fft.rfft(x)
        return L.where(spectrum.real > 0, spectrum, spectrum * 2).imag.sum()

    x, tx = gc.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    f(gc, x).backward()
    f(torch, tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_plan_files_and_onnx_refuse_complex(tmp_path):
    plan = gc.compile(lambda a: gc.fft.rfft(a).imag, example_inputs=(X.astype(np.float32),))
    with pytest.raises(gc.GraphcError, match="complex64"):
        plan.save(str(tmp_path / "p.gcp"))

    class Model(gc.nn.Module):
        def forward(self, a):
            return (a.cfloat() * 2).real

    with pytest.raises(gc.GraphcError, match="complex"):
        gc.onnx.export(Model(), (gc.zeros(3, 4),), str(tmp_path / "m.onnx"))


def test_complex_leaf_gradient_matches_torch():
    w = Z[::-1].copy()

    def f(L, z):
        return L.view_as_real(L.fft.ifft(z * L.tensor(w)) / (z + 2)).sum() + (z.conj() * z).real.sum()

    z, tz = gc.tensor(Z, requires_grad=True), torch.tensor(Z, requires_grad=True)
    f(gc, z).backward()
    f(torch, tz).backward()
    assert z.grad.dtype is gc.complex128
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-9, atol=1e-9)
    with pytest.raises(gc.GraphcError, match="floating-point scalar"):
        gc.tensor(Z, requires_grad=True).sum().backward()  # PyTorch: only real scalar outputs


def test_complex_scalars_eager_and_traced():
    x = X.astype(np.float32)
    assert (gc.tensor(x) * np.complex64(1j)).dtype is gc.complex64
    assert (gc.tensor(X) * 1j).dtype is gc.complex128
    plan = gc.compile(lambda a: (gc.fft.fft(a) * (1 + 2j)).imag, example_inputs=(x,))
    np.testing.assert_allclose(plan(x), (np.fft.fft(x) * (1 + 2j)).imag, rtol=1e-5, atol=1e-4)


def test_complex_random_draws():
    z = gc.randn(20000, dtype=gc.complex64).numpy()
    assert z.dtype == np.complex64 and abs(z.real.var() - 0.5) < 0.05 and abs(z.imag.var() - 0.5) < 0.05
    u = gc.rand(1000, dtype=gc.cdouble).numpy()
    assert u.dtype == np.complex128 and 0 <= u.real.min() and u.imag.max() < 1 and u.imag.std() > 0.2


STFT_CASES = [dict(n_fft=10, return_complex=True), dict(n_fft=10, return_complex=False),
              dict(n_fft=7, center=False, return_complex=True),
              dict(n_fft=16, hop_length=3, win_length=10, normalized=True, return_complex=True, window=True),
              dict(n_fft=12, pad_mode="constant", onesided=False, return_complex=True)]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kwargs", STFT_CASES, ids=[str(i) for i in range(len(STFT_CASES))])
def test_stft_matches_torch(kwargs):
    kwargs = dict(kwargs)
    window = torch.hann_window(10, dtype=torch.float64) if kwargs.pop("window", False) else None
    signal = RNG.standard_normal((2, 100))
    for s in (signal, signal[0]):
        expected = torch.stft(torch.from_numpy(s), window=window, **kwargs)
        got = gc.stft(gc.tensor(s), window=None if window is None else gc.tensor(window.numpy()), **kwargs)
        _same(got, expected, 1e-12)
    x, tx = gc.tensor(signal, requires_grad=True), torch.tensor(signal, requires_grad=True)
    out = gc.stft(x, window=None if window is None else gc.tensor(window.numpy()), **kwargs)
    tout = torch.stft(tx, window=window, **kwargs)
    if kwargs["return_complex"]:
        out, tout = gc.view_as_real(out), torch.view_as_real(tout)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_stft_refusals():
    with pytest.raises(gc.GraphcError, match="return_complex"):
        gc.stft(gc.ones(32), 8)
    with pytest.raises(gc.ShapeError, match="shorter than n_fft"):
        gc.stft(gc.ones(4), 8, center=False, return_complex=True)
    # a 1-D signal's length is the batch dim: the plan is specialized at it, and refuses another
    plan = gc.compile(lambda a: gc.stft(a, 8, center=False, return_complex=True).real, example_inputs=(np.ones(32),))
    with pytest.raises(gc.ShapeError, match="batch size 32, got 40.*stft"):
        plan(np.ones(40))
