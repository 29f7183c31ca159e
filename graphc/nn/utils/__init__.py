"""``nn.utils``: gradient clipping with PyTorch's formulas, eager and inside compiled steps.

They rewrite ``p.grad`` in place, as PyTorch; inside a function being compiled the in-place
write rebinds the traced gradient (graphc/core/inplace.py), so the clipped gradients are what
``optimizer.step()`` records.
"""
from __future__ import annotations

import math

from ...ir.errors import GraphcError
from ...core.tensor import Tensor
from . import rnn  # noqa: F401  (nn.utils.rnn.pad_sequence)


def _with_grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def _scale(p, factor) -> None:
    p.grad.mul_(factor)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``; returns
    the norm before clipping (a 0-d tensor). As PyTorch: each gradient's norm, then the norm
    of those norms; the factor ``max_norm / (total + 1e-6)`` is clamped at 1.

    >>> import graphc as gc
    >>> w = gc.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()          # grad = [6, 8], norm 10
    >>> float(gc.nn.utils.clip_grad_norm_([w], max_norm=1.0))
    10.0
    >>> [round(v, 4) for v in w.grad.tolist()]
    [0.6, 0.8]
    """
    params = _with_grads(parameters)
    if not params:
        from ...ops.creation import tensor

        return tensor(0.0)
    norm_type = float(norm_type)
    if norm_type == math.inf:
        norms = [p.grad.abs().max() for p in params]
        total = norms[0]
        for n in norms[1:]:
            total = total.maximum(n)
    else:
        norms = [_vector_norm(p.grad, norm_type) for p in params]
        total = _vector_norm(norms[0], norm_type, powered=True)  # the norm of the norms, as torch.stack'd
        for n in norms[1:]:
            total = total + _vector_norm(n, norm_type, powered=True)
        total = total.sqrt() if norm_type == 2.0 else total ** (1.0 / norm_type)
    if error_if_nonfinite and total._tracer is None and not math.isfinite(float(total)):
        raise GraphcError(f"the total norm of order {norm_type} of the gradients is non-finite, so it cannot be "
                          "clipped; set error_if_nonfinite=False to clip anyway")
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in params:
        _scale(p, coef.cast(p.grad.dtype))
    return total


def _vector_norm(g, norm_type: float, powered: bool = False):
    """``torch.linalg.vector_norm(g, norm_type)``, or its ``norm_type``-th power (before the root)."""
    if norm_type == 2.0:
        total = (g * g).sum()
        return total if powered else total.sqrt()
    if norm_type == 1.0:
        return g.abs().sum()
    total = (g.abs() ** norm_type).sum()
    return total if powered else total ** (1.0 / norm_type)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient into ``[-clip_value, clip_value]``.

    >>> import graphc as gc
    >>> w = gc.tensor([3.0, -4.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> gc.nn.utils.clip_grad_value_([w], 1.0)
    >>> w.grad.tolist()
    [1.0, -1.0]
    """
    clip_value = float(clip_value)
    for p in _with_grads(parameters):
        if p.grad._tracer is not None:
            p.grad = p.grad.clamp(-clip_value, clip_value)
        else:
            p.grad.clamp_(-clip_value, clip_value)
