"""No import cycles among the project's modules (imports inside functions included: a lazy import that closes
a cycle still ties the two modules together)."""

from __future__ import annotations

import ast
from pathlib import Path

import igraph

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "workers", "api_gateway", "graphfleet_cli", "llm_simulator")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:  # ``from pkg import module`` imports the module
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in files else base)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module."""
    names = sorted(graph)
    at = {name: i for i, name in enumerate(names)}
    g = igraph.Graph(n=len(names), edges=[(at[a], at[b]) for a in names for b in graph[a]], directed=True)
    return sorted(sorted(names[i] for i in part) for part in g.connected_components(mode="strong") if len(part) > 1)


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 100
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
