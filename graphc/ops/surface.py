"""One declaration, three surfaces: ``Tensor.x``, ``gc.x`` and ``F.x`` (as Thunder's
``@torchsymbol`` does). A function declared with :func:`torchsymbol` takes the tensor first,
so the same code serves ``t.relu()``, ``gc.relu(t)`` and ``F.relu(t)`` with one set of
semantics; :func:`install` attaches the methods once, when ``graphc`` is imported.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> t = gc.tensor([-1.0, 2.0])
>>> t.relu().numpy().tolist() == gc.relu(t).numpy().tolist() == F.relu(t).numpy().tolist() == [0.0, 2.0]
True
"""
from __future__ import annotations

from typing import Callable

METHODS: dict[str, Callable] = {}  # Tensor.x
TOP_LEVEL: dict[str, Callable] = {}  # gc.x
FUNCTIONAL: dict[str, Callable] = {}  # graphc.nn.functional.x


def torchsymbol(*, method: bool = True, top: bool = True, functional: bool = True, names: tuple = ()):
    """Declare a tensor function on the surfaces PyTorch has it on (``names``: aliases)."""
    def declare(fn: Callable) -> Callable:
        for name in (fn.__name__, *names):
            for wanted, table in ((method, METHODS), (top, TOP_LEVEL), (functional, FUNCTIONAL)):
                if wanted:
                    table[name] = fn
        return fn
    return declare


def install(tensor_class) -> None:
    """Attach the declared methods to ``Tensor`` (methods written in the class win)."""
    for name, fn in METHODS.items():
        if name not in vars(tensor_class):
            setattr(tensor_class, name, fn)
