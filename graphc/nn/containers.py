"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, Identity."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from ..ir.errors import GraphcError
from .module import Module, Parameter


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


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys
    (``heads.cls.weight``), in insertion order; takes a mapping or (key, module) pairs.

    >>> from graphc import nn
    >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 2)})
    >>> list(heads), "cls" in heads, [k for k in heads.state_dict()]
    (['cls', 'box'], True, ['cls.weight', 'cls.bias', 'box.weight', 'box.bias'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str):
            raise GraphcError(f"ModuleDict keys must be strings, got {type(key).__name__}")
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        """Add (or replace) entries from a mapping or an iterable of (key, module) pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for entry in pairs:
            if isinstance(entry, Module) or len(entry) != 2:
                raise GraphcError("ModuleDict.update needs a mapping or (key, module) pairs")
            self[entry[0]] = entry[1]

    def forward(self, *args):
        raise GraphcError("ModuleDict is not callable; pick a module by key in your forward()")


class ParameterList(Module):
    """A list of parameters registered as ``0``, ``1``, ... (``params.0``); reading an item
    goes through the module, so a compiled function sees the traced parameter.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> params = nn.ParameterList([nn.Parameter(gc.ones(2)), nn.Parameter(gc.zeros(3))])
    >>> len(params), [k for k, _ in params.named_parameters()], tuple(params[-1].shape)
    (2, ['0', '1'], (3,))
    """

    def __init__(self, values=None):
        super().__init__()
        for value in values or []:
            self.append(value)

    def append(self, value) -> "ParameterList":
        self.register_parameter(str(len(self)), value if isinstance(value, Parameter) else Parameter(value))
        return self

    def extend(self, values) -> "ParameterList":
        for value in values:
            self.append(value)
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList([self[i] for i in range(len(self))[index]])
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range for a ParameterList of {len(self)}")
        return getattr(self, str(index % len(self)))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def forward(self, *args):
        raise GraphcError("ParameterList is not callable; iterate over it in your forward()")


class ParameterDict(Module):
    """A dict of parameters registered under their keys, in insertion order.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> table = nn.ParameterDict({"scale": nn.Parameter(gc.ones(2))})
    >>> list(table), "scale" in table, tuple(table["scale"].shape)
    (['scale'], True, (2,))
    """

    def __init__(self, parameters=None):
        super().__init__()
        items = parameters.items() if isinstance(parameters, Mapping) else (parameters or [])
        for key, value in items:
            self[key] = value

    def __getitem__(self, key: str):
        if key not in self._parameters:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(list(self._parameters))

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return list(self._parameters)

    def items(self):
        return [(k, self[k]) for k in self._parameters]

    def values(self):
        return [self[k] for k in self._parameters]

    def forward(self, *args):
        raise GraphcError("ParameterDict is not callable; read its parameters in your forward()")


class Identity(Module):
    """Returns its input unchanged."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x
