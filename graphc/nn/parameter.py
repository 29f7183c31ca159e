"""``torch.nn.parameter``: where public code imports ``Parameter`` from
(``from torch.nn.parameter import Parameter``); the class is graphc.nn.module's.

>>> from graphc.nn.parameter import Parameter
>>> import graphc as gc
>>> Parameter(gc.zeros(2)).requires_grad
True
"""
from .module import Parameter

__all__ = ["Parameter"]
