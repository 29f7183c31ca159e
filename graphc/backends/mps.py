"""``torch.backends.mps``: Apple's Metal backend, which graphc does not have.

>>> from graphc.backends import mps
>>> mps.is_available(), mps.is_built()
(False, False)
"""
from __future__ import annotations


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
