"""Error types shared by every layer of graphc.

They live in ``ir`` because ``ir`` imports nothing else in graphc; the user-facing
package re-exports them as ``gc.GraphcError``, ``gc.ShapeError`` and so on.
"""
from __future__ import annotations

import itertools


class GraphcError(Exception):
    """Base class of every error graphc raises.

    ``where`` names the place in the user's model: a module path, its class and the
    user's source line, e.g. ``features.3 (Conv2d) at net.py:42``.

    >>> str(GraphcError("bad stride", where="features.3 (Conv2d) at net.py:42"))
    'bad stride [features.3 (Conv2d) at net.py:42]'
    """

    def __init__(self, message: str, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(self._format())

    def _format(self) -> str:
        return f"{self.message} [{self.where}]" if self.where else self.message

    def located(self, where: str | None) -> "GraphcError":
        """Return the same error with ``where`` filled in (keeps an existing one)."""
        if where and not self.where:
            self.where = where
            self.args = (self._format(),)
        return self

    def __str__(self) -> str:
        return self._format()


class ShapeError(GraphcError):
    """A tensor's shape or dtype does not fit an op or a compiled plan's input."""


class TraceError(GraphcError):
    """Tracing hit something a static graph cannot hold (data-dependent control flow)."""


class PlanFormatError(GraphcError):
    """A plan file is truncated, corrupted, hostile or from an unsupported version."""


class NonFiniteError(GraphcError):
    """A training step's loss or a gradient is NaN or infinite; the step changed no state."""


class DeviceError(GraphcError):
    """The requested device (``cuda``) is unavailable: cupy missing or no GPU."""


class VerifyError(GraphcError):
    """``ir.verify`` found a malformed graph (SSA, order, types or attrs)."""


# ---- quoting values in messages ----------------------------------------------------------
def clip(text, limit: int = 300) -> str:
    """A message from elsewhere (ir, msgpack) on one line, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def show(value, limit: int = 100) -> str:
    """``value`` from an untrusted file, rendered for a message: at most 3 levels and 6 entries
    per level are looked at, strings and bytes are cut, and the result is at most ``limit``
    characters. Never recurses further and never calls repr() on a container."""
    text = _render(value, 3)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _render(value, depth: int) -> str:
    if isinstance(value, (str, bytes)):
        return repr(value[:60]) + ("..." if len(value) > 60 else "")
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):  # str() of a huge int is quadratic (and refused past 4300 digits)
        return str(value) if value.bit_length() <= 128 else f"<a {value.bit_length()}-bit int>"
    if isinstance(value, (list, tuple, dict)):
        opening, closing = "{}" if isinstance(value, dict) else "[]"
        if depth == 0:
            return f"{opening}...{closing}"
        if isinstance(value, dict):
            parts = [f"{_render(k, 0)}: {_render(v, depth - 1)}" for k, v in itertools.islice(value.items(), 6)]
        else:
            parts = [_render(v, depth - 1) for v in itertools.islice(value, 6)]
        if len(value) > 6:
            parts.append(f"... {len(value)} entries")
        return opening + ", ".join(parts) + closing
    return f"<{type(value).__name__}>"
