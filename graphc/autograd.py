"""``gc.autograd`` (PyTorch's ``torch.autograd``): ``Function`` for custom ops with their own
gradient, and grad mode. The machinery lives in graphc/core/ (the tape, the custom op tracer).

>>> import graphc as gc
>>> w = gc.tensor([1.0, 2.0], requires_grad=True)
>>> (w * w).sum().backward()
>>> w.grad.numpy().tolist()
[2.0, 4.0]
"""
from __future__ import annotations

from .core.custom_ops import Function, FunctionCtx
from .core.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .core.tape import backward

__all__ = ["Function", "FunctionCtx", "backward", "enable_grad", "inference_mode", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
