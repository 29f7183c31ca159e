"""The op table's entries for the fused recurrent cells (graphc/ir/ops/recurrent_cell.py):
``lstm_cell``, ``gru_cell`` and their backward ops. References in float64 from the
definitions; PyTorch's side is its gate math in torch ops for the forwards and aten's
``sigmoid_backward`` / ``tanh_backward`` (which, like the grad ops, read the activations) for
the backwards (``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` exist on CUDA only). The
inputs come from their own generator, so these rows leave the other rows' inputs (and their
recorded references) as they were.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(20261126)


def _randn(*shape, dtype=F32, scale=1.0):
    return (_RNG.standard_normal(shape) * scale).astype(dtype)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _blocks(a, count):
    return np.split(a, count, axis=-1)


# ---- LSTM --------------------------------------------------------------------------------------

def _lstm_ref(ins, attrs):
    gates, c = (a.astype(F64) for a in ins)
    i, f, g, o = _blocks(gates, 4)
    i, f, g, o = _sig(i), _sig(f), np.tanh(g), _sig(o)
    c_new = f * c + i * g
    tc = np.tanh(c_new)
    return [a.astype(ins[1].dtype) for a in (o * tc, c_new, np.concatenate([i, f, g, o, tc], -1))]


def _torch_lstm(ts, a):
    gates, c = ts
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c_new = f * c + i * g
    tc = c_new.tanh()
    return [o * tc, c_new, T().cat([i, f, g, o, tc], -1)]


def _lstm_grad_ref(ins, attrs):
    dh, dc, ws, c = (a.astype(F64) for a in ins)
    i, f, g, o, tc = _blocks(ws, 5)
    dcy = dc + dh * o * (1 - tc * tc)
    d_gates = [dcy * g * i * (1 - i), dcy * c * f * (1 - f), dcy * i * (1 - g * g), dh * tc * o * (1 - o)]
    return [np.concatenate(d_gates, -1).astype(ins[3].dtype), (dcy * f).astype(ins[3].dtype)]


def _torch_lstm_grad(ts, a):
    aten = T().ops.aten
    dh, dc, ws, c = ts
    i, f, g, o, tc = ws.chunk(5, -1)
    dcy = dc + aten.tanh_backward(dh * o, tc)
    d_gates = [aten.sigmoid_backward(dcy * g, i), aten.sigmoid_backward(dcy * c, f),
               aten.tanh_backward(dcy * i, g), aten.sigmoid_backward(dh * tc, o)]
    return [T().cat(d_gates, -1), dcy * f]


def _lstm_inputs(lead, hidden, dtype=F32, scale=1.0):
    return [_randn(*lead, 4 * hidden, dtype=dtype, scale=scale), _randn(*lead, hidden, dtype=dtype)]


# ---- GRU ---------------------------------------------------------------------------------------

def _gru_ref(ins, attrs):
    gi, gh, h = (a.astype(F64) for a in ins)
    (i_r, i_z, i_n), (h_r, h_z, h_n) = _blocks(gi, 3), _blocks(gh, 3)
    r, z = _sig(i_r + h_r), _sig(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return [a.astype(ins[2].dtype) for a in ((1 - z) * n + z * h, np.concatenate([r, z, n, h_n], -1))]


def _torch_gru(ts, a):
    gi, gh, h = ts
    (i_r, i_z, i_n), (h_r, h_z, h_n) = gi.chunk(3, -1), gh.chunk(3, -1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return [(1 - z) * n + z * h, T().cat([r, z, n, h_n], -1)]


def _gru_grad_ref(ins, attrs):
    g, ws, h = (a.astype(F64) for a in ins)
    r, z, n, h_n = _blocks(ws, 4)
    d_n = g * (1 - z) * (1 - n * n)
    d_r, d_z = d_n * h_n * r * (1 - r), g * (h - n) * z * (1 - z)
    out = [np.concatenate([d_r, d_z, d_n], -1), np.concatenate([d_r, d_z, d_n * r], -1), g * z]
    return [a.astype(ins[2].dtype) for a in out]


def _torch_gru_grad(ts, a):
    aten = T().ops.aten
    g, ws, h = ts
    r, z, n, h_n = ws.chunk(4, -1)
    d_n = aten.tanh_backward(g * (1 - z), n)
    d_r, d_z = aten.sigmoid_backward(d_n * h_n, r), aten.sigmoid_backward(g * (h - n), z)
    return [T().cat([d_r, d_z, d_n], -1), T().cat([d_r, d_z, d_n * r], -1), g * z]


def _gru_inputs(lead, hidden, dtype=F32, scale=1.0):
    return [_randn(*lead, 3 * hidden, dtype=dtype, scale=scale), _randn(*lead, 3 * hidden, dtype=dtype),
            _randn(*lead, hidden, dtype=dtype)]


# ---- the table ---------------------------------------------------------------------------------

_SHAPES = {"plain": ((3,), 5), "batch1": ((1,), 4), "3d": ((2, 3), 2), "f64": ((3,), 4), "saturated": ((4,), 3),
           "noncontig": ((3,), 5)}


def _forward(make, ref):
    samples = {}
    for desc, (lead, hidden) in _SHAPES.items():
        ins = make(lead, hidden, dtype=F64 if desc == "f64" else F32, scale=8.0 if desc == "saturated" else 1.0)
        if desc == "noncontig":
            ins = [fortran(a) for a in ins]
        samples[desc] = S(ins, ref, desc)
    return samples


def _backward(forward, ref, cotangents: int, saved):
    """The grad op's samples: random cotangents of the forward's outputs, its workspace and
    the state it read, from each forward sample."""
    samples = []
    for desc, fwd in forward.items():
        outs = fwd.ref(fwd.inputs, {})
        state = fwd.inputs[-1]
        ins = [_randn(*state.shape, dtype=state.dtype) for _ in range(cotangents)] + [outs[-1], saved(fwd.inputs)]
        if desc == "noncontig":
            ins = [fortran(a) for a in ins]
        samples.append(S(ins, ref, desc))
    return samples


def recurrent_cell_table():
    lstm, gru = _forward(_lstm_inputs, _lstm_ref), _forward(_gru_inputs, _gru_ref)
    return [OpInfo("lstm_cell", torch=_torch_lstm, samples=list(lstm.values())),
            OpInfo("lstm_cell_grad", torch=_torch_lstm_grad,
                   samples=_backward(lstm, _lstm_grad_ref, 2, lambda ins: ins[1])),
            OpInfo("gru_cell", torch=_torch_gru, samples=list(gru.values())),
            OpInfo("gru_cell_grad", torch=_torch_gru_grad,
                   samples=_backward(gru, _gru_grad_ref, 1, lambda ins: ins[2]))]
