"""Data flows one way: graphc -> ir -> passes -> executor. ``ir`` imports nothing else of graphc,
``passes`` imports ``ir`` only, ``executor`` imports ``ir`` only (never graphc's user API)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {"ir": {"ir"}, "passes": {"ir", "passes"}, "executor": {"ir", "executor"}}


def imported_packages(path: Path, package: str) -> set:
    """The graphc sub-packages a module imports (docstring examples are not imports)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split(".")[0] == "graphc":
                parts = node.module.split(".")
                found.add(parts[1] if len(parts) > 1 else "graphc")
            elif node.level > 0:
                depth = len(path.relative_to(ROOT / package).parts) - 1  # folders below the package
                if node.level > depth + 1:  # climbs out of this package into graphc
                    found.add(node.module.split(".")[0] if node.module else "graphc")
                else:
                    found.add(package)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] if a.name.startswith("graphc.") else "graphc"
                         for a in node.names if a.name.split(".")[0] == "graphc")
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_layers_import_only_downwards(package):
    wrong = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        extra = imported_packages(path, package) - ALLOWED[package]
        if extra:
            wrong[str(path.relative_to(ROOT))] = sorted(extra)
    assert not wrong, f"imports against the layering: {wrong}"
