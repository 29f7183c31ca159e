"""Result dtypes and values of the user surface against PyTorch's: division's rounding modes,
integer powers, and the Python-scalar cases that the op table (which feeds arrays) cannot reach."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def _values(t):
    return t.dtype.name, t.numpy().tolist()


def test_div_rounding_modes_on_every_surface():
    a, b = gc.tensor([7, -7, 7, -7]), gc.tensor([2, 2, -2, -2])
    assert _values(gc.div(a, b)) == ("float32", [3.5, -3.5, -3.5, 3.5])
    assert _values(gc.div(a, b, rounding_mode="trunc")) == ("int64", [3, -3, -3, 3])
    assert _values(a.div(b, rounding_mode="floor")) == ("int64", [3, -4, -4, 3])
    assert _values(a.divide(b, rounding_mode="floor")) == ("int64", [3, -4, -4, 3])
    assert _values(gc.floor_divide(a, b)) == ("int64", [3, -4, -4, 3])
    assert _values(gc.true_divide(a, 2)) == ("float32", [3.5, -3.5, 3.5, -3.5])
    assert _values(gc.div(a, 2.0, rounding_mode="floor")) == ("float32", [3.0, -4.0, 3.0, -4.0])


def test_div_rounding_modes_compile_like_eager():
    def fn(a, b):
        return gc.div(a, b, rounding_mode="floor"), gc.div(a, b, rounding_mode="trunc"), gc.div(a, b)

    a, b = np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])
    floor, trunc, true = gc.compile(fn, example_inputs=(a, b))(a, b)
    assert (floor.dtype, floor.tolist()) == (np.int64, [3, -4, -4, 3])
    assert (trunc.dtype, trunc.tolist()) == (np.int64, [3, -3, -3, 3])
    assert (true.dtype, true.tolist()) == (np.float32, [3.5, -3.5, -3.5, 3.5])


def test_integer_division_by_zero_raises_eager_and_compiled():
    """PyTorch raises ZeroDivisionError; numpy would answer 0, a number that means nothing."""
    a, b = np.array([7, 1]), np.array([2, 0])
    with pytest.raises(gc.GraphcError, match="integer division by zero"):
        gc.floor_divide(gc.tensor(a), gc.tensor(b))
    plan = gc.compile(lambda x, y: gc.div(x, y, rounding_mode="trunc"), example_inputs=(a, a))
    assert plan(a, a).tolist() == [1, 1]
    with pytest.raises(gc.GraphcError, match="integer division by zero"):
        plan(a, b)


def test_integer_pow_keeps_integers():
    assert _values(gc.pow(gc.tensor([2, -3]), 3)) == ("int64", [8, -27])
    assert _values(gc.tensor([2, 1, -1, -1, 0]).pow(gc.tensor([-1, -2, -1, -2, -1]))) == ("int64", [0, 1, -1, 1, 0])
    assert _values(gc.pow(gc.tensor([True, False]), 2)) == ("int64", [1, 0])
    assert _values(gc.pow(2, gc.tensor([-1, 3]))) == ("int64", [0, 8])


@pytest.mark.parametrize("base", [gc.tensor([2, 3]), gc.tensor([True])], ids=["int64", "bool"])
def test_negative_python_int_exponent_on_integers_raises(base):
    """PyTorch refuses ``int_tensor ** -1`` (a negative exponent *tensor* gives 0 instead)."""
    with pytest.raises(gc.GraphcError, match="negative integer powers"):
        gc.pow(base, -1)
    with pytest.raises(gc.GraphcError, match="negative integer powers"):
        base.pow(-2)
    assert gc.pow(base.float(), -1).dtype == gc.float32


def test_unknown_rounding_mode_is_refused():
    with pytest.raises(gc.ShapeError, match="rounding_mode must be None, 'trunc' or 'floor'"):
        gc.div(gc.tensor([1.0]), 2.0, rounding_mode="round")


def test_floor_division_operators_and_int_power_operator_follow_pytorch():
    t = gc.tensor([7, -7])
    assert _values(t // 2) == ("int64", [3, -4])
    assert _values(7 // gc.tensor([2, -2])) == ("int64", [3, -4])
    assert _values(gc.tensor([7.5]) // 2) == ("float32", [3.0])
    with pytest.raises(gc.GraphcError, match="negative integer powers"):
        t ** -1  # before: silently 0s
    plan = gc.compile(lambda x: x // 2, example_inputs=(np.array([7, -7]),))
    assert plan(np.array([7, -7, 5])).tolist() == [3, -4, 2]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_min_of_unsigned_integer_and_bool_tensors(compiled):
    """min was -max(-x): -x wraps for uint8 (min of [0, 5, 3] came out 3) and for int64's
    smallest value, and bools raised "neg does not take bool"; PyTorch's answers below."""
    cases = [(np.array([[0, 5, 3]], np.uint8), 0, [0], [0]),
             (np.array([[np.iinfo(np.int64).min, 5]]), np.iinfo(np.int64).min, [np.iinfo(np.int64).min], [0]),
             (np.array([[True, False]]), False, [False], [1])]
    for data, smallest, values, indices in cases:
        def fn(x):
            result = x.min(1)
            return x.min(), result.values, result.indices, x.max(1).indices
        out = gc.compile(fn, (data,))(data) if compiled else [t.numpy() for t in fn(gc.tensor(data))]
        assert out[0].item() == smallest and out[1].tolist() == values and out[2].tolist() == indices
        assert out[1].dtype == data.dtype
        assert out[3].tolist() == [int(np.argmax(data[0]))]
