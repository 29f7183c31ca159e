"""The recurrent cells ``RNNCell``, ``LSTMCell``, ``GRUCell`` (PyTorch's signatures, parameter
names, shapes, init and gate math) and the one-step functions they share with the layers in
graphc/nn/recurrent.py, whose scan bodies run the same step.

>>> import graphc as gc
>>> from graphc.nn.recurrent_cells import GRUCell
>>> GRUCell(3, 4)(gc.randn(2, 3)).shape
(2, 4)
"""
from __future__ import annotations

import math

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError
from ..ops.creation import zeros_like
from . import functional as F
from . import init
from .layers import int_at_least
from .module import Module, Parameter

# ---- one recurrent step (shared by the layers' scan bodies and the cells) ----------------------
def rnn_step(gi, h, w_hh, b_hh, relu: bool):
    pre = gi + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    """The gates' projections in two matmuls, their pointwise math in one ``lstm_cell`` node
    (PyTorch's gate order i, f, g, o; graphc/ir/ops/recurrent_cell.py): in a scan body each
    node costs a kernel call per time step, and the cell's ~13 ops (~35 backward) become one."""
    h, c = state
    gates = gi + F.linear(h, w_hh, b_hh)
    h, c, _ = apply("lstm_cell", [gates, c])
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def gru_step(gi, h, w_hh, b_hh):
    """``h' = (1 - z) * n + z * h`` (PyTorch's gates r, z, n) in one ``gru_cell`` node, as
    ``lstm_step``; ``gi`` and ``gh`` stay apart since ``n`` reads ``r * h_n``."""
    gh = F.linear(h, w_hh, b_hh)
    h_new, _ = apply("gru_cell", [gi, gh, h])
    return h_new


def zero_state(like, size: int):
    """Zeros ``(N, size)`` with ``like``'s batch dim (``like`` is ``(N, k)``): a ``full`` node
    keeping a symbolic batch dim when traced, never a constant of the example's shape."""
    return zeros_like(like[:, :1]).expand(like.shape[0], size)


def check_input(name: str, x, size: int, batched_ndim: int):
    if not isinstance(x, Tensor):
        raise GraphcError(f"{name}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim not in (batched_ndim - 1, batched_ndim):
        raise GraphcError(f"{name}: expected input of {batched_ndim - 1} or {batched_ndim} dims, got shape "
                          f"{tuple(x.shape)}")
    if int(x.shape[-1]) != size:
        raise GraphcError(f"{name}: input.size(-1) must be equal to input_size. Expected {size}, got "
                          f"{int(x.shape[-1])}")


# ---- cells -----------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Shared by the cells: ``weight_ih (G*hidden, input)``, ``weight_hh (G*hidden, hidden)``,
    ``bias_ih``, ``bias_hh``, all U(-1/sqrt(hidden), 1/sqrt(hidden))."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.input_size = int_at_least("input_size", input_size)
        self.hidden_size = int_at_least("hidden_size", hidden_size)
        self.bias = bool(bias)
        bound, g = 1 / math.sqrt(hidden_size), self.gates * hidden_size
        self.weight_ih = Parameter(init.uniform((g, input_size), bound))
        self.weight_hh = Parameter(init.uniform((g, hidden_size), bound))
        self.bias_ih = Parameter(init.uniform((g,), bound)) if bias else None
        self.bias_hh = Parameter(init.uniform((g,), bound)) if bias else None
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def _prepare(self, input, hx, count: int):
        """(batched input, [states], batched?) with missing states as zeros."""
        name = type(self).__name__
        check_input(name, input, self.input_size, 2)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        states = [None] * count if hx is None else (list(hx) if count > 1 else [hx])
        if len(states) != count:
            raise GraphcError(f"{name}: hx must be a tuple of {count} tensors")
        out = []
        for s in states:
            if s is None:
                out.append(zero_state(x, self.hidden_size))
                continue
            if not isinstance(s, Tensor) or s.ndim != input.ndim:
                raise GraphcError(f"{name}: expected hidden state of {input.ndim} dims for input of shape "
                                  f"{tuple(input.shape)}, got "
                                  f"{tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__}")
            out.append(s if batched else s.unsqueeze(0))
        return x, out, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return s + (f", nonlinearity={nonlinearity!r}" if nonlinearity != "tanh" else "")


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import RNNCell
    >>> RNNCell(3, 4)(gc.randn(2, 3)).shape
    (2, 4)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise GraphcError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        x, (h,), batched = self._prepare(input, hx, 1)
        h = rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c') = cell(x, (h, c))``, PyTorch's gates i, f, g, o.

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import LSTMCell
    >>> h, c = LSTMCell(3, 4)(gc.randn(2, 3))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """

    gates = 4

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        x, (h, c), batched = self._prepare(input, hx, 2)
        h, c = lstm_step(F.linear(x, self.weight_ih, self.bias_ih), (h, c), self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step, PyTorch's gates r, z, n: ``h' = (1 - z) * n + z * h``.

    >>> import graphc as gc
    >>> from graphc.nn.recurrent import GRUCell
    >>> GRUCell(3, 4)(gc.randn(3)).shape
    (4,)
    """

    gates = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        x, (h,), batched = self._prepare(input, hx, 1)
        h = gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
