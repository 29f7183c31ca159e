"""``Tensor.repeat``, ``gc.tile`` / ``Tensor.tile`` and ``Tensor.new_tensor`` against PyTorch
2.13: values (exact: a repeat copies) and gradients (float64 sums of the copies' cotangents,
in another order than PyTorch's: 1e-12 relative), eager and compiled with a symbolic batch."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

CASES = {"same-rank": ("repeat", (2, 3)), "ones": ("repeat", (1, 1)), "more-dims": ("repeat", (3, 1, 2)),
         "tile-short": ("tile", (2,)), "tile-long": ("tile", (2, 1, 3))}


def run(lib, name):
    method, sizes = CASES[name]
    x = np.arange(6.0).reshape(2, 3)
    t = lib.tensor(x, requires_grad=True) if lib is not gc else gc.tensor(x).requires_grad_()
    out = getattr(t, method)(*sizes) if method == "repeat" else lib.tile(t, sizes)
    weights = np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
    (out * lib.tensor(weights)).sum().backward()
    return {"out": out.detach().numpy(), "grad": t.grad.numpy()}


@pytest.mark.parametrize("name", list(CASES))
def test_repeat_and_tile_match_torch(name, torch_ref):
    import importlib

    want = torch_ref([name, CASES[name]], lambda: run(importlib.import_module("torch"), name))
    got = run(gc, name)
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_allclose(got["grad"], want["grad"], rtol=1e-12, atol=1e-15)


def test_repeat_compiles_with_a_symbolic_batch_and_checks_its_arguments():
    plan = gc.compile(lambda t: t.repeat(2, 1, 3), (np.ones((4, 1, 2), np.float32),))
    assert str(plan.graph.outputs[0].type) == "f32[N*2,1,6]"
    x = np.random.default_rng(0).standard_normal((5, 1, 2)).astype(np.float32)
    np.testing.assert_array_equal(plan(x), np.tile(x, (2, 1, 3)))
    with pytest.raises(gc.GraphcError, match="can not be smaller"):
        gc.ones(2, 3).repeat(2)


def test_new_tensor_copies_with_this_tensors_dtype():
    base = gc.ones(2, dtype=gc.float64)
    data = np.array([1, 2, 3])
    made = base.new_tensor(data)
    data[0] = 7
    assert made.dtype == gc.float64 and made.tolist() == [1.0, 2.0, 3.0]
    assert base.new_tensor([1, 2], dtype=gc.int64).dtype == gc.int64
