"""``F.conv2d`` / ``F.conv1d`` with ``padding='same'`` where the total padding is odd (an even
kernel, or an even kernel with odd dilation): PyTorch puts the extra zero on the right; graphc
pads both ends with the larger side and drops the first output row, one conv. Forward and
gradients against PyTorch 2.13 in float64 (rounding only: 1e-12), eager and compiled.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F

CASES = {  # name: (input shape, weight shape, dilation)
    "2d-even": ((2, 3, 7, 6), (5, 3, 4, 4), 1),
    "2d-mixed": ((2, 3, 7, 6), (5, 3, 2, 3), 1),
    "2d-dilated": ((2, 3, 9, 8), (4, 3, 4, 2), (1, 2)),
    "1d-even": ((2, 3, 9), (4, 3, 4), 1),
}


def run(lib, name, compiled=False):
    x_shape, w_shape, dilation = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x, w, b = rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])
    conv = (lib.nn.functional.conv1d if len(x_shape) == 3 else lib.nn.functional.conv2d)

    def forward(xt, wt, bt):
        return conv(xt, wt, bt, padding="same", dilation=dilation)
    if compiled:
        return {"out": np.asarray(gc.compile(forward, (x, w, b))(x, w, b))}
    leaves = [lib.tensor(a, requires_grad=True) if lib is not gc else gc.tensor(a).requires_grad_() for a in (x, w, b)]
    out = forward(*leaves)
    (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))).sum().backward()
    return {"out": out.detach().numpy(), **{k: t.grad.numpy() for k, t in zip(("gx", "gw", "gb"), leaves)}}


@pytest.mark.parametrize("name", list(CASES))
def test_uneven_same_padding_matches_torch(name, torch_ref):
    import importlib

    want = torch_ref([name, CASES[name]], lambda: run(importlib.import_module("torch"), name))
    got = run(gc, name)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(run(gc, name, compiled=True)["out"], want["out"], rtol=1e-12, atol=1e-12)
    assert got["out"].shape[2:] == CASES[name][0][2:]  # 'same': the input's size
