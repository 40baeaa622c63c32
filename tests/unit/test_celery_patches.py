"""``shared/infra/messaging/celery_patches/``: every workaround of Celery, kombu or py-amqp internals, checked against
the installed releases so that an upgrade that changes what one relies on fails here, not in production.

Per module: the versions its docstring names (``APPLIES_TO``) contain the installed ones and the pins; per patched
function: it still has the parameters and the code the replacement was written against (read from the original,
whether or not this process installed the patch); per private attribute read: it still exists with the meaning used.
And the folder is the only place that patches: nothing outside it assigns to a Celery or kombu name, and nothing
patches at import (a worker installs the patches on ``worker_init``). After an upgrade that fails here: read the
failing module's docstring (its deletion condition first), then its behaviour tests (named there).
"""

from __future__ import annotations

import ast
import inspect
import json
import platform
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module, metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from shared.infra.messaging import celery_patches
from shared.infra.messaging.celery_patches import patching

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "shared" / "infra" / "messaging" / "celery_patches"
MODULES = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem not in ("__init__", "patching"))
UPSTREAM = ("celery", "kombu", "amqp", "billiard")
PRODUCT = ("shared", "workers", "api_gateway", "graphfleet_cli", "graphfleet")

# "module:Class.method" patched -> (its signature, code of the original the replacement relies on)
EXPECTED = {
    # leaves a failed restore to the visibility timeout: the original restores tag by tag, then clears _delivered
    "kombu.transport.redis:QoS.restore_unacked": (
        "(self, client=None)", ["conn_or_acquire(client)", "self._delivered", "restore_by_tag", "_delivered.clear()"]),
    # raises a connection error before the original dereferences a connection that is gone
    "kombu.transport.redis:Channel._connparams": (
        "(self, asynchronous=False)", ["conninfo = self.connection.client", "conninfo.hostname", "if asynchronous:"]),
    # yields the given client, or the channel's one client built by the same _create_client
    "kombu.transport.redis:Channel.conn_or_acquire": (
        "(self, client=None)", ["if client:", "yield client", "yield self._create_client()"]),
    # wraps the ack or reject callback the original puts on the hub
    "celery.worker.consumer.consumer:Consumer.call_soon_ack": (
        "(self, p, *args, **kwargs)", ["ppartial(p, *args, **kwargs)", "self.hub.call_soon(p)"]),
    # tracks the future of what the original submits to the executor
    "celery.concurrency.thread:TaskPool.on_apply": (
        "(self, target, args=None, kwargs=None, callback=None, accept_callback=None, **_)",
        ["self.executor.submit(", "ApplyResult(f)"]),
    # replaced whole: the original sleeps the timeout out in the signal handler
    "celery.worker.worker:WorkController.wait_for_soft_shutdown": (
        "(self)", ["worker_soft_shutdown_timeout", "worker_enable_soft_shutdown_on_idle", "state.active_requests",
                   "sleep(app.conf.worker_soft_shutdown_timeout)"]),
}


def _target(qualname: str) -> tuple[type, str]:
    module, path = qualname.split(":")
    owner, name = path.split(".")
    return getattr(import_module(module), owner), name


def _original(qualname: str):
    """The function as upstream ships it, whether or not this process patched it."""
    owner, name = _target(qualname)
    function = owner.__dict__[name]
    return function.__wrapped__ if patching.is_patched(owner, name) else function


def _source(function) -> str:
    return inspect.getsource(inspect.unwrap(function))


def _signature(function) -> str:
    """The parameters, without annotations (a release that only adds type hints changes nothing here)."""
    sig = inspect.signature(function)
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=plain, return_annotation=inspect.Signature.empty))


def _declared_patches() -> set[str]:
    modules = (import_module(f"shared.infra.messaging.celery_patches.{m}") for m in MODULES)
    return {t for module in modules for t in getattr(module, "PATCHES", ())}


# ---- the folder: documented, versioned, and the only place that patches
@pytest.mark.parametrize("name", MODULES)
def test_each_module_says_what_it_works_around_for_which_versions_and_when_to_delete_it(name):
    module = import_module(f"shared.infra.messaging.celery_patches.{name}")
    doc = module.__doc__ or ""
    assert "Applies to:" in doc and "Delete" in doc, f"{name}: the docstring names its versions and when to delete it"
    assert "Upstream behaviour:" in doc or name == "main_stack", f"{name}: the docstring names the upstream behaviour"
    assert f":mod:`.{name}`" in celery_patches.__doc__, f"{name} is not listed in celery_patches/__init__.py"
    assert module.APPLIES_TO and set(module.APPLIES_TO) <= {*UPSTREAM, "python"}


def _installed(dist: str) -> str:
    return platform.python_version() if dist == "python" else metadata.version(dist)


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.strip().split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def _declared_ranges() -> dict[str, SpecifierSet]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {Requirement(d).name: Requirement(d).specifier for d in deps}


def _upper_bounds(spec: SpecifierSet) -> list[Version]:
    return [Version(s.version) for s in spec if s.operator == "<"]


@pytest.mark.parametrize("name", MODULES)
def test_the_installed_and_pinned_releases_are_the_ones_each_module_was_written_for(name):
    pins, declared = _pins(), _declared_ranges()
    for dist, applies in import_module(f"shared.infra.messaging.celery_patches.{name}").APPLIES_TO.items():
        spec = SpecifierSet(applies)
        assert spec.contains(_installed(dist)), f"{name}: {dist} {_installed(dist)} outside {applies}"
        if dist in pins:
            assert spec.contains(pins[dist]), f"{name}: constraints.txt pins {dist}=={pins[dist]}, outside {applies}"
        for bound in _upper_bounds(spec) if dist in declared else ():
            # pyproject.toml must not let a release the workaround was not written for be installed
            assert not declared[dist].contains(bound), f"pyproject.toml admits {dist} {bound}: cap it below {bound}"


def test_every_replace_call_in_the_folder_is_a_declared_patch():
    found = set()
    for path in FOLDER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "replace":
                owner, name = node.args[0], node.args[1]
                found.add(f"{ast.unparse(owner).split('.')[-1]}.{name.value}")
    declared = {t.split(":")[1] for t in _declared_patches()}
    assert found and found == declared, f"replace() calls {found} against the modules' PATCHES {declared}"
    assert _declared_patches() == set(EXPECTED), "record the shape of every patched function in EXPECTED"


def _upstream_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in UPSTREAM:
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in UPSTREAM}
    return names


def _assigned_bases(tree: ast.AST):
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if target is not base and isinstance(base, ast.Name):
                yield base.id, node.lineno


def test_nothing_outside_the_folder_assigns_to_a_celery_or_kombu_name():
    offenders = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if FOLDER in path.parents:
                continue
            tree = ast.parse(path.read_text())
            upstream = _upstream_names(tree)
            offenders += [f"{path.relative_to(ROOT)}:{n}" for base, n in _assigned_bases(tree) if base in upstream]
    assert not offenders, f"patches of Celery/kombu outside shared/infra/messaging/celery_patches/: {offenders}"


def test_nothing_patches_at_import_and_a_worker_installs_every_patch_once_on_worker_init():
    """In a fresh process, as a worker starts: importing the worker app and every module of the folder patches
    nothing; ``worker_init`` (Celery sends it before it builds the pool and the consumer) installs them all, and a
    second install changes nothing. A sender (``install(worker=False)``) gets only its own."""
    code = f"""
import json
from importlib import import_module
from celery.signals import worker_init
import workers.celery_app
from shared.infra.messaging import celery_patches
from shared.infra.messaging.celery_patches import patching
for name in {MODULES!r}:
    import_module("shared.infra.messaging.celery_patches." + name)
targets = {sorted(EXPECTED)!r}
def patched():
    out = []
    for t in targets:
        module, path = t.split(":")
        owner, name = path.split(".")
        cls = getattr(import_module(module), owner)
        out.append((t, patching.is_patched(cls, name), id(cls.__dict__[name])))
    return out
at_import = patched()
celery_patches.install(worker=False)
sender = patched()
worker_init.send(sender=None)
first = patched()
celery_patches.install()
print(json.dumps([at_import, sender, first, patched()]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    at_import, sender, first, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert [t for t, is_patched, _ in at_import if is_patched] == []
    assert [t for t, is_patched, _ in sender if is_patched] == [
        t for t in sorted(EXPECTED) if t.endswith(".conn_or_acquire")]
    assert all(is_patched for _, is_patched, _ in first), first
    assert first == second  # idempotent: the same replacement, not a wrapper of a wrapper


# ---- the patched functions keep the shape the replacements were written against
@pytest.mark.parametrize("qualname", sorted(EXPECTED))
def test_each_patched_function_keeps_its_signature_and_the_code_its_patch_relies_on(qualname):
    signature, markers = EXPECTED[qualname]
    original = _original(qualname)
    assert _signature(original) == signature, f"{qualname}{_signature(original)} changed"
    source = _source(original)
    missing = [m for m in markers if m not in source]
    assert not missing, f"{qualname} changed (no {missing}): review the module whose PATCHES names it"


# ---- the private state the workarounds read keeps its meaning
def test_kombu_redis_bookkeeping_read_by_the_leases_and_the_shutdown():
    from kombu.transport import redis as kombu_redis
    from kombu.transport.virtual.base import QoS

    from shared.infra.redis.keys import BROKER_UNACKED, BROKER_UNACKED_INDEX

    assert (kombu_redis.Channel.unacked_key, kombu_redis.Channel.unacked_index_key) == (BROKER_UNACKED,
                                                                                          BROKER_UNACKED_INDEX)
    init = _source(QoS.__init__)
    assert "self._delivered = OrderedDict()" in init and "self._dirty = set()" in init  # held; acked, not dropped
    assert _signature(kombu_redis.QoS.restore_by_tag) == "(self, tag, client=None, leftmost=False)"
    # the behaviour the leases work around: restored once older than the visibility timeout, whoever holds it
    visible = _source(kombu_redis.QoS.restore_visible)
    assert "time() - self.visibility_timeout" in visible and "self.unacked_index_key" in visible
    assert _signature(kombu_redis.Channel._brpop_read) == "(self, **options)"  # shutdown_inflight
    assert kombu_redis.Channel._in_poll is False
    assert "self.brpop_timeout = self.connection.brpop_timeout" in _source(kombu_redis.Channel.__init__)


def test_the_threads_pool_and_the_worker_state_read_in_the_soft_shutdown():
    from concurrent.futures.thread import _WorkItem

    from celery.apps import worker as celery_worker_app
    from celery.concurrency.base import BasePool
    from celery.concurrency.thread import ApplyResult
    from celery.worker import state

    assert "self.f = future" in _source(ApplyResult.__init__)
    with ThreadPoolExecutor(max_workers=1) as executor:
        assert hasattr(executor._work_queue, "get_nowait")  # a SimpleQueue: safe from a signal handler
    assert _signature(_WorkItem).startswith("(future,")
    assert "terminate_job" in BasePool.__dict__ and hasattr(state, "active_requests")
    # Celery's signal handler, the frame main_stack.interrupted_at looks below, calls the replaced wait
    assert celery_worker_app.__file__.endswith("celery/apps/worker.py")
    assert "worker.wait_for_soft_shutdown()" in inspect.getsource(celery_worker_app)


def test_py_amqp_writes_every_frame_under_one_lock_as_shutdown_acks_expects():
    from amqp import method_framing, transport

    from shared.infra.messaging.celery_patches.shutdown_acks import AMQP_FRAMING, AMQP_WRITE

    writer = _source(method_framing.frame_writer)
    assert "buffer_lock = threading.Lock()" in writer and "def write_frame(" in writer
    assert "with buffer_lock:" in writer and "_write_frame(" in writer
    assert method_framing.__file__.endswith(AMQP_FRAMING) and transport.__file__.endswith(AMQP_WRITE)
    assert "write" in transport._AbstractTransport.__dict__


def test_celery_still_binds_every_configured_queue_for_delayed_delivery():
    from celery.worker.consumer.delayed_delivery import DelayedDelivery

    assert "app.amqp.queues.values()" in _source(DelayedDelivery._bind_queues)


def test_kombu_keeps_its_default_channel_in_the_attribute_the_probe_drops():
    from kombu import Connection

    assert "_default_channel" in Connection.__dict__
    assert "if self._default_channel is None:" in _source(Connection.default_channel.fget)


def test_celery_still_adds_its_handler_to_a_logger_marked_provisional():
    from celery.app.log import Logging

    assert "_rudimentary_setup" in _source(Logging._is_configured)
