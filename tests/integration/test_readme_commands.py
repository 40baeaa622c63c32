"""The README's shell commands, run as written against a live stack (``graphfleet up``, as the README says):
the gateway examples with curl and jq, the CLI through the gateway, and the API-key rotation of
docs/deployment.md's Day 2. Only the variables the README itself defines (the gateway URL and the admin key that
``graphfleet up`` prints) get the live values; every curl must answer 2xx and every command exit 0."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from shared.infra.redis.conn import free_port
from tests.integration.cli_proc import ROOT, UpProcess, bash_blocks, cli_env, run_bash

README = (ROOT / "README.md").read_text()
DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text()
GATEWAY_SECTION = "## HTTP gateway (multi-tenant)"
ROTATION_SECTION = "### Rotating keys and secrets"
DEFINITION = re.compile(r"^GW=http://localhost:8080 ADMIN=adm-\.\.\.(?=\s)", re.M)
# every README section with a shell block is run here, or says why not
NOT_RUN = {
    "## Quick start (fresh Linux machine, Python 3.11+)": "scripts/demo.sh is `graphfleet demo` "
    "(test_cli_output.py) after the install every test run does; scripts/test.sh is this suite",
    "## Benchmarks (not tests)": "benchmarks, minutes each",
    "## Deployment": "needs a Docker engine (`docker-compose config -q`: tests/unit/test_deploy_config.py)",
}


def test_every_readme_shell_block_is_run_or_excused():
    sections = {h for h in re.findall(r"^## .*$", README, re.M) if bash_blocks(README, h)}
    assert sections == {GATEWAY_SECTION, *NOT_RUN}


def _checkout_like(cwd: Path) -> None:
    """The README's paths are relative to a checkout: run in a scratch directory that has them."""
    (cwd / "graphfleet_cli").symlink_to(ROOT / "graphfleet_cli")


def test_readme_gateway_and_cli_commands_run_as_written(tmp_path):
    assert "`graphfleet up --port 8080`" in README  # the URL the examples define
    blocks = bash_blocks(README, GATEWAY_SECTION)
    assert len(blocks) == 2
    commands = blocks[0].replace("\\\n", " ").splitlines()
    posts = [c for c in commands if " -d " in c]
    assert len(posts) == 3 and all('-H "Content-Type: application/json"' in c for c in posts)
    rotation = [b for b in bash_blocks(DEPLOYMENT, ROTATION_SECTION) if "$GW" in b]
    assert len(rotation) == 1
    _checkout_like(tmp_path)
    env = cli_env(tmp_path / "data")
    with UpProcess(["--port", str(free_port())], env) as up:
        up.wait_for("Ctrl-C to stop")
        gateway, admin = up.field("gateway"), up.field("admin key").split()[0]
        script, n = DEFINITION.subn(f"GW={gateway} ADMIN={admin}", blocks[0])
        assert n == 1
        script += blocks[1] + 'echo "OLD_KEY=$KEY"\n' + rotation[0] + 'echo "NEW_KEY=$KEY"\n'
        done = run_bash(script, env, tmp_path)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        out = done.stdout
        assert re.search(r'"status": ?"succeeded"', out)  # graphfleet ingest --wait --json through the gateway
        assert (tmp_path / "acme.graphml").read_text().startswith("<?xml")
        old = re.search(r"^OLD_KEY=(\S+)$", out, re.M).group(1)
        new = re.search(r"^NEW_KEY=(\S+)$", out, re.M).group(1)
        assert old != new
        assert httpx.get(f"{gateway}/v1/tenant", headers={"X-API-Key": new}, timeout=30).json()["id"] == "acme"
        assert httpx.get(f"{gateway}/v1/tenant", headers={"X-API-Key": old}, timeout=30).status_code == 401
