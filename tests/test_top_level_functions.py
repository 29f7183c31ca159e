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
