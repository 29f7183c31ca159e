"""Activation modules with PyTorch's constructor signatures; each calls its ``F.`` function.

``inplace=True`` is accepted wherever PyTorch has it and changes nothing: graphc never mutates
a tensor, so the module returns the same values as a new tensor (the input keeps its own).
"""
from __future__ import annotations

import warnings

from ..ir.errors import GraphcError
from . import functional as F
from .module import Module


class _Inplace(Module):
    """An activation taking ``inplace`` (accepted, see the module docstring)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReLU(inplace=True)(gc.tensor([-1.0, 2.0])).numpy().tolist()
    [0.0, 2.0]
    """

    def forward(self, x):
        return F.relu(x)


class LeakyReLU(Module):
    """x for x > 0, ``negative_slope * x`` otherwise.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> [round(v, 4) for v in nn.LeakyReLU(0.1)(gc.tensor([-1.0, 2.0])).numpy().tolist()]
    [-0.1, 2.0]
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    """1 / (1 + exp(-x)).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Sigmoid()(gc.tensor([0.0])).item()
    0.5
    """

    def __init__(self, *args, **kwargs):  # PyTorch's Sigmoid ignores its arguments
        super().__init__()

    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Module):
    """Hyperbolic tangent.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Tanh()(gc.tensor([0.0])).item()
    0.0
    """

    def __init__(self, *args, **kwargs):  # PyTorch's Tanh ignores its arguments
        super().__init__()

    def forward(self, x):
        return F.tanh(x)


class Softmax(Module):
    """exp(x) / sum(exp(x)) along ``dim`` (PyTorch's implicit dim when None).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softmax(dim=1)(gc.zeros(1, 4)).numpy().tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``, computed stably.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> [round(v, 4) for v in nn.LogSoftmax(dim=1)(gc.zeros(1, 2)).numpy()[0].tolist()]
    [-0.6931, -0.6931]
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Hardtanh(Module):
    """x limited to [min_val, max_val] (gradient zero at the bounds, as PyTorch's).
    ``min_value``/``max_value`` are PyTorch's deprecated spellings.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Hardtanh(-2.0, 2.0)(gc.tensor([-3.0, 1.0, 3.0])).numpy().tolist()
    [-2.0, 1.0, 2.0]
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False, min_value=None,
                 max_value=None):
        super().__init__()
        for old, new, value in (("min_value", "min_val", min_value), ("max_value", "max_val", max_value)):
            if value is not None:
                warnings.warn(f"Hardtanh keyword argument {old} is deprecated, use {new} instead",
                              FutureWarning, stacklevel=2)
        min_val = min_val if min_value is None else min_value
        max_val = max_val if max_value is None else max_value
        if min_val > max_val:
            raise GraphcError(f"Hardtanh: min_val {min_val} is greater than max_val {max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6): ``Hardtanh(0, 6)``, as in PyTorch.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ReLU6()(gc.tensor([-1.0, 7.0])).numpy().tolist()
    [0.0, 6.0]
    """

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SiLU(_Inplace):
    """x * sigmoid(x).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.SiLU()(gc.tensor([0.0])).item()
    0.0
    """

    def forward(self, x):
        return F.silu(x)


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Hardswish()(gc.tensor([3.0])).item()
    3.0
    """

    def forward(self, x):
        return F.hardswish(x)


class GELU(Module):
    """x * Phi(x) (``approximate='tanh'``: the tanh approximation).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.GELU()(gc.tensor([1.0])).item(), 4)
    0.8413
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise GraphcError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.ELU(alpha=2.0)(gc.tensor([1.0])).item()
    1.0
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear where beta x > threshold.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softplus(beta=2.0, threshold=10.0)(gc.tensor([20.0])).item()
    20.0
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"
