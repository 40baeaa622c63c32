"""The tenant hash tag (``gf:t:{tenant}:``): one cluster slot per tenant, and the one-time move of a Redis
written before it (``shared/infra/redis/key_migration.py``), on the session's real Redis (single or cluster)."""

from __future__ import annotations

import inspect

from redis.crc import key_slot

from shared.infra.redis.key_migration import LAYOUT, ensure_layout
from shared.infra.redis.keys import Keys, layout_key, legacy_to_tagged, ratelimit_keys, ratelimit_prefix, tenant_of_key
from shared.infra.store.redis_graph import GraphStore


def _every_key(tenant: str) -> list[str]:
    """Every key builder of ``Keys``, called with sample arguments."""
    k = Keys(tenant)
    out = []
    for name, method in inspect.getmembers(k, inspect.ismethod):
        if name.startswith("_"):
            continue
        params = [p for p in inspect.signature(method).parameters.values()]
        args = [3 if p.annotation in ("int", int) else "x" for p in params]
        out.append(method(k.entities()) if name == "staging" else method(*args))  # staging(key): of a key
    return out


def test_every_key_of_a_tenant_hashes_to_the_tenants_one_slot():
    keys = _every_key("acme")
    assert len(keys) > 60
    assert {key_slot(key.encode()) for key in keys} == {key_slot(b"acme")}
    assert all(key.startswith("gf:t:{acme}:") and tenant_of_key(key) == "acme" for key in keys)
    # a model's rate-limit budget is read and written by one script: its keys share the model's slot
    assert len({key_slot(key.encode()) for key in ratelimit_keys(ratelimit_prefix("gpt-4o-mini"))}) == 1


def test_legacy_names_map_to_tagged_ones_and_others_are_left():
    assert legacy_to_tagged("gf:t:acme:chunk:c1") == "gf:t:{acme}:chunk:c1"
    assert legacy_to_tagged("gf:t:{acme}:chunk:c1") is None
    assert legacy_to_tagged("gf:tenants") is None
    assert tenant_of_key("gf:t:acme:chunk:c1") is None and tenant_of_key("gf:tenants") is None


def test_a_redis_of_the_old_layout_is_moved_once_with_values_and_ttls(redis_client, tenant):
    redis_client.delete(layout_key())
    old = f"gf:t:{tenant}:"
    redis_client.hset(old + "entities", "SCROOGE", '{"name": "SCROOGE", "type": "person", "description": "a miser"}')
    redis_client.set(old + "llmcache:abc", "cached", ex=3600)
    redis_client.sadd(old + "chunks", "c1", "c2")
    moved = ensure_layout(redis_client)
    assert moved >= 3
    k = Keys(tenant)
    assert redis_client.get(k.llm_cache("abc")) == b"cached" and 0 < redis_client.ttl(k.llm_cache("abc")) <= 3600
    assert redis_client.smembers(k.chunks()) == {b"c1", b"c2"}
    assert not redis_client.exists(old + "entities", old + "llmcache:abc", old + "chunks")
    assert "SCROOGE" in GraphStore(redis_client, tenant).all_entities()
    assert redis_client.get(layout_key()) == LAYOUT.encode()
    redis_client.set(old + "chunks", "written by an old process after the move")
    assert ensure_layout(redis_client) == 0  # done once: later starts cost one GET
    redis_client.delete(old + "chunks")
