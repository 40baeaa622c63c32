"""Moving a Redis written before the tenant hash tag (layout 1, ``gf:t:acme:...``) to layout 2
(``gf:t:{acme}:...``), once, when a worker or the gateway starts: a one-machine user upgrades without doing
anything. Keys are renamed (single Redis) or copied with their TTL (cluster: a rename may not cross slots);
``gf:layout`` records that it is done, and a lock keeps the other processes starting meanwhile waiting."""

from __future__ import annotations

import logging
import time

import redis as redis_lib

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import ROOT, layout_key, legacy_to_tagged

log = logging.getLogger(__name__)
LAYOUT = "2"
LOCK_TTL_S = 600


def ensure_layout(redis, wait_s: float = 600.0) -> int:
    """Migrate to layout 2 unless done; returns how many keys this call moved."""
    if to_str(redis.get(layout_key())) == LAYOUT:
        return 0
    lock = f"{layout_key()}:lock"
    deadline = time.monotonic() + wait_s
    while not redis.set(lock, "1", nx=True, ex=LOCK_TTL_S):
        if to_str(redis.get(layout_key())) == LAYOUT:
            return 0
        if time.monotonic() > deadline:
            raise RuntimeError("the key layout migration of another process did not finish in time")
        time.sleep(0.2)
    try:
        if to_str(redis.get(layout_key())) == LAYOUT:
            return 0
        moved = sum(_move(redis, to_str(key)) for key in list(redis.scan_iter(match=f"{ROOT}:t:*", count=1000)))
        redis.set(layout_key(), LAYOUT)
        if moved:
            log.warning("moved %d keys to the hash-tagged tenant layout (gf:t:{tenant}:...)", moved)
        return moved
    finally:
        redis.delete(lock)


def _move(redis, key: str) -> int:
    new = legacy_to_tagged(key)
    if new is None:
        return 0
    try:
        if not _is_cluster(redis):
            return int(bool(redis.renamenx(key, new)))
        payload, ttl = redis.dump(key), redis.pttl(key)
        if payload is None or redis.exists(new):
            return 0
        redis.restore(new, max(0, int(ttl)), payload)
        redis.delete(key)
        return 1
    except redis_lib.ResponseError as exc:  # gone meanwhile (expired): nothing to move
        log.info("key %s not moved: %s", key, exc)
        return 0


def _is_cluster(redis) -> bool:
    from redis.cluster import RedisCluster

    return isinstance(redis, RedisCluster)
