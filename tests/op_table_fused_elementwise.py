"""op_table entries for ``fused_elementwise``: bodies built by hand (the ops, their wiring and
the input order stated here), with references written in numpy float64 independently of the
body's ops. One sample is above ``COMPILE_MIN`` elements, so with numba it runs the compiled
loop; the rest run op by op."""
from __future__ import annotations

import numpy as np

from graphc import ir

from op_table import F64, OpInfo, S, randn, strided


def _body(inputs: list, steps: list, outputs: list) -> ir.Graph:
    """inputs: (shape, dtype name); steps: (op, operand indices, attrs, out dtype), numbered after
    the inputs; outputs: indices."""
    graph = ir.Graph("body")
    values = [graph.add_input(ir.Value(f"i{k}", ir.TensorType(shape, ir.DType[dtype])))
              for k, (shape, dtype) in enumerate(inputs)]
    shape = max((s for s, _ in inputs), key=len)
    for k, (op, refs, attrs, dtype) in enumerate(steps):
        out = ir.Value(f"t{k}", ir.TensorType(shape, ir.DType[dtype]))
        graph.nodes.append(ir.Node(op, [values[r] for r in refs], [out], ir.registry.get_op(op).normalize_attrs(attrs)))
        values.append(out)
    graph.outputs = [values[r] for r in outputs]
    return graph


def _relu6_grad(shape, dtype, noncontig=False):
    """where(x < 6, where(x > 0, g, 0), 0): inputs x, g, 0, 6."""
    d = np.dtype(dtype).name
    body = _body([(shape, d), (shape, d), ((), d), ((), d)],
                 [("gt", [0, 2], {}, "bool"), ("where", [4, 1, 2], {}, d), ("lt", [0, 3], {}, "bool"),
                  ("where", [6, 5, 2], {}, d)], [7])
    g = strided(randn(*shape, dtype=dtype)) if noncontig else randn(*shape, dtype=dtype)
    inputs = [randn(*shape, dtype=dtype, scale=4.0), g, np.zeros((), dtype), np.full((), 6.0, dtype)]

    def ref(ins, attrs):
        x, g = ins[0].astype(F64), ins[1].astype(F64)
        return [np.where((x > 0) & (x < 6), g, 0.0).astype(ins[0].dtype)]
    return body, inputs, ref


def _momentum_step(shape):
    """m' = m * mu + g; p' = p - lr * m': inputs p, m, g, mu, lr; outputs (p', m')."""
    f = "float32"
    body = _body([(shape, f), (shape, f), (shape, f), ((), f), ((), f)],
                 [("mul", [1, 3], {}, f), ("add", [5, 2], {}, f), ("mul", [6, 4], {}, f), ("sub", [0, 7], {}, f)],
                 [8, 6])
    inputs = [randn(*shape), randn(*shape), strided(randn(*shape)), np.full((), 0.9, np.float32),
              np.full((), 0.1, np.float32)]

    def ref(ins, attrs):
        p, m, g, mu, lr = (a.astype(F64) for a in ins)
        m2 = m * mu + g
        return [(p - lr * m2).astype(np.float32), m2.astype(np.float32)]
    return body, inputs, ref


def _gelu(shape):
    """x * 0.5 * (1 + erf(x * 0.7071...)): inputs x, 0.5, 1, 1/sqrt(2)."""
    f = "float32"
    body = _body([(shape, f), ((), f), ((), f), ((), f)],
                 [("mul", [0, 3], {}, f), ("erf", [4], {}, f), ("add", [5, 2], {}, f), ("mul", [0, 1], {}, f),
                  ("mul", [7, 6], {}, f)], [8])
    inputs = [randn(*shape, scale=2.0), np.full((), 0.5, np.float32), np.ones((), np.float32),
              np.full((), 1 / np.sqrt(2), np.float32)]

    def ref(ins, attrs):
        from math import erf
        x = ins[0].astype(F64)
        return [(x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2)))).astype(np.float32)]
    return body, inputs, ref


def fused_elementwise_table() -> list[OpInfo]:
    why = ("a group of graphc's elementwise ops made by the fuse_elementwise pass: each op's PyTorch "
           "parity is its own entry's; fused against unfused plans is tests/test_fuse_elementwise.py's")
    samples = []
    for desc, (body, inputs, ref) in [("relu6 gradient", _relu6_grad((3, 4), np.float32)),
                                      ("relu6 gradient f64", _relu6_grad((2, 5), np.float64)),
                                      ("momentum step, two outputs", _momentum_step((4, 3))),
                                      ("gelu, compiled loop size", _gelu((64, 512))),
                                      ("relu6 gradient, compiled loop size", _relu6_grad((128, 256), np.float32, noncontig=True))]:
        samples.append(S(inputs, ref, desc, {"body": body}, grad=False, dynamic=False))
    return [OpInfo("fused_elementwise", no_torch=why, samples=samples)]
