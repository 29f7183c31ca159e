"""A vjp rule may make a constant (``where``'s gradient selects against a scalar zero). Inside
the gradient of a ``scan`` or ``cond`` that constant would land in a body, which reads only its
inputs (a plan file's bodies hold none): it is hoisted into the enclosing graph and passed in
(ir/backprop.py ``hoist_constants``). A masked recurrence (packed sequences) and a branch using
``where`` train compiled exactly as eagerly (float64, the same ops), and the plans save and
load and go on training the same.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn


def masked_step(model, opt):
    def step(x, mask):
        opt.zero_grad()

        def body(c, inputs):
            g, inside = inputs
            new = (model(c) + g).tanh()
            return gc.where(inside, new, c), gc.where(inside, new, gc.zeros_like(new))
        c, ys = gc.scan(body, x[0], (x, mask))
        loss = (ys ** 2).sum() + c.sum()
        loss.backward()
        opt.step()
        return loss
    return step


def branch_step(model, opt):
    def step(x, mask):
        opt.zero_grad()
        h = model(x[0])
        out = gc.cond(h.sum() > 0, lambda t: gc.where(mask[0], t * 2.0, t), lambda t: gc.where(mask[0], t, -t), (h,))
        loss = (out ** 2).sum()
        loss.backward()
        opt.step()
        return loss
    return step


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((4, 3, 2)), rng.random((4, 3, 1)) > 0.3) for _ in range(3)]


@pytest.mark.parametrize("make_step", [masked_step, branch_step])
def test_gradients_through_bodies_using_where_train_as_eagerly_and_reload(make_step, tmp_path):
    models = []
    for _ in range(2):
        gc.manual_seed(0)
        models.append(nn.Linear(2, 2).double())
    eager = make_step(models[0], gc.optim.SGD(models[0].parameters(), lr=0.1))
    batches = _batches()
    compiled = gc.compile(make_step(models[1], gc.optim.SGD(models[1].parameters(), lr=0.1)), batches[0])
    control = [n for n in compiled.graph.nodes if n.op in ("scan", "cond")]
    assert len(control) == 2  # the forward and its gradient
    for node in control:
        for body in (v for v in node.attrs.values() if isinstance(v, gc.ir.Graph)):
            assert not body.constants  # hoisted: the gradient node reads them as inputs
    for x, mask in batches[:2]:
        loss_e = eager(gc.tensor(x), gc.tensor(mask))
        assert float(compiled(x, mask)) == pytest.approx(float(loss_e.numpy()), rel=1e-12)
    compiled.save(tmp_path / "step.graphc")
    loaded = gc.load(tmp_path / "step.graphc")
    x, mask = batches[2]
    loss_e = eager(gc.tensor(x), gc.tensor(mask))
    assert float(loaded(x, mask)) == pytest.approx(float(loss_e.numpy()), rel=1e-12)
    for name, value in models[0].state_dict().items():
        np.testing.assert_allclose(loaded.state_dict()[name], np.asarray(value), rtol=1e-12, err_msg=name)
