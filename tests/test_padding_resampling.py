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
