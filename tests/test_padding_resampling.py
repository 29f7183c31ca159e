"""F.pad in every mode, the padding modules, pixel (un)shuffle, interpolation (F.interpolate,
nn.Upsample) and grid sampling against PyTorch: forward and gradients (float64, so that a
wrong index or weight is not hidden by float32 noise), PyTorch's error messages, and compiled
plans with a symbolic batch dim."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_RNG = np.random.default_rng(3303)


def _check(fn, torch_fn, *arrays, tol=1e-10, grad=True):
    """fn over graphc tensors and torch_fn over torch tensors agree, forward and backward."""
    ours = [gc.tensor(a, requires_grad=grad) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=grad) for a in arrays]
    out, ref = fn(*ours), torch_fn(*theirs)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    if grad:
        g = _RNG.standard_normal(tuple(ref.shape))
        (out * gc.tensor(g)).sum().backward()
        (ref * torch.tensor(g)).sum().backward()
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)


# ---- F.pad and the padding modules -----------------------------------------------------------

_PADS = [((2, 3, 6), (1, 2)), ((2, 3, 6), (-2, 3)), ((3, 6), (5, 0)), ((2, 3, 5, 6), (1, 2, 3, 1)),
         ((3, 5, 6), (2, -1, 0, 4)), ((1, 2, 3, 4, 5), (1, 2, 2, 1, 0, 2)), ((2, 3, 4, 5), (1, 1, 2, 0, 1, 1)),
         ((2, 1, 1), (0, 0)), ((2, 3, 1), (0, 3))]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", _PADS)
def test_pad_modes_match_torch(mode, shape, pad):
    x = _RNG.standard_normal(shape)
    try:
        TF.pad(torch.tensor(x), pad, mode)
    except (RuntimeError, NotImplementedError) as err:
        with pytest.raises(gc.GraphcError, match=str(err).splitlines()[0][:30].replace("(", r"\(").replace(
                "[", r"\[")):
            F.pad(gc.tensor(x), pad, mode)
        return
    _check(lambda t: F.pad(t, pad, mode), lambda t: TF.pad(t, pad, mode), x)


@pytest.mark.parametrize("pad,mode,value,shape", [
    ((6, 1), "reflect", None, (1, 2, 6)), ((1, 1), "reflect", 1.0, (1, 2, 6)), ((1, 1), "reflect", None, (6,)),
    ((7, 0), "circular", None, (1, 2, 6)), ((1,), "reflect", None, (1, 2, 6)), ((1, 1), "foo", None, (1, 2, 6)),
    ((1,) * 8, "constant", None, (1, 2, 6)), ((1,) * 8, "replicate", None, (1, 1, 2, 2, 2, 2)),
    ((1, 1), "replicate", None, (4, 0))])
def test_pad_errors_are_torchs(pad, mode, value, shape):
    with pytest.raises(Exception) as theirs:
        TF.pad(torch.zeros(shape), pad, mode, value)
    with pytest.raises(gc.GraphcError) as ours:
        F.pad(gc.zeros(*shape), pad, mode, value)
    assert str(ours.value) == str(theirs.value)


_MODULES = [("ReflectionPad1d", 2, (2, 3, 5)), ("ReflectionPad1d", (1, 3), (3, 5)),
            ("ReflectionPad2d", (1, 0, 2, 1), (2, 3, 4, 5)), ("ReflectionPad3d", 1, (1, 2, 3, 4, 5)),
            ("ReplicationPad1d", (3, 1), (2, 3, 4)), ("ReplicationPad2d", 2, (2, 3, 4, 5)),
            ("ReplicationPad3d", (1, 0, 2, 1, 0, 1), (1, 2, 3, 4, 5)), ("CircularPad1d", 2, (2, 3, 4)),
            ("CircularPad2d", (1, 2, 0, 3), (2, 3, 4, 5)), ("CircularPad3d", 1, (1, 2, 3, 4, 5)),
            ("ZeroPad1d", (1, 2), (2, 3, 4)), ("ZeroPad2d", (1, 1, 2, 0), (2, 3, 4, 5)), ("ZeroPad3d", 1, (1, 2, 2, 2, 2)),
            ("ConstantPad1d", (2, 1), (2, 3, 4)), ("ConstantPad2d", 1, (2, 3, 4, 5)),
            ("ConstantPad3d", (1, 0, 0, 1, 2, 0), (1, 2, 2, 2, 2))]


@pytest.mark.parametrize("name,padding,shape", _MODULES)
def test_padding_modules_match_torch(name, padding, shape):
    args = (padding, 2.5) if name.startswith("Constant") else (padding,)
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert ours.padding == theirs.padding
    _check(ours, theirs, _RNG.standard_normal(shape))


def test_padding_compiles_with_a_symbolic_batch():
    model = nn.Sequential(nn.ReflectionPad2d((1, 2, 2, 1)), nn.ReplicationPad2d(1), nn.CircularPad2d((2, 0, 1, 1)))
    reference = torch.nn.Sequential(torch.nn.ReflectionPad2d((1, 2, 2, 1)), torch.nn.ReplicationPad2d(1),
                                    torch.nn.CircularPad2d((2, 0, 1, 1)))
    x = _RNG.standard_normal((4, 3, 5, 6)).astype(np.float32)
    plan = gc.compile(model.eval(), example_inputs=(x,))
    for batch in (4, 2):
        np.testing.assert_array_equal(plan(x[:batch]), reference(torch.tensor(x[:batch])).numpy())


# ---- pixel (un)shuffle -------------------------------------------------------------------------

@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((18, 2, 3), 3), ((2, 3, 4, 2, 2), 2), ((1, 4, 1, 1), 1)])
def test_pixel_shuffle_matches_torch(shape, r):
    x = _RNG.standard_normal(shape)
    _check(lambda t: F.pixel_shuffle(t, r), lambda t: TF.pixel_shuffle(t, r), x, tol=0)
    y = _RNG.standard_normal(shape[:-3] + (shape[-3], shape[-2] * r, shape[-1] * r))
    _check(lambda t: F.pixel_unshuffle(t, r), lambda t: TF.pixel_unshuffle(t, r), y, tol=0)
    assert repr(nn.PixelShuffle(r)) == repr(torch.nn.PixelShuffle(r))
    _check(nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r), y, tol=0)


@pytest.mark.parametrize("fn,shape", [("pixel_shuffle", (2, 5, 3, 3)), ("pixel_shuffle", (4, 3)),
                                      ("pixel_unshuffle", (2, 1, 5, 4)), ("pixel_unshuffle", (2, 1, 4, 5))])
def test_pixel_shuffle_errors_are_torchs(fn, shape):
    with pytest.raises(RuntimeError) as theirs:
        getattr(TF, fn)(torch.zeros(shape), 2)
    with pytest.raises(gc.GraphcError) as ours:
        getattr(F, fn)(gc.zeros(*shape), 2)
    assert str(ours.value) == str(theirs.value)


# ---- F.interpolate and nn.Upsample -------------------------------------------------------------

_SIZES = [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.6), dict(size=(9, 4, 6)),
          dict(scale_factor=1.3, recompute_scale_factor=True), dict(scale_factor=(2.5, 0.75, 1.5)), dict(size=1),
          dict(scale_factor=3)]


def _per_dim(kw, spatial):
    return {k: v[:spatial] if isinstance(v, tuple) else v for k, v in kw.items()}


@pytest.mark.parametrize("mode,shape", [("nearest", (2, 3, 5, 7)), ("nearest-exact", (2, 3, 5, 7)),
                                        ("bilinear", (2, 3, 5, 7)), ("bicubic", (2, 3, 5, 7)), ("linear", (2, 3, 7)),
                                        ("area", (2, 3, 5, 7)), ("nearest", (2, 3, 7)), ("trilinear", (1, 2, 3, 4, 5)),
                                        ("nearest", (1, 2, 3, 4, 5)), ("area", (1, 2, 3, 4, 5))])
@pytest.mark.parametrize("align_corners", [None, False, True])
@pytest.mark.parametrize("sizes", _SIZES)
def test_interpolate_matches_torch(mode, shape, align_corners, sizes):
    if align_corners is not None and mode in ("nearest", "nearest-exact", "area"):
        with pytest.raises(gc.GraphcError, match="align_corners option can only be set"):
            F.interpolate(gc.zeros(*shape), scale_factor=2, mode=mode, align_corners=align_corners)
        return
    kw = _per_dim(sizes, len(shape) - 2)
    _check(lambda t: F.interpolate(t, mode=mode, align_corners=align_corners, **kw),
           lambda t: TF.interpolate(t, mode=mode, align_corners=align_corners, **kw), _RNG.standard_normal(shape))


def test_interpolate_float32_and_errors():
    x = _RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    for mode in ("nearest", "bilinear", "bicubic"):
        ref = TF.interpolate(torch.tensor(x), scale_factor=1.5, mode=mode).numpy()
        np.testing.assert_allclose(F.interpolate(gc.tensor(x), scale_factor=1.5, mode=mode).numpy(), ref, atol=2e-6)
    with pytest.raises(gc.GraphcError, match="Got 3D input, but bilinear mode needs 4D input"):
        F.interpolate(gc.zeros(1, 2, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(gc.GraphcError, match="only one of size or scale_factor"):
        F.interpolate(gc.zeros(1, 2, 3), size=4, scale_factor=2)


@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(size=(3, 4), mode="bilinear"),
                                    dict(scale_factor=(2, 1.5), mode="bicubic", align_corners=True),
                                    dict(scale_factor=0.5, mode="area")])
def test_upsample_module_matches_torch(kwargs):
    ours, theirs = nn.Upsample(**kwargs), torch.nn.Upsample(**kwargs)
    assert repr(ours) == repr(theirs)
    _check(ours, theirs, _RNG.standard_normal((2, 3, 4, 6)))
    _check(nn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2),
           _RNG.standard_normal((1, 2, 3, 3)))


def test_resampling_compiles_with_a_symbolic_batch():
    model = nn.Sequential(nn.Upsample(scale_factor=1.5, mode="bilinear"), nn.PixelUnshuffle(2),
                          nn.Upsample(size=(5, 7), mode="bicubic", align_corners=True), nn.PixelShuffle(2),
                          nn.Upsample(scale_factor=2))
    reference = torch.nn.Sequential(torch.nn.Upsample(scale_factor=1.5, mode="bilinear"), torch.nn.PixelUnshuffle(2),
                                    torch.nn.Upsample(size=(5, 7), mode="bicubic", align_corners=True),
                                    torch.nn.PixelShuffle(2), torch.nn.Upsample(scale_factor=2))
    x = _RNG.standard_normal((4, 3, 4, 8)).astype(np.float32)
    plan = gc.compile(model.eval(), example_inputs=(x,))
    for batch in (4, 1):
        np.testing.assert_allclose(plan(x[:batch]), reference(torch.tensor(x[:batch])).numpy(), atol=1e-5)


# ---- F.grid_sample and F.affine_grid --------------------------------------------------------------

@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    x = _RNG.standard_normal((2, 3, 5, 6))
    grid = _RNG.uniform(-1.4, 1.4, (2, 4, 7, 2))  # beyond [-1, 1]: the padding mode matters
    if mode == "bilinear":  # gradients w.r.t. input and grid
        _check(lambda a, g: F.grid_sample(a, g, mode, padding_mode, align_corners),
               lambda a, g: TF.grid_sample(a, g, mode, padding_mode, align_corners), x, grid)
        return
    _check(lambda a: F.grid_sample(a, gc.tensor(grid), mode, padding_mode, align_corners),
           lambda a: TF.grid_sample(a, torch.tensor(grid), mode, padding_mode, align_corners), x)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 3, 4, 5), (2, 1, 1, 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(size, align_corners):
    theta = _RNG.standard_normal((2, len(size) - 2, len(size) - 1))
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        _check(lambda t: F.affine_grid(t, size, align_corners=align_corners),
               lambda t: TF.affine_grid(t, size, align_corners=align_corners), theta)


def test_spatial_transformer_compiles_with_a_symbolic_batch():
    def warp(x, theta):
        return F.grid_sample(x, F.affine_grid(theta, (x.shape[0], 3, 6, 5), align_corners=False),
                             padding_mode="border", align_corners=False)
    x = _RNG.standard_normal((4, 3, 5, 6)).astype(np.float32)
    theta = (np.eye(2, 3) + 0.2 * _RNG.standard_normal((4, 2, 3))).astype(np.float32)
    plan = gc.compile(warp, example_inputs=(x, theta))
    for batch in (4, 2):
        ref = TF.grid_sample(torch.tensor(x[:batch]), TF.affine_grid(torch.tensor(theta[:batch]), (batch, 3, 6, 5),
                                                                     align_corners=False),
                             padding_mode="border", align_corners=False)
        np.testing.assert_allclose(plan(x[:batch], theta[:batch]), ref.numpy(), atol=1e-5)
