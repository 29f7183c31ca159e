"""``torch.randint`` and ``torch.randperm`` from graphc's seeded generator (numbers differ from
PyTorch's; the distributions are the same).

>>> import graphc as gc
>>> gc.manual_seed(0)
>>> r = gc.randint(0, 10, (4,))
>>> r.dtype.name, r.shape, int(r.min()) >= 0, int(r.max()) < 10
('int64', (4,), True, True)
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
def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers uniform in ``[low, high)`` (``randint(high, size)`` starts at 0), int64 unless
    ``dtype`` says otherwise (PyTorch's signature). Drawn eagerly: inside a traced step the
    draw is a constant of the plan (draw outside the step and pass it in, as the examples do).

    >>> import graphc as gc
    >>> gc.randint(3, (2, 2)).shape, gc.randint(5, 6, (3,)).numpy().tolist()
    ((2, 2), [5, 5, 5])
    """
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if size is None or high is None:
        raise GraphcError("randint(low=0, high, size): high and size are required")
    if int(high) <= int(low):
        raise GraphcError(f"randint: high ({high}) must be greater than low ({low})")
    size = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
    draws = numpy_generator(generator).integers(int(low), int(high), size)
    return creation.tensor(draws, dtype=DType.from_any(dtype) if dtype is not None else DType.int64, device=device,
                           requires_grad=requires_grad)


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


@torchsymbol(method=False, functional=False)
def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """``randint`` of ``input``'s shape and dtype (``randint_like(x, high)`` starts at 0).

    >>> import graphc as gc
    >>> r = gc.randint_like(gc.zeros(2, 3), 4)
    >>> r.shape, r.dtype.name, int(r.max()) < 4
    ((2, 3), 'float32', True)
    """
    if high is None:
        low, high = 0, low
    dtype = input.dtype if dtype is None else dtype
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype,
                   device=input.device if device is None else device, requires_grad=requires_grad)
