"""Kernel factories shared by the numpy and cupy backends.

Every entry is ``factory(xp, spec) -> run`` where ``xp`` is the array module and ``spec``
a :class:`KernelSpec` with the node's attrs and its input/output types at one concrete
batch size. The factory does all per-node work once (axes, strides, index arrays) so that
``run(*arrays)`` does only the arithmetic; it returns one array, or a tuple for
multi-output ops. Backends build their tables from :data:`TABLE` keyed by op name.
"""
from __future__ import annotations

from typing import NamedTuple

from . import conv, elementwise, fused, norm, pool, reduce, shape


class KernelSpec(NamedTuple):
    attrs: dict
    in_types: tuple  # concrete TensorTypes
    out_types: tuple
    rng: object = None  # the plan's numpy Generator, for ops with effects="random"


TABLE = {}
for _module in (elementwise, conv, pool, norm, reduce, shape, fused):
    TABLE.update(_module.KERNELS)

__all__ = ["KernelSpec", "TABLE"]
