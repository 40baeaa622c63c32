"""``Idempotency-Key`` support for submissions.

``gf:t:{tenant}:idem:{scope}:{sha256(key)}`` holds JSON ``{"fingerprint", "state", "status", "body"}``
for 24 h: ``state`` is ``pending`` while the first request is being submitted (short TTL, so a
crashed gateway does not pin the key) and ``done`` with the stored response afterwards. The same
key with the same payload fingerprint replays the stored response; a different payload is a 422.
"""

from __future__ import annotations

import hashlib
import json

from api_gateway.errors import ApiError
from shared.infra.redis.keys import Keys

DONE_TTL_S = 24 * 3600
PENDING_TTL_S = 60
MAX_KEY_LENGTH = 255


def fingerprint(payload) -> str:
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


class Idempotency:
    def __init__(self, redis, tenant: str, scope: str, key: str, payload_fingerprint: str):
        if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable "
                                                           "characters")
        digest = hashlib.sha256(key.encode()).hexdigest()[:40]
        self.redis = redis
        self.redis_key = Keys(tenant).idempotency(scope, digest)
        self.fingerprint = payload_fingerprint
        self.claimed = False

    def replay(self) -> tuple[int, dict] | None:
        """The stored (status, body) for this key, None if unused; raises on a payload mismatch."""
        raw = self.redis.get(self.redis_key)
        if raw is None:
            return None
        rec = json.loads(raw)
        if rec["fingerprint"] != self.fingerprint:
            raise ApiError(422, "idempotency_key_reused",
                           "this Idempotency-Key was already used with a different payload")
        if rec["state"] != "done":
            raise ApiError(409, "idempotency_in_progress", "a request with this Idempotency-Key is still running",
                           {"Retry-After": "1"})
        return rec["status"], rec["body"]

    def claim(self) -> tuple[int, dict] | None:
        """Mark the key pending; if another request got there first, return (or raise) what replay says."""
        rec = json.dumps({"fingerprint": self.fingerprint, "state": "pending"})
        if self.redis.set(self.redis_key, rec, nx=True, ex=PENDING_TTL_S):
            self.claimed = True
            return None
        return self.replay()

    def complete(self, status: int, body: dict) -> None:
        rec = {"fingerprint": self.fingerprint, "state": "done", "status": status, "body": body}
        self.redis.set(self.redis_key, json.dumps(rec), ex=DONE_TTL_S)

    def abandon(self) -> None:
        if self.claimed:
            self.redis.delete(self.redis_key)
