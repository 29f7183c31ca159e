"""``torch.signal``: window functions (``gc.signal.windows.hann(10)``)."""
from . import windows  # noqa: F401

__all__ = ["windows"]
