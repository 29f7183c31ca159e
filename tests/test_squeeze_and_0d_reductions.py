"""Two of PyTorch's op_db samples graphc got wrong or refused (tests/test_op_db.py found them):
``squeeze()`` of a (1, 1, 1, 1) input compiled (the symbolic batch traced at 1 was kept, giving
(1,) where PyTorch gives ()), ``squeeze`` with a tuple of dims, and the gradient of ``sum`` /
``mean`` over dim -1 of a 0-d tensor (a reduction over the tensor itself)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 3, 1), (4, 1, 3)])
def test_squeeze_compiled_gives_the_eager_shape_at_the_traced_size(shape):
    x = np.ones(shape, np.float32)
    plan = gc.compile(lambda a: gc.squeeze(a), (x,))
    assert plan(x).shape == tuple(gc.squeeze(gc.tensor(x)).shape) == np.squeeze(x).shape


def test_squeeze_keeps_a_symbolic_batch_traced_above_one_and_takes_tuples():
    plan = gc.compile(lambda a: a.squeeze(), (np.ones((4, 1, 3), np.float32),))
    assert str(plan.graph.outputs[0].type) == "f32[N,3]"
    assert plan(np.ones((6, 1, 3), np.float32)).shape == (6, 3)
    assert tuple(gc.zeros(1, 3, 1).squeeze((0, 2)).shape) == (3,)
    assert tuple(gc.squeeze(gc.zeros(2, 1, 3), ()).shape) == (2, 1, 3)  # no dims named: nothing squeezed


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dim", [0, -1, (0,)])
def test_reductions_of_a_0d_tensor_over_its_own_dim_have_a_gradient(reduce, dim):
    s = gc.tensor(np.float32(2.5)).requires_grad_()
    y = getattr(gc, reduce)(s, dim=dim)
    assert y.shape == () and float(y.numpy()) == 2.5
    y.backward()
    assert float(s.grad.numpy()) == 1.0
