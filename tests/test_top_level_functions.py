"""The ``torch.x`` forms of functional ops that PyTorch keeps at the top level with
``F.x``'s signature (``torch.selu``, ``torch.max_pool2d``, ...): each ``gc.x`` is ``F.x``
and gives PyTorch 2.13's numbers (float64: rounding only)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import graphc as gc

CALLS = {  # name: (input shape, extra arguments)
    "selu": ((2, 4, 6, 6), ()), "celu": ((2, 4, 6, 6), ()), "threshold": ((2, 4, 6, 6), (0.1, 20.0)),
    "max_pool1d": ((4, 6, 6), (2,)), "max_pool2d": ((2, 4, 6, 6), (2,)), "avg_pool1d": ((4, 6, 6), (3,)),
    "adaptive_avg_pool1d": ((4, 6, 6), (3,)), "pixel_shuffle": ((2, 4, 6, 6), (2,)),
    "pixel_unshuffle": ((2, 4, 6, 6), (2,)), "prelu": ((2, 4, 6, 6), "weight"),
}


def run(lib, name):
    shape, extra = CALLS[name]
    x = np.random.default_rng(sum(map(ord, name))).standard_normal(shape)
    args = (lib.tensor(np.linspace(0.1, 0.4, 4)),) if extra == "weight" else extra
    return {"out": getattr(lib, name)(lib.tensor(x), *args).numpy()}


@pytest.mark.parametrize("name", list(CALLS))
def test_top_level_form_matches_torch(name, torch_ref):
    assert getattr(gc, name) is getattr(gc.nn.functional, name)
    want = torch_ref([name, CALLS[name][0]], lambda: run(importlib.import_module("torch"), name))
    np.testing.assert_allclose(run(gc, name)["out"], want["out"], rtol=1e-12, atol=1e-12)


def test_trace_is_the_matrix_trace_and_the_tracer_is_jit_trace(torch_ref):
    """DESIGN.md: ``gc.jit.trace`` is graphc's tracer; ``gc.trace`` means what ``torch.trace``
    means (a name that means something else would be a porting hazard)."""
    x = np.arange(12.0).reshape(3, 4)

    def run(lib):
        t = lib.tensor(x, requires_grad=True) if lib is not gc else gc.tensor(x).requires_grad_()
        out = lib.trace(t)
        out.backward()
        return {"out": np.asarray(out.detach().numpy()), "grad": t.grad.numpy()}
    want = torch_ref([x], lambda: run(importlib.import_module("torch")))
    got = run(gc)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    assert gc.tensor(x).trace().item() == 15.0
    graph = gc.jit.trace(gc.nn.Linear(4, 2), np.zeros((8, 4), np.float32))
    assert [str(v.type) for v in graph.outputs] == ["f32[N,2]"]
    with pytest.raises(gc.ShapeError, match="expected a matrix"):
        gc.trace(gc.ones(2, 2, 2))
