"""``graphfleet tenants|keys|jobs|documents|usage|completion`` as typed in a shell: through the gateway
(``GRAPHFLEET_URL``, the Python client) and on the local stack's Redis; ``--json`` output, errors and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.gateway.helpers import ADMIN
from tests.gateway.live import unique

pytestmark = pytest.mark.integration


def _cli(env: dict, *args: str, **extra_env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphfleet_cli.main", *args], env={**env, **extra_env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _json(env: dict, *args: str) -> dict:
    run = _cli(env, *args, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def envs(live, tmp_path_factory):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    base["GRAPHFLEET_DATA_DIR"] = str(tmp_path_factory.mktemp("cli-manage"))
    return {"admin": {**base, "GRAPHFLEET_URL": live.url, "GRAPHFLEET_ADMIN_KEY": ADMIN},
            "http": {**base, "GRAPHFLEET_URL": live.url},
            "local": {**base, "GRAPHFLEET_REDIS_URL": live.stack.redis_url,
                      "GRAPHFLEET_BROKER_URL": live.stack.broker_url or ""}}


def test_tenant_lifecycle_through_the_gateway(envs, tmp_path):
    admin, tenant = envs["admin"], unique("mgr")
    created = _json(admin, "tenants", "create", tenant, "--name", "Manage Co", "--limit", "requests_per_minute=100000")
    assert created["id"] == tenant and created["limits"]["requests_per_minute"] == 100000
    assert _json(admin, "tenants", "show", tenant)["name"] == "Manage Co"
    missing = _cli(admin, "tenants", "show", unique("nobody"))
    assert missing.returncode == 3 and "not_found" in missing.stderr and not missing.stdout
    dup = _cli(admin, "tenants", "create", tenant)
    assert dup.returncode == 1 and "tenant_exists" in dup.stderr
    key = _json(admin, "keys", "create", tenant, "--name", "cli")
    user = {**envs["http"], "GRAPHFLEET_API_KEY": key["api_key"]}

    empty = _cli(user, "query", "Who is Scrooge?")
    assert empty.returncode == 3 and f"no documents ingested for tenant '{tenant}'" in empty.stderr
    doc = tmp_path / "marley.txt"
    doc.write_text("Marley was Scrooge's partner. Bob Cratchit is Scrooge's clerk in London.", encoding="utf-8")
    ingested = _json(user, "ingest", str(doc), "--wait")
    assert ingested["status"] == "succeeded"
    page = _json(user, "documents", "list")
    assert page["total"] == 1 and page["items"][0]["title"] == "marley.txt"
    doc_id = page["items"][0]["id"]
    assert _json(user, "documents", "show", doc_id)["status"] == "processed"
    job = _json(user, "jobs", "show", ingested["job_id"])
    assert job["status"] == "succeeded" and job["kind"] == "ingest"
    cancel = _json(user, "jobs", "cancel", ingested["job_id"])
    assert cancel["canceled"] is False and "nothing to cancel" in cancel["message"]
    usage = _json(user, "usage", "--group-by", "stage", "--from", "2020-01-01")
    assert usage["tenant"] == tenant and usage["totals"]["calls"] > 0 and usage["group_by"] == "stage"
    backwards = _cli(user, "usage", "--from", "2020-02-01", "--to", "2020-01-01")
    assert backwards.returncode == 1 and "invalid_time_range" in backwards.stderr
    deleted = _json(user, "documents", "delete", doc_id, "--wait")
    assert deleted["status"] == "succeeded" and deleted["kind"] == "delete"
    assert _cli(user, "documents", "show", doc_id).returncode == 3

    listed = _json(envs["local"], "jobs", "list", "--tenant", tenant)
    assert {j["job_id"] for j in listed["items"]} >= {ingested["job_id"], deleted["job_id"]}
    assert [j["kind"] for j in _json(envs["local"], "jobs", "list", "--tenant", tenant, "--kind", "delete")["items"]] \
        == ["delete"]
    human = _cli(envs["local"], "jobs", "list", "--tenant", tenant)
    assert human.returncode == 0 and f"job_id={deleted['job_id']}" in human.stdout
    assert tenant in {t["id"] for t in _json(envs["local"], "tenants", "list")["items"]}
    # the same through the gateway (GET /v1/tenants as admin, GET /v1/jobs as the tenant)
    assert tenant in {t["id"] for t in _json(admin, "tenants", "list")["items"]}
    assert {j["job_id"] for j in _json(user, "jobs", "list")["items"]} >= {ingested["job_id"], deleted["job_id"]}

    revoked = _json(admin, "keys", "revoke", tenant, key["key_id"])
    assert revoked == {"key_id": key["key_id"], "tenant": tenant, "revoked": True}
    denied = _cli(user, "jobs", "show", ingested["job_id"])
    assert denied.returncode == 1 and "invalid_api_key" in denied.stderr


def test_local_stack_tenants_keys_and_documents(envs, live):
    local, tenant = envs["local"], unique("loc")
    assert _json(local, "tenants", "create", tenant, "--tier", "gold")["tier"] == "gold"
    key = _json(local, "keys", "create", tenant)
    assert key["tenant"] == tenant and key["api_key"].startswith("gfk_")
    assert _json(envs["http"] | {"GRAPHFLEET_API_KEY": key["api_key"]}, "documents", "list")["total"] == 0
    assert _json(local, "documents", "list", "--tenant", tenant) == {"items": [], "total": 0, "offset": 0,
                                                                      "limit": 50, "status": None}
    assert _cli(local, "jobs", "show", "job-nope", "--tenant", tenant).returncode == 3
    assert _json(local, "keys", "revoke", tenant, key["key_id"])["revoked"] is True
    assert _cli(local, "keys", "revoke", tenant, key["key_id"] + "x").returncode == 3


def test_usage_errors_and_completion(envs, tmp_path):
    bad = _cli(envs["local"], "jobs", "list", "--status", "sleeping")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    script = _cli(envs["local"], "completion", "bash")
    assert script.returncode == 0 and "complete" in script.stdout and "graphfleet" in script.stdout
    out = tmp_path / "completions"
    line = "graphfleet jobs c"
    done = _cli(envs["local"], "jobs", _ARGCOMPLETE="1", COMP_LINE=line, COMP_POINT=str(len(line)),
                _ARGCOMPLETE_STDOUT_FILENAME=str(out), _ARGCOMPLETE_IFS="\n")
    assert done.returncode == 0, done.stderr
    assert out.read_text().split() == ["cancel"]
