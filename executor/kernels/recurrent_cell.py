"""Kernels of the fused recurrent cells (graphc/ir/ops/recurrent_cell.py): ``lstm_cell``,
``gru_cell`` and their backward ops, each one kernel call per time step instead of ~13 (~35
backward) nodes. The arrays are small (batch x hidden), so the cost is the number of numpy
calls: the kernels work on whole gate blocks where they can (one sigmoid over the four LSTM
gates, then tanh over the g block; one derivative over the workspace's activations), write
into their outputs and keep their temporaries per kernel (allocated once, reused each step,
as the sigmoid kernel does). Written against the array module ``xp`` only, so the cupy
backend runs the same code (not run on a GPU here).
"""
from __future__ import annotations

from .base import writes_out
from .elementwise import sigmoid_into as _sigmoid


def _outputs(xp, spec, out):
    if out is None:
        return tuple(xp.empty(t.shape, t.dtype.numpy) for t in spec.out_types)
    return tuple(out)


def _temp(xp, t, width: int):
    """A scratch array of ``t``'s leading dims and ``width`` features (one per kernel, reused)."""
    return xp.empty(tuple(t.shape[:-1]) + (width,), t.dtype.numpy)


def _lstm_cell(xp, spec):
    hidden = int(spec.in_types[1].shape[-1])
    tmp = _temp(xp, spec.in_types[1], hidden)

    def run(gates, c, out=None):
        h, c_new, ws = _outputs(xp, spec, out)
        _sigmoid(xp, gates, ws[..., :4 * hidden])
        i, f, g, o, tc = (ws[..., k * hidden:(k + 1) * hidden] for k in range(5))
        xp.tanh(gates[..., 2 * hidden:3 * hidden], out=g)
        xp.multiply(f, c, out=c_new)
        xp.add(c_new, xp.multiply(i, g, out=tmp), out=c_new)
        xp.tanh(c_new, out=tc)
        xp.multiply(o, tc, out=h)
        return h, c_new, ws
    return writes_out(run)


def _lstm_cell_grad(xp, spec):
    hidden = int(spec.in_types[3].shape[-1])
    slope = _temp(xp, spec.in_types[2], 4 * hidden)
    dcy = _temp(xp, spec.in_types[3], hidden)

    def run(dh, dc, ws, c, out=None):
        d_gates, d_c = _outputs(xp, spec, out)
        i, f, g, o, tc = (ws[..., k * hidden:(k + 1) * hidden] for k in range(5))
        # dcy = dc + dh * o * (1 - tanh(c_new)^2): c_new's whole cotangent
        xp.subtract(1, xp.multiply(tc, tc, out=dcy), out=dcy)
        xp.add(xp.multiply(xp.multiply(dcy, o, out=dcy), dh, out=dcy), dc, out=dcy)
        # each gate's derivative: s * (1 - s) for the sigmoids, 1 - t^2 for tanh(g)
        act = ws[..., :4 * hidden]
        xp.multiply(xp.subtract(1, act, out=slope), act, out=slope)
        xp.subtract(1, xp.multiply(g, g, out=slope[..., 2 * hidden:3 * hidden]), out=slope[..., 2 * hidden:3 * hidden])
        d_i, d_f, d_g, d_o = (d_gates[..., k * hidden:(k + 1) * hidden] for k in range(4))
        xp.multiply(dcy, g, out=d_i)
        xp.multiply(dcy, c, out=d_f)
        xp.multiply(dcy, i, out=d_g)
        xp.multiply(dh, tc, out=d_o)
        xp.multiply(d_gates, slope, out=d_gates)
        xp.multiply(dcy, f, out=d_c)
        return d_gates, d_c
    return writes_out(run)


def _gru_cell(xp, spec):
    hidden = int(spec.in_types[2].shape[-1])
    def run(gi, gh, h, out=None):
        h_new, ws = _outputs(xp, spec, out)
        rz, n, h_n = ws[..., :2 * hidden], ws[..., 2 * hidden:3 * hidden], ws[..., 3 * hidden:]
        _sigmoid(xp, xp.add(gi[..., :2 * hidden], gh[..., :2 * hidden], out=rz), rz)
        xp.copyto(h_n, gh[..., 2 * hidden:])
        xp.multiply(rz[..., :hidden], h_n, out=n)
        xp.tanh(xp.add(n, gi[..., 2 * hidden:], out=n), out=n)
        # (1 - z) * n + z * h = n + z * (h - n)
        xp.subtract(h, n, out=h_new)
        xp.add(xp.multiply(h_new, rz[..., hidden:], out=h_new), n, out=h_new)
        return h_new, ws
    return writes_out(run)


def _gru_cell_grad(xp, spec):
    hidden = int(spec.in_types[2].shape[-1])
    tmp = _temp(xp, spec.in_types[2], hidden)

    def run(g, ws, h, out=None):
        d_gi, d_gh, d_h = _outputs(xp, spec, out)
        r, z, n, h_n = (ws[..., k * hidden:(k + 1) * hidden] for k in range(4))
        d_r, d_z, d_n = (d_gi[..., k * hidden:(k + 1) * hidden] for k in range(3))
        xp.multiply(g, z, out=d_h)
        # z's pre-activation: g * (h - n) * z * (1 - z)
        xp.multiply(xp.subtract(h, n, out=d_z), g, out=d_z)
        xp.multiply(xp.multiply(xp.subtract(1, z, out=tmp), z, out=tmp), d_z, out=d_z)
        # n's pre-activation: g * (1 - z) * (1 - n^2)
        xp.subtract(g, d_h, out=d_n)
        xp.multiply(xp.subtract(1, xp.multiply(n, n, out=tmp), out=tmp), d_n, out=d_n)
        xp.multiply(d_n, r, out=d_gh[..., 2 * hidden:])  # through r * h_n
        # r's pre-activation: d_n * h_n * r * (1 - r)
        xp.multiply(xp.multiply(xp.subtract(1, r, out=tmp), r, out=tmp), h_n, out=tmp)
        xp.multiply(tmp, d_n, out=d_r)
        xp.copyto(d_gh[..., :2 * hidden], d_gi[..., :2 * hidden])
        return d_gi, d_gh, d_h
    return writes_out(run)


KERNELS = {"lstm_cell": _lstm_cell, "lstm_cell_grad": _lstm_cell_grad, "gru_cell": _gru_cell,
           "gru_cell_grad": _gru_cell_grad}
