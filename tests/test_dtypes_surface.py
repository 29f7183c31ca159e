"""Result dtypes and values of surface calls with Python scalars and 0-d tensors (the cases the
op table, which feeds arrays, cannot reach) on int64, bool, uint8, float32, float64 and 0-d inputs,
eager and compiled, against PyTorch (live, else tests/data/torch_test_dtypes_surface.npz).
Each call is written once, ``fn(m, x)``, for ``m`` = graphc or torch."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

from test_dtypes_ops import assert_same_outcome

CALLS = {
    "add-int": lambda m, x: x + 2,
    "add-float": lambda m, x: x + 2.5,
    "radd-bool": lambda m, x: True + x,
    "rsub-int": lambda m, x: 3 - x,
    "mul-float": lambda m, x: x * 0.5,
    "truediv-int": lambda m, x: x / 2,
    "rtruediv-int": lambda m, x: 2 / x,
    "div-floor-int": lambda m, x: m.div(x, 2, rounding_mode="floor"),
    "div-trunc-float": lambda m, x: m.div(x, 2.5, rounding_mode="trunc"),
    "pow-int": lambda m, x: x ** 2,
    "pow-float": lambda m, x: x ** 0.5,
    "rpow-int": lambda m, x: 2 ** x,
    "pow-negative-int": lambda m, x: m.pow(x, -1),
    "gt-float": lambda m, x: x > 0.5,
    "eq-int": lambda m, x: x == 1,
    "maximum-0d-f64": lambda m, x: m.maximum(x, m.tensor(0.25, dtype=m.float64)),
    "where-float-scalar": lambda m, x: m.where(x > 0, x, 2.5),
    "clamp-int-bounds": lambda m, x: m.clamp(x, 0, 1),
    "clamp-float-bounds": lambda m, x: m.clamp(x, 0.5, 1.5),
    "square": lambda m, x: m.square(x),
    "abs": lambda m, x: x.abs(),
    "neg": lambda m, x: -x,
    "exp": lambda m, x: m.exp(x),
    "sum": lambda m, x: x.sum(),
    "mean": lambda m, x: x.mean(),
    "amax": lambda m, x: x.amax(),
    "min": lambda m, x: x.min(),
    "max": lambda m, x: x.max(),
    "argmax": lambda m, x: x.argmax(),
    "relu": lambda m, x: m.nn.functional.relu(x),
    "softmax": lambda m, x: m.nn.functional.softmax(x, dim=-1),
    "masked_fill-float": lambda m, x: x.masked_fill(x > 0, 1.5),
    "logical_not": lambda m, x: m.logical_not(x),
}

INPUTS = {
    "int64": np.array([[3, -2, 0], [1, 4, -5]], np.int64),
    "bool": np.array([[True, False, True], [False, False, True]]),
    "f32": np.array([[1.5, -0.25, 0.0], [2.0, 0.75, -3.5]], np.float32),
    "f64": np.array([[1.5, -0.25, 0.0], [2.0, 0.75, -3.5]], np.float64),
    "uint8": np.array([[3, 200, 0], [1, 4, 255]], np.uint8),
    "0d-int64": np.array(3, np.int64),
    "0d-f32": np.array(-0.75, np.float32),
}

CASES = [pytest.param(call, dtype, id=f"{call}-{dtype}") for call in CALLS for dtype in INPUTS]


def torch_outcome(call, x) -> dict:
    import torch

    try:
        return {"out0": CALLS[call](torch, torch.from_numpy(x.copy()))}
    except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError, ZeroDivisionError):
        return {"raised": np.array(True)}


def graphc_outcome(call, x, compiled: bool):
    try:
        if compiled:
            return [np.asarray(gc.compile(lambda t: CALLS[call](gc, t), example_inputs=(x,))(x))]
        return [CALLS[call](gc, gc.tensor(x)).numpy()]
    except gc.GraphcError:
        return None


@pytest.mark.parametrize("call, dtype", CASES)
def test_surface_dtype_matches_torch(call, dtype, torch_ref):
    x = INPUTS[dtype]
    expected = torch_ref([call, x], lambda: torch_outcome(call, x))
    assert_same_outcome(call, graphc_outcome(call, x, compiled=False), expected, "eager")
    assert_same_outcome(call, graphc_outcome(call, x, compiled=True), expected, "compiled")
