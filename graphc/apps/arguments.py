"""argparse helpers the applications share."""
from __future__ import annotations

from ..ir.errors import GraphcError


def at_least(option: str, minimum: int):
    """argparse ``type=`` for a whole-number option of at least ``minimum``. It raises
    GraphcError, which argparse lets through, so main() prints one line naming the option and
    the valid range (exit 2) instead of a usage block or, later, a traceback from the run."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise GraphcError(f"{option} must be a whole number >= {minimum}, not {text!r}")
        return value

    return parse
