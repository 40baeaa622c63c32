"""``graphfleet backup`` / ``graphfleet restore`` for real, with the commands of docs/deployment.md as written:
ingest into a stack, back up, flush Redis, restore; every key, the graph and the answers of a fresh stack equal
the original."""

from __future__ import annotations

import gzip
import re
import subprocess

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.domain.query.params import QueryParam
from shared.infra.redis.conn import EmbeddedRedis, connect
from shared.infra.redis.keys import BACKUP_PATTERN, Keys, is_transient_key
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.integration.cli_proc import BIN, ROOT, bash_blocks, cli_env, run_bash
from tests.integration.helpers import graph_snapshot, start_stack

pytestmark = pytest.mark.integration
DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text()
SECTION = "### Backup and restore"
URL_LINE = re.compile(r"^export GRAPHFLEET_REDIS_URL=redis://:PASSWORD@redis-host:6379/0(?=\s)", re.M)
TENANT = "acme"
QUERIES = [("local", "Who is Bob Cratchit?"), ("naive", "What happens on Christmas morning?"),
           ("global", "What are the main themes?")]


@pytest.fixture()
def own_redis(tmp_path):
    """A Redis of this test alone: it is flushed."""
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    client = connect(server.url)
    yield server, client
    client.close()
    server.stop()


READERS = {b"string": lambda r, k: r.get(k), b"hash": lambda r, k: r.hgetall(k),
           b"set": lambda r, k: frozenset(r.smembers(k)), b"zset": lambda r, k: r.zrange(k, 0, -1, withscores=True),
           b"list": lambda r, k: r.lrange(k, 0, -1), b"stream": lambda r, k: r.xrange(k)}


def _dumps(redis) -> dict:
    """Every graphfleet key but the transient ones: (type, value, has a TTL)."""
    keys = [k for k in redis.scan_iter(match=BACKUP_PATTERN, count=1000) if not is_transient_key(k.decode())]
    return {k: (t, READERS[t](redis, k), redis.pttl(k) > 0) for k in keys if (t := redis.type(k))}


def _answers(redis_url: str) -> list[tuple]:
    client = LocalClient(redis_url)
    try:
        out = []
        for mode, text in QUERIES:
            done = client.query(TENANT, QueryParam(query=text, mode=mode), timeout=300)
            assert done["status"] == "succeeded", done
            out.append((mode, done["result"]["answer"], done["result"].get("sources")))
        return out
    finally:
        client.close()


def _doc_blocks() -> tuple[str, str]:
    """The documented backup and restore commands that need no Docker engine."""
    blocks = [b for b in bash_blocks(DEPLOYMENT, SECTION) if "docker-compose" not in b]
    backup = [b for b in blocks if "graphfleet backup" in b]
    restore = [b for b in blocks if "graphfleet restore" in b]
    assert len(backup) == 1 and len(restore) == 1, blocks
    return backup[0], restore[0]


def test_backup_flush_restore_gives_back_the_same_graph_and_answers(own_redis, tmp_path):
    server, redis = own_redis
    env = cli_env(tmp_path / "data", GRAPHFLEET_REDIS_URL=server.url)
    stack = start_stack(server.url, tmp_path / "stack1", None)  # LLM-free, as on a fresh machine
    try:
        ingest = subprocess.run([str(BIN / "graphfleet"), "ingest", str(SAMPLE), "--tenant", TENANT, "--wait",
                                 "--json"], env=env, capture_output=True, text=True, timeout=600)
        assert ingest.returncode == 0, ingest.stderr
        answers = _answers(server.url)
    finally:
        stack.stop()
    keys = Keys(TENANT)
    redis.set(keys.idempotency("documents", "d" * 8), "{}", ex=3600)  # a key with a TTL
    redis.set(keys.lock("entity:x"), "1", ex=600)  # transient: not backed up
    before, stats, graph = _dumps(redis), GraphStore(redis, TENANT).stats(), graph_snapshot(GraphStore(redis, TENANT))
    assert stats["entities"] > 0 and stats["reports"] > 0 and len(before) > 100

    backup_block, restore_block = _doc_blocks()
    script, n = URL_LINE.subn(f"export GRAPHFLEET_REDIS_URL={server.url}", backup_block)
    assert n == 1
    done = run_bash(script, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^keys: {len(before)}$", done.stdout, re.M), done.stdout

    redis.flushall()
    assert not list(redis.scan_iter(match="gf:*"))
    done = run_bash(restore_block, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert _dumps(redis) == before  # every key back with its value; TTLs kept
    assert redis.ttl(keys.idempotency("documents", "d" * 8)) > 0
    assert not redis.exists(keys.lock("entity:x"))
    assert GraphStore(redis, TENANT).stats() == stats
    assert graph_snapshot(GraphStore(redis, TENANT)) == graph

    stack = start_stack(server.url, tmp_path / "stack2", None)  # fresh workers: no cache from before
    try:
        assert _answers(server.url) == answers
    finally:
        stack.stop()


def test_streamed_backup_restores_and_a_truncated_one_changes_nothing(own_redis, tmp_path):
    server, redis = own_redis
    env = cli_env(tmp_path / "data", GRAPHFLEET_REDIS_URL=server.url)
    keys = Keys(TENANT)
    redis.hset(keys.entities(), mapping={"SCROOGE": "{}", "MARLEY": "{}"})
    redis.rpush(keys.usage_stream() + ":x", *[b"\x00\xff" * 100] * 50)
    before = _dumps(redis)
    graphfleet = str(BIN / "graphfleet")
    stream = subprocess.run([graphfleet, "backup", "--out", "-"], env=env, capture_output=True, timeout=120)
    assert stream.returncode == 0, stream.stderr
    assert gzip.decompress(stream.stdout).startswith(b"GRAPHFLEET-BACKUP\n")

    redis.hset(keys.entities(), "BOB", "{}")  # a change after the backup, and a key the backup does not have
    redis.set(keys.doc("later"), "x")
    cut = gzip.compress(gzip.decompress(stream.stdout)[:-20])
    refused = subprocess.run([graphfleet, "restore", "-", "--wipe"], input=cut, env=env, capture_output=True,
                             timeout=120)
    assert refused.returncode == 1 and b"truncated" in refused.stderr
    assert redis.hexists(keys.entities(), "BOB") and redis.exists(keys.doc("later"))  # nothing written

    restored = subprocess.run([graphfleet, "restore", "-", "--wipe"], input=stream.stdout, env=env,
                              capture_output=True, timeout=120)
    assert restored.returncode == 0, restored.stderr
    assert _dumps(redis) == before and not redis.exists(keys.doc("later"))
