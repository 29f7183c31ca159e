"""The pointwise part of one LSTM or GRU step as one op each, with a fused backward op each
(PyTorch's ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``). A recurrent layer runs its
step once per time step inside a scan body, where each node costs a kernel call's overhead
however small its arrays: the ~13 ops of the LSTM step (~35 in its backward) become one (one).

- ``lstm_cell(gates, c) -> (h, c_new, workspace)``: ``gates`` ``(..., 4H)`` is the input and
  hidden projections already summed, PyTorch's gate order i, f, g, o; ``c`` ``(..., H)``.
  ``c_new = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h = sigmoid(o) * tanh(c_new)``. The
  ``workspace`` ``(..., 5H)`` holds ``sigmoid(i), sigmoid(f), tanh(g), sigmoid(o),
  tanh(c_new)``: everything the backward needs besides ``c``, so the backward runs no second
  forward and the raw ``gates`` are not saved (it has no gradient: not a differentiable output).
- ``lstm_cell_grad(dh, dc, workspace, c) -> (d_gates, d_c)``.
- ``gru_cell(gi, gh, h) -> (h_new, workspace)``: ``gi`` ``(..., 3H)`` the input projection
  with ``b_ih``, ``gh`` the hidden projection with ``b_hh``, PyTorch's order r, z, n:
  ``r = sigmoid(i_r + h_r)``, ``z = sigmoid(i_z + h_z)``, ``n = tanh(i_n + r * h_n)``,
  ``h_new = (1 - z) * n + z * h``. The ``workspace`` ``(..., 4H)`` holds ``r, z, n, h_n``.
- ``gru_cell_grad(dh_new, workspace, h) -> (d_gi, d_gh, d_h)``.

The leading dims (the batch) may be symbolic; the feature dims must be static.
"""
from __future__ import annotations

from ..backprop import zeros_like
from ..errors import ShapeError
from ..registry import OpDef, register
from ..types import is_static
from ._shapes import expect_same, need_float


def _hidden(state, op: str, what: str) -> int:
    """The static hidden size H (the last dim of ``state``)."""
    need_float(state, op)
    if state.rank < 1 or not is_static(state.shape[-1]):
        raise ShapeError(f"{op}: {what} {state} needs a static last (hidden) dim")
    return int(state.shape[-1])


def _check_packed(packed, state, count: int, op: str, what: str) -> None:
    """``packed`` must be ``state``'s shape with ``count * H`` features, in its dtype."""
    hidden = _hidden(state, op, "the state")
    if packed.dtype is not state.dtype:
        raise ShapeError(f"{op}: {what} is {packed.dtype.name} but the state is {state.dtype.name}")
    if packed.shape != state.shape[:-1] + (count * hidden,):
        raise ShapeError(f"{op}: {what} {packed} must be the state {state} with {count} * {hidden} features")


def _wide(state, count: int):
    return state.with_shape(state.shape[:-1] + (count * int(state.shape[-1]),))


# ---- LSTM ----------------------------------------------------------------------------------

def _lstm_cell(in_types, attrs):
    gates, c = in_types
    _check_packed(gates, c, 4, "lstm_cell", "gates")
    return [c, c, _wide(c, 5)]


def _vjp_lstm_cell(b, node, cts, needs):
    h, c_new, workspace = node.outputs
    dh = cts[0] if cts[0] is not None else zeros_like(b, h)
    dc = cts[1] if cts[1] is not None else zeros_like(b, c_new)
    d_gates, d_c = b.emit("lstm_cell_grad", [dh, dc, workspace, node.inputs[1]])
    return [d_gates if needs[0] else None, d_c if needs[1] else None]


def _lstm_cell_grad(in_types, attrs):
    dh, dc, workspace, c = in_types
    expect_same(dh, c, "lstm_cell_grad", "the cotangent of h")
    expect_same(dc, c, "lstm_cell_grad", "the cotangent of c_new")
    _check_packed(workspace, c, 5, "lstm_cell_grad", "the workspace")
    return [_wide(c, 4), c]


# ---- GRU -----------------------------------------------------------------------------------

def _gru_cell(in_types, attrs):
    gi, gh, h = in_types
    _check_packed(gi, h, 3, "gru_cell", "the input projection gi")
    _check_packed(gh, h, 3, "gru_cell", "the hidden projection gh")
    return [h, _wide(h, 4)]


def _vjp_gru_cell(b, node, cts, needs):
    d_gi, d_gh, d_h = b.emit("gru_cell_grad", [cts[0], node.outputs[1], node.inputs[2]])
    return [g if need else None for g, need in zip((d_gi, d_gh, d_h), needs)]


def _gru_cell_grad(in_types, attrs):
    g, workspace, h = in_types
    expect_same(g, h, "gru_cell_grad", "the cotangent of h_new")
    _check_packed(workspace, h, 4, "gru_cell_grad", "the workspace")
    return [_wide(h, 3), _wide(h, 3), h]


register(OpDef("lstm_cell", _lstm_cell, inputs=(2, 2), vjp=_vjp_lstm_cell, differentiable_outputs=(0, 1),
               doc="(gates (..., 4H) in order i, f, g, o; c) -> (h, c_new, workspace (..., 5H)): one LSTM step's "
                   "pointwise math; the workspace holds the activations the backward reads"))
register(OpDef("lstm_cell_grad", _lstm_cell_grad, inputs=(4, 4),
               doc="(dh, dc, workspace, c) -> (d_gates, d_c), lstm_cell's backward from its saved activations"))
register(OpDef("gru_cell", _gru_cell, inputs=(3, 3), vjp=_vjp_gru_cell, differentiable_outputs=(0,),
               doc="(gi, gh (..., 3H) in order r, z, n; h) -> (h_new, workspace (..., 4H) = r, z, n, h_n): one GRU "
                   "step's pointwise math"))
register(OpDef("gru_cell_grad", _gru_cell_grad, inputs=(3, 3),
               doc="(dh_new, workspace, h) -> (d_gi, d_gh, d_h), gru_cell's backward from its saved activations"))
