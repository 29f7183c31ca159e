"""``torch.Size``: a tuple of ints (what ``Tensor.shape`` is to PyTorch; graphc's shapes are
plain tuples, which compare equal to it).

>>> import graphc as gc
>>> gc.Size([2, 3]) == (2, 3), gc.Size([2, 3]).numel()
(True, 6)
"""
from __future__ import annotations


class Size(tuple):
    """A shape: ``torch.Size((2, 3))``."""

    def __new__(cls, sizes=()):
        return super().__new__(cls, (int(s) for s in sizes))

    def numel(self) -> int:
        out = 1
        for s in self:
            out *= s
        return out

    def __repr__(self) -> str:
        return f"graphc.Size({list(self)})"
