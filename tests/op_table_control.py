"""Op table entries for control flow (``cond``, ``scan``, ``while_loop``): each sample's bodies
are small graphs traced from Python, its reference is a plain numpy loop or branch, and its
PyTorch counterpart is ``torch.cond``, PyTorch's ``scan`` operator and ``torch.while_loop``
running the same bodies written in torch. Bodies use no constants (they read only their
inputs), so the samples' trailing inputs play the captured values."""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, I64, OpInfo, S, T, bools, randn, strided


def _body(fn, *arrays):
    """``fn`` traced at the arrays' exact types (no symbolic batch), as a body graph."""
    import graphc as gc

    graph = gc.jit.trace(fn, *arrays, dynamic_batch=False)
    assert not graph.constants and not graph.state, "a body reads only its inputs"
    return graph


def _scan_step(c, x, w):
    h = (c * w + x).tanh()
    return h, h * x


def _scan_ref(reverse, dim):
    def ref(ins, attrs):
        c, xs, w = (a.astype(F64) for a in ins)
        xs = np.moveaxis(xs, dim, 0)
        ys = [None] * len(xs)
        for pos in (reversed(range(len(xs))) if reverse else range(len(xs))):
            c = np.tanh(c * w + xs[pos])
            ys[pos] = c * xs[pos]
        return [c.astype(ins[0].dtype), np.moveaxis(np.stack(ys), 0, dim).astype(ins[0].dtype)]
    return ref


def _torch_scan(ts, attrs):
    from torch._higher_order_ops.scan import scan

    c, xs, w = ts

    def step(carry, x):
        h = (carry * w + x).tanh()
        return h, h * x
    carry, ys = scan(step, c, xs, dim=attrs["dim"], reverse=attrs["reverse"])
    return [carry, ys]


def _scan_sample(desc, dim, reverse, dtype=F64, grad=True, layout=lambda a: a):
    c, xs, w = randn(3, dtype=dtype), randn(*((4, 3) if dim == 0 else (3, 4)), dtype=dtype), randn(3, dtype=dtype)
    xs = layout(xs)
    x_t = xs[0] if dim == 0 else xs[:, 0]
    body = _body(lambda c, x, w: _scan_step(c, x, w), c, x_t.copy(), w)
    return S([c, xs, w], _scan_ref(reverse, dim), desc,
             {"body": body, "carries": 1, "scanned": 1, "dim": dim, "reverse": reverse}, dynamic=False, grad=grad)


def _cond_sample(pred, desc, dtype=F64, grad=True, layout=lambda a: a):
    a, b = layout(randn(2, 3, dtype=dtype)), randn(2, 3, dtype=dtype)
    true, false = _body(lambda a, b: (a * b, a.tanh()), a, b), _body(lambda a, b: (a - b, b.sigmoid()), a, b)

    def ref(ins, attrs):
        p, a, b = ins[0], ins[1].astype(F64), ins[2].astype(F64)
        out = (a * b, np.tanh(a)) if p.item() else (a - b, 1 / (1 + np.exp(-b)))
        return [o.astype(dtype) for o in out]
    return S([np.asarray(pred), a, b], ref, desc, {"true_branch": true, "false_branch": false}, dynamic=False,
             grad=grad)


def _torch_cond(ts, attrs):
    pred, a, b = ts
    return list(T().cond(pred, lambda a, b: (a * b, a.tanh()), lambda a, b: (a - b, b.sigmoid()), (a, b)))


def _while_sample(desc, limit, dtype=F64, layout=lambda a: a):
    i, x, limit = np.asarray(0, I64), layout(randn(2, 3, dtype=dtype)), np.asarray(limit, I64)
    test = _body(lambda i, x, n: i < n, i, x, limit)
    body = _body(lambda i, x, n: (i + n // n, x.tanh() + x), i, x, limit)

    def ref(ins, attrs):
        i, x, n = ins
        while i < n:
            i, x = i + 1, np.tanh(x) + x
        return [np.asarray(i, I64), x.astype(dtype)]
    return S([i, x, limit], ref, desc, {"cond": test, "body": body, "carried": 2}, dynamic=False, grad=False)


def _torch_while(ts, attrs):
    from torch._higher_order_ops.while_loop import while_loop

    i, x, n = ts
    return list(while_loop(lambda i, x: i < n, lambda i, x: (i + n // n, x.tanh() + x), (i, x)))


def control_table() -> list[OpInfo]:
    """Control flow. Last but one, so its draws shift no earlier entry. The gradient checks run
    in float64: the float32 samples (bodies are traced for their types) are forward only."""
    return [
        OpInfo("cond", torch=_torch_cond, samples=[
            _cond_sample(True, "true branch"), _cond_sample(False, "false branch"),
            _cond_sample(bools(), "f32", dtype=F32, grad=False),
            _cond_sample(True, "noncontig", layout=strided)]),
        OpInfo("scan", torch=_torch_scan, samples=[
            _scan_sample("forward", 0, False), _scan_sample("reverse", 0, True), _scan_sample("dim 1", 1, False),
            _scan_sample("f32", 0, False, dtype=F32, grad=False),
            _scan_sample("noncontig reverse dim 1", 1, True, layout=strided)]),
        OpInfo("while_loop", torch=_torch_while, samples=[
            _while_sample("four trips", 4), _while_sample("no trip", 0), _while_sample("f32", 3, dtype=F32),
            _while_sample("noncontig", 2, layout=strided)]),
    ]
