"""The one piece of global state: the seed of graphc's random number generator.

It drives parameter initialisation, ``gc.rand``/``gc.randn``, eager dropout, the seed each
compiled plan draws for its own generator, and the order of a shuffling ``DataLoader``
given no ``generator=`` or ``seed=``. ``gc.Generator`` is a separate, explicitly seeded
stream (PyTorch's ``torch.Generator``) for code that must not depend on the global one.
"""
from __future__ import annotations

import secrets

import numpy as np

from .ir.errors import GraphcError

_generator = np.random.default_rng(0)

# torch.Generator()'s seed before manual_seed: a fresh generator is deterministic in both
DEFAULT_GENERATOR_SEED = 67280421310721


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


class Generator:
    """A seeded random stream of its own (``torch.Generator``'s API), backed by a numpy
    ``Generator``: pass it as ``DataLoader(..., generator=g)`` or ``RandomSampler(..., generator=g)``.

    A fresh one starts from torch's default seed (67280421310721), so it is deterministic
    until ``manual_seed`` or ``seed()`` says otherwise. Its numbers are numpy's, not
    PyTorch's: the same seed gives the same order in graphc every time, not torch's order.

    >>> import graphc as gc
    >>> g = gc.Generator().manual_seed(3)
    >>> g.initial_seed()
    3
    >>> state = g.get_state(); first = gc.random.numpy_generator(g).permutation(5).tolist()
    >>> _ = g.set_state(state); gc.random.numpy_generator(g).permutation(5).tolist() == first
    True
    """

    device = "cpu"  # where its numbers are made (as torch.Generator().device); batches go anywhere

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise GraphcError(f"gc.Generator(device={device!r}): graphc's generators run on the host; "
                              "use gc.Generator() (its numbers drive sampling, not GPU kernels)")
        self.manual_seed(DEFAULT_GENERATOR_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from ``seed``; returns the generator, as torch's does."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise GraphcError(f"Generator.manual_seed: the seed must be an integer >= 0, got {seed!r}")
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy (a different stream each run); returns the seed."""
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self) -> int:
        """The seed the stream was last started from."""
        return self._seed

    def get_state(self) -> dict:
        """The stream's position (numpy's bit-generator state, a plain dict), for ``set_state``."""
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> "Generator":
        """Continue from a position ``get_state`` returned."""
        try:
            self._rng.bit_generator.state = state
        except (TypeError, ValueError, KeyError) as e:
            raise GraphcError(f"Generator.set_state: not a state from Generator.get_state ({e})") from None
        return self

    def __repr__(self) -> str:
        return f"<graphc.Generator initial_seed={self._seed}>"


def numpy_generator(generator: Generator | None = None) -> np.random.Generator:
    """The numpy stream behind ``generator``, or graphc's global one (``gc.manual_seed``) for None."""
    if generator is None:
        return _generator
    if not isinstance(generator, Generator):
        raise GraphcError(f"generator must be a gc.Generator (gc.Generator().manual_seed(n)), "
                          f"got {type(generator).__module__}.{type(generator).__name__}")
    return generator._rng
