"""A tenant's tier: the label its metrics carry, stored in the tenant record (``shared.infra.tenancy.tenants``).

The one place a tier is defaulted and read back from a stored record. It imports only the key layout,
so the usage recorder, the job store and the metrics can use it without importing the tenant store.
"""

from __future__ import annotations

import json
import threading
import time

from shared.infra.redis.keys import Keys

DEFAULT_TIER = "standard"


def parse_tier(raw: str | bytes | None) -> str:
    """The tier of a stored tenant record (JSON); the default when there is no record or no tier."""
    return str((json.loads(raw).get("tier") if raw else None) or DEFAULT_TIER)


class TierCache:
    """Tenant id -> tier from the tenant record, cached per process for ``ttl_s`` (a metrics label)."""

    def __init__(self, ttl_s: float = 60.0):
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def tier(self, redis, tenant: str) -> str:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(tenant)
        if hit and now - hit[0] < self.ttl_s:
            return hit[1]
        try:
            tier = parse_tier(redis.get(Keys(tenant).tenant_record()))
        except Exception:  # noqa: BLE001 - a label lookup must never fail a call
            tier = DEFAULT_TIER
        with self._lock:
            self._cache[tenant] = (now, tier)
        return tier


TIERS = TierCache()
