"""workers/kombu_fixes.py and shared/infra/kombu_client.py replace private kombu functions; fail loudly when a
kombu upgrade changes one.

For every ``kombu_redis.<Class>.<method> = ...`` assignment in those modules (found in their source, so a new patch
cannot slip past), the installed kombu's original must still have the parameters and the code the workaround
was written against (read from kombu's source file, so it holds whether or not the patch is installed in this
process). After a kombu upgrade: re-run tests/reliability/test_faults.py, then update EXPECTED and the pins in
pyproject.toml / constraints.txt.
"""

from __future__ import annotations

import ast
import inspect
import tomllib
from pathlib import Path

import kombu
from kombu.transport import redis as kombu_redis
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]

# "<Class>.<method>": (parameters, code the workaround relies on)
EXPECTED = {
    # the wrapper clears QoS._delivered when the restore fails; the original restores tag by tag on a connection
    "QoS.restore_unacked": (["self", "client"], ["conn_or_acquire(client)", "self._delivered", "restore_by_tag",
                                                 "self._delivered.clear()"]),
    # the wrapper checks self.connection / .client before calling the original with asynchronous=...
    "Channel._connparams": (["self", "asynchronous"], ["conninfo = self.connection.client", "conninfo.hostname",
                                                       "if asynchronous:"]),
    # kombu_client yields the given client, or one client per channel built by the same _create_client
    "Channel.conn_or_acquire": (["self", "client"], ["if client:", "yield client", "yield self._create_client()"]),
}
PATCHING = ("workers/kombu_fixes.py", "shared/infra/kombu_client.py")


def patched_targets() -> set[str]:
    targets = set()
    for node in (n for path in PATCHING for n in ast.walk(ast.parse((ROOT / path).read_text()))):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
                        and isinstance(target.value.value, ast.Name) and target.value.value.id == "kombu_redis"):
                    targets.add(f"{target.value.attr}.{target.attr}")
    return targets


def original(qualname: str) -> tuple[ast.FunctionDef, str]:
    """The function as kombu ships it (its source file), not as this process may have patched it."""
    cls_name, method = qualname.split(".")
    source = Path(inspect.getsourcefile(kombu_redis)).read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item, ast.get_source_segment(source, item)
    raise AssertionError(f"kombu {kombu.__version__} has no {qualname}: {PATCHING} patch nothing")


def test_every_patched_kombu_function_is_known():
    targets = patched_targets()
    assert targets, f"no kombu_redis.<Class>.<method> assignment found in {PATCHING}"
    assert targets <= set(EXPECTED), f"new kombu patch(es) {targets - set(EXPECTED)}: record their shape here"


def test_patched_kombu_functions_keep_their_shape():
    for qualname in patched_targets() & set(EXPECTED):
        params, markers = EXPECTED[qualname]
        node, source = original(qualname)
        args = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        assert args == params, f"kombu {kombu.__version__} {qualname}{args}: the patch expects {params}"
        missing = [m for m in markers if m not in source]
        assert not missing, f"kombu {kombu.__version__} {qualname} changed (no {missing}): review {PATCHING}"


def test_installed_kombu_is_in_the_tested_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (kombu_req,) = [Requirement(d) for d in deps if Requirement(d).name == "kombu"]
    assert "redis" in kombu_req.extras
    assert kombu_req.specifier.contains(kombu.__version__), f"kombu {kombu.__version__} outside {kombu_req.specifier}"
    assert not list(kombu_req.specifier.filter(["6.0.0"])), "no upper bound: a release may change what is patched"
