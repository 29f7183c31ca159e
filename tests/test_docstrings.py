"""Every docstring example in graphc runs (doctest over all graphc modules)."""
import doctest
import importlib
import pkgutil

import pytest

import graphc

MODULES = sorted(m.name for m in pkgutil.walk_packages(graphc.__path__, "graphc.")
                 if not m.name.startswith("graphc.executor.backends.cupy") and not m.name.endswith("__main__"))
MODULES += sorted(f"graphc.{pkg}.{m.name}" for pkg in ("ir", "passes", "executor")
                  for m in pkgutil.walk_packages(importlib.import_module(f"graphc.{pkg}").__path__)
                  if "cupy" not in m.name)


@pytest.mark.parametrize("name", sorted(set(MODULES)))
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
