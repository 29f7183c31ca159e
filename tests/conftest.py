"""Shared test helpers: torch availability and the ``torch_ref`` fixture.

Parity tests never skip for lack of torch: without it they compare against PyTorch 2.13's
outputs recorded in ``tests/data/torch_*.npz`` (see tests/torch_refs.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from torch_refs import RECORD_OPTION, SEP, RefStore

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:  # CI installs torch==2.13.0; elsewhere parity tests replay recorded outputs
    HAVE_TORCH = False


def pytest_addoption(parser):
    parser.addoption(RECORD_OPTION, action="store_true",
                     help="run PyTorch live and (re)write its reference outputs in tests/data/torch_*.npz")


def pytest_configure(config):
    record = config.getoption(RECORD_OPTION)
    if record and not HAVE_TORCH:
        raise pytest.UsageError(f"{RECORD_OPTION} needs PyTorch (torch==2.13.0) installed")
    config.torch_refs = RefStore("record" if record else "live" if HAVE_TORCH else "replay")


def pytest_sessionfinish(session):
    store = getattr(session.config, "torch_refs", None)
    if store is not None and store.mode == "record":
        store.save()


@pytest.fixture
def torch_ref(request):
    """``torch_ref(inputs, compute, name="") -> dict of numpy arrays``: torch's outputs for this
    test (``name`` tells several references of one test apart), from ``compute()`` when torch
    is installed, else from the recording."""
    store, module, test = request.config.torch_refs, request.node.path.stem, request.node.name

    def get(inputs, compute, name=""):
        return store.get(module, f"{test}{SEP}{name}" if name else test, inputs, compute)

    yield get
    stale, store.stale = store.stale, []
    if stale:  # live mode: torch ran, but machines without torch would replay missing or stale outputs
        pytest.fail("\n".join(stale))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
