"""The one piece of global state: the seed of graphc's random number generator.

It drives parameter initialisation, ``gc.rand``/``gc.randn``, eager dropout, and the seed
each compiled plan draws for its own generator.
"""
from __future__ import annotations

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed graphc's generator (like ``torch.manual_seed``).

    >>> import graphc as gc
    >>> gc.manual_seed(0); a = gc.randn(2).numpy()
    >>> gc.manual_seed(0); bool((a == gc.randn(2).numpy()).all())
    True
    """
    global _generator
    _generator = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    return _generator


def next_seed() -> int:
    """A fresh seed for a plan's own generator, drawn from the global one."""
    return int(_generator.integers(0, 2**63 - 1))
