"""The bitwise functions and operators as a PyTorch user writes them (``& | ^ ~ << >>``, their
reflected and in-place forms, gc.bitwise_*), eager and compiled, against PyTorch; the op table
(tests/op_table_bitwise.py) holds the primitives' own samples."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(3839)


def _both(fn, *arrays):
    """fn on graphc tensors (eager and compiled) and on torch tensors, as numpy arrays."""
    eager = fn(*(gc.tensor(a) for a in arrays)).numpy()
    compiled = np.asarray(gc.compile(fn, example_inputs=tuple(arrays))(*arrays))
    want = fn(*(torch.from_numpy(a) for a in arrays)).numpy()
    return eager, compiled, want


@pytest.mark.parametrize("fn", [lambda a, b: a & b, lambda a, b: a | 3, lambda a, b: 5 ^ a, lambda a, b: ~a,
                                lambda a, b: a << (b & 7), lambda a, b: 1 >> a.abs(),
                                lambda a, b: a.bitwise_xor(b).bitwise_not(), lambda a, b: gc_or_torch(a).bitwise_and(a, b)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int16])
def test_operators_match_torch(fn, dtype):
    a = _RNG.integers(0 if dtype == np.uint8 else -50, 100, (3, 4)).astype(dtype)
    b = _RNG.integers(0, 100, (4,)).astype(dtype)
    eager, compiled, want = _both(fn, a, b)
    for got in (eager, compiled):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def gc_or_torch(t):
    return gc if isinstance(t, gc.Tensor) else torch


def test_bools_are_logical_and_in_place_forms_write_through():
    a, b = np.array([True, False, True]), np.array([True, True, False])
    for fn in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x):
        eager, compiled, want = _both(fn, a, b)
        np.testing.assert_array_equal(eager, want)
        np.testing.assert_array_equal(compiled, want)
    x = gc.tensor([12, 10])
    y = x
    x &= 6
    x <<= 1
    assert y is x and x.tolist() == [8, 4]


@pytest.mark.parametrize("fn", [lambda a: a & a, lambda a: ~a, lambda a: a << 1])
def test_floats_are_refused_as_pytorch_refuses_them(fn):
    with pytest.raises(gc.GraphcError, match="takes integer"):
        fn(gc.tensor([1.0, 2.0]))
    with pytest.raises((RuntimeError, TypeError)):
        fn(torch.tensor([1.0, 2.0]))


def test_shifting_bools_is_refused():
    with pytest.raises(gc.GraphcError, match="takes integer tensors"):
        gc.tensor([True]) << gc.tensor([True])
