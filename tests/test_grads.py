"""Gradient checks for every differentiable op, generated from the same op table as the
forward tests: each vjp against central finite differences in float64, element by element
(a sample of elements for larger inputs) and through the identity <J u, v> = <u, J^T v>."""
from __future__ import annotations

import numpy as np
import pytest

from graphc.executor import Plan
from graphc.ir import REGISTRY, Builder, DType, Graph, TensorType, Value
from graphc.passes.autodiff import autodiff
from op_table import OP_INFO

EPS = 1e-6  # central-difference step (float64)
RTOL, ATOL = 1e-5, 1e-8  # finite differences in float64 agree to ~1e-9; this leaves margin
ELEMENTS_PER_INPUT = 12


CASES = [(op, i, s) for op, info in sorted(OP_INFO.items()) if REGISTRY[op].vjp is not None
         for i, s in enumerate(info.samples) if s.grad]


def _as_f64(a):
    if a.dtype.kind == "c":  # complex inputs are perturbed in their real and imaginary parts
        return np.array(a, dtype=np.complex128, order="C")
    return np.array(a, dtype=np.float64, order="C") if a.dtype.kind == "f" else np.array(a)  # keeps 0-d 0-d


def _build(op, sample, rng):
    """Graph: float inputs are parameters; loss = sum_k <output_k, v_k>."""
    g = Graph(op)
    b = Builder(g)
    values, params = [], {}
    for i, a in enumerate(sample.inputs):
        a = _as_f64(a)
        if a.dtype.kind in "fc":
            name = f"p{i}"
            dtype = DType.complex128 if a.dtype.kind == "c" else DType.float64
            values.append(g.add_state(Value(name, TensorType(a.shape, dtype)), "param"))
            params[name] = a
        else:
            values.append(b.constant(a, DType.from_any(a.dtype)))
    attrs = dict(sample.attrs)
    if attrs.get("dtype") in ("float32", "float16"):  # the whole check runs in float64
        attrs["dtype"] = "float64"
    outputs = b.emit(op, values, attrs)
    wanted = REGISTRY[op].outputs_with_gradients(attrs)  # BN's statistics never reach a loss
    chosen = [o for i, o in enumerate(outputs)
              if (o.type.dtype.is_float or o.type.dtype.is_complex) and (wanted is None or i in wanted)]
    loss = None
    for out in chosen:  # a complex output enters the loss by its real and imaginary parts
        for part in [b.emit1("real", [out]), b.emit1("imag", [out])] if out.type.dtype.is_complex else [out]:
            v = b.constant(rng.standard_normal(part.type.shape), DType.float64)
            term = b.emit1("sum", [b.emit1("mul", [part, v])])
            loss = term if loss is None else b.emit1("add", [loss, term])
    g.outputs = [loss]
    return g, params


def _plan(graph, outputs, params):
    g = graph.copy()
    g.outputs = outputs
    return Plan(g, params, seed=0)


@pytest.mark.parametrize("op,index,sample", CASES, ids=[f"{op}-{s.desc}" for op, _, s in CASES])
def test_vjp_matches_finite_differences(op, index, sample):
    rng = np.random.default_rng(index)
    graph, params = _build(op, sample, rng)
    names = list(params)
    grad_graph, grads = autodiff(graph, graph.outputs[0], names)
    grad_plan = _plan(grad_graph, [grads[n] for n in names if grads[n] is not None], params)
    analytic = dict(zip([n for n in names if grads[n] is not None], grad_plan.run([])))
    loss_plan = _plan(graph, graph.outputs, params)
    rng_state = loss_plan.rng.bit_generator.state

    def loss() -> float:
        loss_plan.rng.bit_generator.state = rng_state  # random ops (dropout) see the same mask
        return float(loss_plan.run([])[0])

    # summing many terms loses absolute precision: allow that roundoff, scaled by the step
    roundoff = 50 * np.finfo(np.float64).eps * max(1.0, abs(loss())) / EPS
    for name in names:
        x = params[name]  # the plan shares this array: perturb it in place
        grad = analytic.get(name, np.zeros_like(x))
        assert grad.shape == x.shape, f"{name}: gradient shape {grad.shape} != input shape {x.shape}"
        # a complex input's gradient is dL/dRe + i dL/dIm (PyTorch's convention): checked along 1 and 1j
        for d in (1, 1j) if x.dtype.kind == "c" else (1,):
            along = np.real(np.conj(d) * grad)
            # <J u, v> (finite differences along a random direction) == <u, J^T v> (the vjp)
            u = rng.standard_normal(x.shape)
            saved = x.copy()
            x += EPS * d * u
            up = loss()
            x[...] = saved - EPS * d * u
            down = loss()
            x[...] = saved
            directional = (up - down) / (2 * EPS)
            np.testing.assert_allclose(np.sum(along * u), directional, rtol=RTOL, atol=ATOL * max(1, x.size) + roundoff,
                                       err_msg=f"{op}: <u, J^T v> != <J u, v> for input {name} (direction {d})")
            # element by element
            flat = x.reshape(-1)
            picks = rng.choice(flat.size, size=min(flat.size, ELEMENTS_PER_INPUT), replace=False)
            for k in picks:
                old = flat[k]
                flat[k] = old + EPS * d
                up = loss()
                flat[k] = old - EPS * d
                down = loss()
                flat[k] = old
                np.testing.assert_allclose(along.reshape(-1)[k], (up - down) / (2 * EPS), rtol=RTOL,
                                           atol=ATOL * 100 + roundoff, err_msg=f"{op}: d loss / d {name}[{k}] ({d})")


# Ops whose gradient is zero by definition, which finite differences cannot check: tested by name.
ZERO_BY_DEFINITION = {"stop_gradient": "tests/test_autograd.py::test_detach_and_no_grad_stop_gradients"}
# Ops whose gradient is PyTorch's on symmetric inputs (symmetrised), not the derivative of reading
# one triangle that finite differences over every entry measure: checked against torch.autograd.
SYMMETRIC_GRADIENT = {"linalg_cholesky": "tests/test_linalg.py::test_cholesky_family",
                      "linalg_eigh": "tests/test_linalg.py::test_eigh"}


def test_every_differentiable_op_has_gradient_samples():
    covered = {op for op, _, _ in CASES}
    missing = sorted(op for op, d in REGISTRY.items()
                     if d.vjp is not None and op not in covered and op not in ZERO_BY_DEFINITION
                     and op not in SYMMETRIC_GRADIENT)
    assert not missing, f"ops with a vjp but no grad=True table sample: {missing}"
