"""One declaration makes ``Tensor.x``, ``gc.x`` and ``F.x``: the same function object, so the
three surfaces cannot drift apart."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc.ops import surface


@pytest.mark.parametrize("name", sorted(surface.METHODS))
def test_declared_methods_are_the_declared_functions(name):
    assert getattr(gc.Tensor, name) is surface.METHODS[name]


@pytest.mark.parametrize("name", sorted(surface.TOP_LEVEL))
def test_declared_top_level_functions(name):
    fn = getattr(gc, name)  # the declared function, or it under the out= wrapper (graphc/core/out_arg.py)
    assert getattr(fn, "__wrapped__", fn) is surface.TOP_LEVEL[name] and name in gc.__all__


@pytest.mark.parametrize("name", sorted(surface.FUNCTIONAL))
def test_declared_functional_forms(name):
    assert getattr(F, name) is surface.FUNCTIONAL[name]


def test_out_argument_of_top_level_functions():
    a, out = gc.tensor([[1.0, -2.0]]), gc.zeros(1, 2)
    assert gc.abs(a, out=out) is out and out.numpy().tolist() == [[1.0, 2.0]]
    resized = gc.zeros(5)
    gc.mul(a, 2.0, out=resized)  # another shape: resized, as PyTorch does
    assert resized.shape == (1, 2) and resized.numpy().tolist() == [[2.0, -4.0]]
    with pytest.raises(gc.GraphcError, match="can't be cast"):
        gc.exp(a, out=gc.zeros(1, 2, dtype=gc.int64))
    plan = gc.compile(lambda x: gc.sub(x, 1.0, out=gc.zeros_like(x)), (np.ones((3, 2), np.float32),))
    np.testing.assert_array_equal(plan(np.ones((4, 2), np.float32)), np.zeros((4, 2), np.float32))


def test_pytorch_names_that_real_models_use():
    x = gc.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert gc.flatten(x, 1).shape == (2, 12) and F.flatten(x).shape == (24,)
    assert x.eq(5.0).numpy().sum() == 1 and x.ne(5.0).numpy().sum() == 23
    assert x.lt(2.0).numpy().sum() == 2 and x.ge(22.0).numpy().sum() == 2
    assert x.gt(x - 1).numpy().all() and x.le(x).numpy().all()
    np.testing.assert_array_equal(x.clip(1.0, 2.0).numpy(), np.clip(x.numpy(), 1.0, 2.0))


def test_declared_functions_trace_like_they_run():
    def fn(x):
        return gc.flatten(x.relu().clamp(max=2.0), 1).sigmoid()

    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    plan = gc.compile(fn, (x,))
    np.testing.assert_array_equal(plan(x), fn(gc.tensor(x)).numpy())
