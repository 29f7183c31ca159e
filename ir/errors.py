"""Error types shared by every layer of graphc.

They live in ``ir`` because ``ir`` imports nothing else in graphc; the user-facing
package re-exports them as ``gc.GraphcError``, ``gc.ShapeError`` and so on.
"""
from __future__ import annotations


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
