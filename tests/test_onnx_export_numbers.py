"""ONNX export of PyTorch's number semantics (graphc/onnx/export_numbers.py): mixed-dtype
elementwise ops get Casts (ONNX takes one dtype per op), integer true division gives floats,
and ``div``'s floor and trunc modes are spelled out in ONNX ops. Each exported file runs in
onnx's reference implementation and must give the plan's numbers and dtype exactly (both are
numpy underneath: the same float operations in the same order), except ``exp``, whose last
bit the two libms may round differently."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

INTS = np.array([[7, -7, 6, -1, 0]])
FLOATS = np.array([[1.0, -7.5, 7.5, -0.3, 0.0]], np.float32)
DIVISORS = gc.tensor([2.0, 2.0, -0.1, 0.1, 3.0])

CASES = {  # before: a wrong answer (W) or an exception from the ONNX checker (E)
    "int-true-div": (lambda x: x / 2, INTS),  # E: Div(int64) typed as float
    "int-floor-div": (lambda x: x // gc.tensor([2, -2, 4, 3, 5]), INTS),  # W: Div truncates
    "int-trunc-div": (lambda x: gc.div(x, gc.tensor([2, -2, 4, 3, 5]), rounding_mode="trunc"), INTS),
    "float-floor-div": (lambda x: gc.div(x, DIVISORS, rounding_mode="floor"), FLOATS),  # W: plain Div
    "float-floor-div-by-zero": (lambda x: gc.div(x, 0.0, rounding_mode="floor"), FLOATS),
    "float-trunc-div": (lambda x: gc.div(x, DIVISORS, rounding_mode="trunc"), FLOATS),  # W: plain Div
    "int-plus-float": (lambda x: x + gc.tensor([0.5, 1.5, 2.5, 3.5, 4.5]), INTS),  # E
    "int-sqrt": (lambda x: (x * x).sqrt(), INTS),  # E: Sqrt(int64)
    "int-exp": (lambda x: x.clamp(-3, 3).exp(), INTS),  # E: Exp(int64)
    "mixed-compare": (lambda x: x < gc.tensor([0.5, 1.5, 2.5, 3.5, 4.5]), INTS),  # E
    "mixed-where": (lambda x: gc.where(x > 0, x, gc.tensor([0.5, 1.5, 2.5, 3.5, 4.5])), INTS),  # E
    "mixed-maximum": (lambda x: gc.maximum(x, gc.tensor([0.5, 1.5, 2.5, 3.5, 4.5])), INTS),  # E
    "int-pow": (lambda x: x ** 2, INTS),
    "bool-sign": (lambda x: (x > 0).sign(), INTS),  # E: Sign(bool)
    "floor": (lambda x: (x * 2.5).floor(), FLOATS),
    "ceil": (lambda x: (x * 2.5).ceil(), FLOATS),
    "round-halves-to-even": (lambda x: (x * 2.0 + 0.5).round(), FLOATS),
    "int-floor-round": (lambda x: x.floor() + x.round() + x.ceil(), INTS),  # E: Floor(int64)
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference divides by zero as numpy does
@pytest.mark.parametrize("name", CASES)
def test_exported_numbers_are_the_plans(tmp_path, name):
    fn, x = CASES[name]
    plan = gc.compile(fn, (x,))
    want = plan(x)
    path = tmp_path / f"{name}.onnx"
    gc.export(plan, None, path)
    session = ReferenceEvaluator(str(path))
    got = session.run(None, {session.input_names[0]: x})[0]
    assert got.dtype == want.dtype, name
    if name == "int-exp":  # another libm may round the last bit differently
        np.testing.assert_allclose(got, want, rtol=2e-7)
    else:
        np.testing.assert_array_equal(got, want)
