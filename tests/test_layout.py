"""The layout shows each op's contract: ``ir/ops/<family>.py`` declares it and
``executor/kernels/<family>.py`` holds its kernel, file for file."""
from __future__ import annotations

import importlib
import pkgutil

import graphc.executor.kernels as kernels
import graphc.ir.ops as ops
from graphc.ir.registry import FAMILY, REGISTRY

def modules(package) -> set:
    """Family modules: ``base`` and ``_private`` modules are shared helpers, not families."""
    return {m.name for m in pkgutil.iter_modules(package.__path__) if m.name != "base" and not m.name.startswith("_")}


def test_op_and_kernel_files_mirror_each_other():
    assert modules(ops) == modules(kernels)


def test_every_kernel_sits_in_the_mirror_of_its_ops_file():
    misplaced = {}
    for family in modules(kernels):
        for name in importlib.import_module(f"graphc.executor.kernels.{family}").KERNELS:
            if FAMILY.get(name) != family:
                misplaced[name] = (FAMILY.get(name), family)
    assert not misplaced, f"op -> (declared in ir/ops/X, kernel in kernels/Y): {misplaced}"
    assert set(FAMILY) == set(REGISTRY)
