"""``torch.jit``'s face: ``gc.jit.trace`` is graphc's tracer (PyTorch's name for tracing a
module or function on example inputs); ``gc.trace`` is ``torch.trace``, the matrix trace.

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> graph = gc.jit.trace(nn.Linear(4, 2), np.zeros((8, 4), np.float32))
>>> [str(v.type) for v in graph.outputs]
['f32[N,2]']
"""
from __future__ import annotations

from .compile import trace

__all__ = ["trace"]
