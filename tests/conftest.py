"""Shared test helpers: torch availability (parity tests skip with a clear reason without it)."""
from __future__ import annotations

import numpy as np
import pytest

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:  # CI installs torch==2.13.0; elsewhere parity tests skip
    HAVE_TORCH = False

requires_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed (CI installs torch==2.13.0)")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
