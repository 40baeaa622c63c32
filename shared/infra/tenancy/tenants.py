"""Tenants and their API keys.

Redis layout (everything tenant-owned under ``gf:t:{tenant}:``):

- ``gf:tenants``                      set of tenant ids (global registry, ``shared.infra.redis.keys.tenants_key``)
- ``gf:apikeys``                      hash key_id -> tenant (the only global key index, ``api_keys_key``)
- ``gf:t:{tenant}:tenant``            the tenant record (JSON)
- ``gf:t:{tenant}:apikey:{key_id}``   hash: id, name, hash (HMAC-SHA256 of the key with the pepper),
                                      created_at, revoked_at
- ``gf:t:{tenant}:apikeys``           set of the tenant's key ids

An API key reads ``gfk_{key_id}_{secret}``; only its keyed hash is stored and it is compared in
constant time. The pepper is a server-side secret shared by all gateway processes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import uuid
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.ids import validate_tenant
from shared.domain.query.params import PresetName
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys, api_keys_key, tenants_key
from shared.infra.tenancy.quotas import TenantLimits
from shared.infra.tenancy.tiers import DEFAULT_TIER

KEY_PREFIX = "gfk"
_KEY_RE = re.compile(r"^gfk_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")
PEPPER_ENV = "GRAPHFLEET_API_KEY_PEPPER"  # ``Settings.api_key_pepper``


def api_key_pepper(settings) -> bytes:
    """The server-side secret mixed into key hashes (``Settings.api_key_pepper``, from ``PEPPER_ENV``)."""
    return settings.api_key_pepper.encode()


def hash_key(api_key: str, pepper: bytes) -> str:
    return hmac.new(pepper, api_key.encode(), hashlib.sha256).hexdigest()


class Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str = ""
    tier: str = DEFAULT_TIER
    preset: PresetName | None = None
    limits: TenantLimits = Field(default_factory=TenantLimits)
    created_at: float = 0.0


@dataclass(frozen=True)
class IssuedKey:
    key_id: str
    tenant: str
    api_key: str  # shown once
    name: str
    created_at: float


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    tenant: str
    name: str
    created_at: float
    revoked_at: float | None


class TenantExists(Exception):
    pass


class TenantStore:
    def __init__(self, redis, pepper: bytes = b""):
        self.redis = redis
        self.pepper = pepper

    @staticmethod
    def _record_key(tenant: str) -> str:
        return Keys(tenant).tenant_record()

    @staticmethod
    def _key_key(tenant: str, key_id: str) -> str:
        return Keys(tenant).api_key(key_id)

    @staticmethod
    def _key_ids_key(tenant: str) -> str:
        return Keys(tenant).api_key_ids()

    # ------------------------------------------------------------ tenants
    def create(self, tenant: Tenant) -> Tenant:
        validate_tenant(tenant.id)
        tenant = tenant.model_copy(update={"created_at": tenant.created_at or time.time()})
        if not self.redis.set(self._record_key(tenant.id), tenant.model_dump_json(), nx=True):
            raise TenantExists(tenant.id)
        self.redis.sadd(tenants_key(), tenant.id)
        return tenant

    def get(self, tenant_id: str) -> Tenant | None:
        try:
            validate_tenant(tenant_id)
        except ValueError:
            return None
        raw = self.redis.get(self._record_key(tenant_id))
        return Tenant.model_validate_json(raw) if raw else None

    def all(self) -> list[Tenant]:
        """Every tenant record, ordered by id (ids in the registry whose record is gone are left out)."""
        ids = sorted(to_str(x) for x in self.redis.smembers(tenants_key()))
        pipe = self.redis.pipeline(transaction=False)  # one GET per tenant: records live in their tenants' slots
        for i in ids:
            pipe.get(self._record_key(i))
        raws = pipe.execute() if ids else []
        return [Tenant.model_validate_json(raw) for raw in raws if raw]

    @staticmethod
    def new_id() -> str:
        return "t" + uuid.uuid4().hex[:12]

    # --------------------------------------------------------------- keys
    def issue_key(self, tenant_id: str, name: str = "") -> IssuedKey:
        validate_tenant(tenant_id)
        key_id = secrets.token_hex(8)
        api_key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        now = time.time()
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self._key_key(tenant_id, key_id), mapping={
            "id": key_id, "name": name, "hash": hash_key(api_key, self.pepper), "created_at": now})
        pipe.sadd(self._key_ids_key(tenant_id), key_id)
        pipe.execute()
        # the global index is another cluster slot: written once the tenant's own record is complete
        self.redis.hset(api_keys_key(), key_id, tenant_id)
        return IssuedKey(key_id, tenant_id, api_key, name, now)

    def revoke_key(self, tenant_id: str, key_id: str) -> bool:
        """Revoke a key of this tenant; False when the tenant has no such key."""
        if to_str(self.redis.hget(api_keys_key(), key_id) or b"") != tenant_id:
            return False
        key = self._key_key(tenant_id, key_id)
        if not self.redis.exists(key):
            return False
        self.redis.hsetnx(key, "revoked_at", time.time())
        return True

    def keys(self, tenant_id: str) -> list[KeyInfo]:
        ids = sorted(to_str(x) for x in self.redis.smembers(self._key_ids_key(tenant_id)))
        pipe = self.redis.pipeline(transaction=False)
        for key_id in ids:
            pipe.hgetall(self._key_key(tenant_id, key_id))
        out = []
        for raw in pipe.execute() if ids else []:
            rec = {to_str(k): to_str(v) for k, v in raw.items()}
            if rec:
                out.append(KeyInfo(rec["id"], tenant_id, rec.get("name", ""), float(rec["created_at"]),
                                   float(rec["revoked_at"]) if rec.get("revoked_at") else None))
        return out

    def authenticate(self, api_key: str) -> tuple[str, str] | None:
        """(tenant, key_id) for a valid, unrevoked key; None otherwise."""
        match = _KEY_RE.match(api_key or "")
        if not match:
            return None
        key_id = match.group(1)
        tenant = self.redis.hget(api_keys_key(), key_id)
        if tenant is None:
            return None
        tenant = to_str(tenant)
        stored, revoked = self.redis.hmget(self._key_key(tenant, key_id), ["hash", "revoked_at"])
        if stored is None or revoked is not None:
            return None
        if not hmac.compare_digest(to_str(stored).encode(), hash_key(api_key, self.pepper).encode()):
            return None
        return tenant, key_id
