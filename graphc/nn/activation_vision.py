"""More activation modules with PyTorch's signatures (SELU, CELU, Mish, Hardsigmoid, Softsign,
Tanhshrink, LogSigmoid, Threshold, Softmin, Softmax2d, PReLU); each calls its ``F.`` function
(graphc/nn/functional_vision.py). ``inplace=True`` is accepted and changes nothing.

>>> import graphc as gc
>>> from graphc import nn
>>> nn.Softsign()(gc.tensor([3.0])).item()
0.75
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from . import functional as F
from .activation import Softmax, _Inplace
from .module import Module, Parameter


class SELU(_Inplace):
    """``scale * elu(x, alpha)`` with the self-normalizing constants.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.SELU()(gc.tensor([1.0])).item(), 4)
    1.0507
    """

    def forward(self, x):
        return F.selu(x)


class CELU(Module):
    """x for x > 0, ``alpha * (exp(x / alpha) - 1)`` otherwise.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.CELU(alpha=2.0)(gc.tensor([3.0])).item()
    3.0
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return F.celu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Mish(_Inplace):
    """``x * tanh(softplus(x))``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.Mish()(gc.tensor([1.0])).item(), 4)
    0.8651
    """

    def forward(self, x):
        return F.mish(x)


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Hardsigmoid()(gc.tensor([0.0])).item()
    0.5
    """

    def forward(self, x):
        return F.hardsigmoid(x)


class _Plain(Module):
    """An activation with no arguments."""

    def __init__(self):
        super().__init__()


class Softsign(_Plain):
    """``x / (1 + |x|)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softsign()(gc.tensor([1.0])).item()
    0.5
    """

    def forward(self, x):
        return F.softsign(x)


class Tanhshrink(_Plain):
    """``x - tanh(x)``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Tanhshrink()(gc.tensor([0.0])).item()
    0.0
    """

    def forward(self, x):
        return F.tanhshrink(x)


class LogSigmoid(_Plain):
    """``log(sigmoid(x))``, stable for both signs.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> round(nn.LogSigmoid()(gc.tensor([0.0])).item(), 4)
    -0.6931
    """

    def forward(self, x):
        return F.logsigmoid(x)


class Threshold(Module):
    """x where ``x > threshold``, else ``value``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Threshold(0.1, 20.0)(gc.tensor([0.0, 1.0])).numpy().tolist()
    [20.0, 1.0]
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x):
        return F.threshold(x, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Softmin(Softmax):
    """``softmax(-x)`` along ``dim``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softmin(dim=1)(gc.zeros(1, 2)).numpy().tolist()
    [[0.5, 0.5]]
    """

    def forward(self, x):
        return F.softmin(x, self.dim)


class Softmax2d(_Plain):
    """Softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Softmax2d()(gc.zeros(1, 2, 1, 1)).numpy().ravel().tolist()
    [0.5, 0.5]
    """

    def forward(self, x):
        if x.ndim not in (3, 4):
            raise GraphcError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")
        return F.softmax(x, -3)


class PReLU(Module):
    """x for x > 0, ``weight * x`` otherwise, with a learned ``weight`` of ``num_parameters``
    entries (1, or one per channel) starting at ``init``.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> m = nn.PReLU()
    >>> m.weight.shape, m(gc.tensor([-4.0, 1.0])).numpy().tolist()
    ((1,), [-1.0, 1.0])
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(np.full((num_parameters,), init, np.float32))
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
