"""``torch.nn.modules.module``: ``Module`` imported by its full path (pygcn's layers.py).

>>> from graphc.nn.modules.module import Module
>>> import graphc.nn as nn
>>> Module is nn.Module
True
"""
from ..module import Module

__all__ = ["Module"]
