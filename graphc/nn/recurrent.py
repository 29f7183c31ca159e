"""Recurrent layers with PyTorch's constructor signatures, parameter names, shapes, init and
gate math: ``RNN``, ``LSTM``, ``GRU`` and the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Each layer and direction is one ``gc.scan`` (``reverse=True`` for the backward direction):
the input projection of every time step is one ``linear`` over the whole sequence, outside
the scan, so the scan body holds only the recurrent part. Compiled, a two-layer
bidirectional LSTM is four ``scan`` nodes whatever the sequence length (declare it with
``dynamic_dims``); eagerly each scan is a Python loop.

Compiling: a plan returns the LSTM's nested ``(out, (h_n, c_n))`` as it is. Only the
leading dim is the symbolic batch by default: declare the others where they are, e.g.
``dynamic_dims={"x": {0: "T", 1: "N"}, "h0": {1: "N"}}`` for time-major input with initial
states, ``{"x": {1: "T"}}`` for ``batch_first``.

>>> import graphc as gc
>>> from graphc.nn.recurrent import LSTM
>>> lstm = LSTM(3, 5, num_layers=2)
>>> out, (h, c) = lstm(gc.randn(7, 2, 3))
>>> out.shape, h.shape, c.shape
((7, 2, 5), (2, 2, 5), (2, 2, 5))
"""
from __future__ import annotations

import math

from ..core.control_flow import scan
from ..core.tensor import Tensor
from ..ir.errors import GraphcError
from ..ops.creation import cat, stack, zeros_like
from ..ops.functions import where
from . import functional as F
from . import init
from .layers import int_at_least
from .module import Module, Parameter
from .recurrent_cells import GRUCell, LSTMCell, RNNCell  # noqa: F401  (nn.recurrent's names, as PyTorch's rnn module)
from .recurrent_cells import check_input, gru_step, lstm_step, rnn_step, zero_state
from .utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RNNBase(Module):
    """Shared by RNN, LSTM and GRU: PyTorch's ``nn.RNNBase`` parameters and forward."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = int_at_least("input_size", input_size)
        self.hidden_size = int_at_least("hidden_size", hidden_size)
        self.num_layers = int_at_least("num_layers", num_layers)
        self.bias, self.batch_first, self.bidirectional = bool(bias), bool(batch_first), bool(bidirectional)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise GraphcError("dropout should be a number in range [0, 1] representing the probability of an "
                              "element being zeroed")
        self.dropout = float(dropout)
        if isinstance(proj_size, bool) or not isinstance(proj_size, int) or proj_size < 0:
            raise GraphcError(f"proj_size should be a non-negative integer, got {proj_size!r}")
        if proj_size and mode != "LSTM":
            raise GraphcError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise GraphcError("proj_size has to be smaller than hidden_size")
        self.proj_size = proj_size
        real_hidden = proj_size or hidden_size
        gate_size = _GATES[mode] * hidden_size
        bound = 1 / math.sqrt(hidden_size)
        dirs = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            layer_input = self.input_size if layer == 0 else real_hidden * dirs
            for suffix in ("", "_reverse")[:dirs]:
                shapes = [(f"weight_ih_l{layer}{suffix}", (gate_size, layer_input)),
                          (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden))]
                if self.bias:
                    shapes += [(f"bias_ih_l{layer}{suffix}", (gate_size,)), (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size:
                    shapes.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for name, shape in shapes:  # PyTorch's reset_parameters: all U(-1/sqrt(hidden), 1/sqrt(hidden))
                    self.register_parameter(name, Parameter(init.uniform(shape, bound)))
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def flatten_parameters(self) -> None:
        """A no-op (PyTorch compacts cuDNN weights here; graphc has nothing to compact)."""

    def _weights(self, layer: int, suffix: str):
        get = lambda name: getattr(self, f"{name}_l{layer}{suffix}")  # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih") if self.bias else None,
                get("bias_hh") if self.bias else None, get("weight_hr") if self.proj_size else None)

    def _run_direction(self, xs, state, layer: int, reverse: bool, time: int, mask=None):
        """One scan over ``xs`` (time on dim ``time``): returns (final state, outputs). With a
        ``mask`` (``(T, N, 1)`` bool, packed input) the state holds still past each sequence's
        end and the outputs are zero there, so a reverse scan starts at each sequence's end."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, "_reverse" if reverse else "")
        gi = F.linear(xs, w_ih, b_ih)  # every step's input projection at once
        mode, relu = self.mode, self.mode == "RNN_RELU"

        def step(carry, g):
            if mode == "LSTM":
                return lstm_step(g, carry, w_hh, b_hh, w_hr)
            if mode == "GRU":
                return gru_step(g, carry, w_hh, b_hh)
            return rnn_step(g, carry, w_hh, b_hh, relu)

        def output(new):
            return new[0] if mode == "LSTM" else new

        if mask is None:
            def body(carry, g):
                new = step(carry, g)
                return new, output(new)
            return scan(body, state, gi, dim=time, reverse=reverse)

        def masked_body(carry, inputs):
            g, inside = inputs
            new = step(carry, g)
            kept = tuple(where(inside, n, old) for n, old in zip(new, carry)) if mode == "LSTM" else \
                where(inside, new, carry)
            return kept, where(inside, output(new), zeros_like(output(new)))
        return scan(masked_body, state, (gi, mask), dim=time, reverse=reverse)

    def forward(self, input, hx=None):  # noqa: A002 - PyTorch's argument name
        name = type(self).__name__
        packed = input if isinstance(input, PackedSequence) else None
        if packed is not None:  # time-major padded, masked per sequence (graphc/nn/utils/rnn.py)
            input = packed.padded
        check_input(name, input, self.input_size, 3)
        batched = input.ndim == 3
        mask = packed.step_mask() if packed is not None else None
        is_lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size or self.hidden_size
        batch_first = self.batch_first and packed is None  # packed input is time-major whatever batch_first says
        if not batched:
            input = input.unsqueeze(0 if batch_first else 1)
        time = 1 if batch_first else 0
        first = input[:, 0] if batch_first else input[0]  # (N, input_size)
        if hx is None:
            h0 = [zero_state(first, real_hidden) for _ in range(self.num_layers * dirs)]
            c0 = [zero_state(first, self.hidden_size) for _ in range(self.num_layers * dirs)] if is_lstm else None
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise GraphcError(f"{name}: hx must be a tuple (h_0, c_0)")
                h_init, c_init = hx
            else:
                if isinstance(hx, (tuple, list)):
                    raise GraphcError(f"{name}: hx must be a Tensor, got a {type(hx).__name__}")
                h_init, c_init = hx, None
            h0 = self._split_state(h_init, real_hidden, batched, "h_0")
            c0 = self._split_state(c_init, self.hidden_size, batched, "c_0") if is_lstm else None
        xs, h_n, c_n = input, [], []
        for layer in range(self.num_layers):
            outputs = []
            for d in range(dirs):
                k = layer * dirs + d
                state = (h0[k], c0[k]) if is_lstm else h0[k]
                final, ys = self._run_direction(xs, state, layer, reverse=d == 1, time=time, mask=mask)
                outputs.append(ys)
                if is_lstm:
                    h_n.append(final[0])
                    c_n.append(final[1])
                else:
                    h_n.append(final)
            xs = outputs[0] if dirs == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                xs = F.dropout(xs, self.dropout, True)
        h_n = stack(h_n, 0)
        c_n = stack(c_n, 0) if is_lstm else None
        if not batched:
            xs = xs.squeeze(0 if batch_first else 1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if is_lstm else None
        if packed is not None:
            xs = packed.with_padded(xs)
        return (xs, (h_n, c_n)) if is_lstm else (xs, h_n)

    def _split_state(self, state, size: int, batched: bool, what: str) -> list:
        dirs = 2 if self.bidirectional else 1
        expected_ndim = 3 if batched else 2
        if not isinstance(state, Tensor) or state.ndim != expected_ndim:
            raise GraphcError(f"{type(self).__name__}: for {'batched' if batched else 'unbatched'} input, {what} "
                              f"should be a {expected_ndim}-D Tensor, got "
                              f"{tuple(state.shape) if isinstance(state, Tensor) else type(state).__name__}")
        if not batched:
            state = state.unsqueeze(1)
        if int(state.shape[0]) != self.num_layers * dirs or int(state.shape[-1]) != size:
            raise GraphcError(f"{type(self).__name__}: expected {what} of size ({self.num_layers * dirs}, N, {size}), "
                              f"got {tuple(state.shape)}")
        return [state[k] for k in range(self.num_layers * dirs)]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu), stacked
    ``num_layers`` deep; returns ``(output, h_n)`` as PyTorch.

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import RNN
    >>> rnn = RNN(4, 6, num_layers=2, bidirectional=True, batch_first=True)
    >>> out, h_n = rnn(gc.randn(3, 5, 4))
    >>> out.shape, h_n.shape, tuple(rnn.weight_ih_l1_reverse.shape)
    ((3, 5, 12), (4, 3, 6), (6, 12))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, proj_size: int = 0):
        if nonlinearity not in ("tanh", "relu"):
            raise GraphcError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, proj_size, device, dtype)  # a proj_size is refused
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(RNNBase):
    """Long short-term memory (PyTorch's gates i, f, g, o; optional ``proj_size``); returns
    ``(output, (h_n, c_n))``.

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import LSTM
    >>> out, (h_n, c_n) = LSTM(4, 6, proj_size=3)(gc.randn(5, 2, 4))
    >>> out.shape, h_n.shape, c_n.shape
    ((5, 2, 3), (1, 2, 3), (1, 2, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (PyTorch's gates r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``);
    returns ``(output, h_n)``.

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import GRU
    >>> out, h_n = GRU(4, 6)(gc.randn(5, 4))  # unbatched
    >>> out.shape, h_n.shape
    ((5, 6), (1, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, proj_size: int = 0):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)  # a proj_size is refused, as PyTorch does
