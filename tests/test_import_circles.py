"""No import circle outside graphc/core, counting every import (top level and inside
functions, as Python runs both): the rooms import one way. The one inherent knot (Tensor,
dispatch, the current trace, the tape) lives in graphc/core; ``Graph.__str__`` calling the
printer may stay. The applications (graphc/apps) are imported by nothing else."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"graphc": "graphc", "ir": "graphc.ir", "passes": "graphc.passes", "executor": "graphc.executor"}
ALLOWED_ROOM = "graphc.core."
ALLOWED_PAIR = {"graphc.ir.graph", "graphc.ir.printer"}


def modules() -> dict:
    """Dotted module name -> file, with the wheel's package-dir mapping (graphc.ir is ir/)."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imports(name: str, path: Path, known: dict) -> set:
    """The project modules ``name`` imports anywhere in its file."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            candidates = [f"{prefix}.{a.name}" for a in node.names] + [prefix]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name and not name.startswith(candidate + "."):
                found.add(candidate)  # (a module importing its own package is no circle)
    return found


def import_graph() -> nx.DiGraph:
    known = modules()
    graph = nx.DiGraph()
    for name, path in known.items():
        graph.add_node(name)
        graph.add_edges_from((name, target) for target in imports(name, path, known))
    return graph


def test_no_import_circle_outside_the_core_room():
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    outside = [c for c in circles if not (all(m.startswith(ALLOWED_ROOM) for m in c) or set(c) == ALLOWED_PAIR)]
    assert not outside, f"import circles outside graphc/core: {outside}"


def test_the_applications_are_imported_by_nothing_else():
    graph = import_graph()
    users = {a for a, b in graph.edges if b.startswith("graphc.apps") and not a.startswith("graphc.apps")}
    assert users <= {"graphc.__main__"}, f"modules importing graphc/apps: {sorted(users)}"


def test_the_scan_sees_a_circle_where_there_is_one(tmp_path):
    """The scan itself: a lazy import inside a function counts."""
    known = {"graphc.a": tmp_path / "a.py", "graphc.b": tmp_path / "b.py"}
    known["graphc.a"].write_text("def f():\n    from .b import g\n")
    known["graphc.b"].write_text("from .a import f\n")
    graph = nx.DiGraph()
    for name, path in known.items():
        graph.add_edges_from((name, target) for target in imports(name, path, known))
    assert [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1] == [["graphc.a", "graphc.b"]]
