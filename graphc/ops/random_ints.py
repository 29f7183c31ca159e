"""``torch.randperm`` from graphc's seeded generator (numbers differ from PyTorch's; the
distribution is the same). ``randint`` is in graphc/ops/random_more.py.

>>> import graphc as gc
>>> gc.manual_seed(0)
>>> sorted(gc.randperm(5).numpy().tolist())
[0, 1, 2, 3, 4]
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.types import DType
from ..random import numpy_generator
from . import creation
from .surface import torchsymbol


@torchsymbol(method=False, functional=False)
def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise; eager, as
    ``randint``).

    >>> import graphc as gc
    >>> p = gc.randperm(4)
    >>> p.dtype.name, sorted(p.numpy().tolist())
    ('int64', [0, 1, 2, 3])
    """
    draws = numpy_generator(generator).permutation(int(n))
    return creation.tensor(draws, dtype=DType.from_any(dtype) if dtype is not None else DType.int64, device=device,
                           requires_grad=requires_grad)
