"""Containers: Sequential, ModuleList, Identity."""
from __future__ import annotations

from collections import OrderedDict

from ..ir.errors import GraphcError
from .module import Module


class Sequential(Module):
    """Chain modules; also accepts an OrderedDict of named modules.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> nn.Sequential(nn.Linear(3, 4), nn.ReLU())(gc.ones(2, 3)).shape
    (2, 4)
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def __getitem__(self, index):
        items = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*items[index])
        return items[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(Module):
    """A list of modules whose parameters are registered (``layers.0.weight``)."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, index):
        items = list(self._modules.values())
        return ModuleList(items[index]) if isinstance(index, slice) else items[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, *args):
        raise GraphcError("ModuleList is not callable; iterate over it in your forward()")


class Identity(Module):
    """Returns its input unchanged."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x
