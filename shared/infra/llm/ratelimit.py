"""The global LLM rate limit: one tokens-per-minute and requests-per-minute budget per model (and
optionally per tenant), shared by every worker on every host through Redis.

Each budget is a sliding window log kept by two atomic Lua scripts, so concurrent acquirers on
many hosts can never overbook it:

* ``acquire`` reserves ``prompt tokens + max_tokens`` in every budget the call is subject to (all
  or nothing), or answers how long until the reservation fits;
* ``reconcile`` replaces the reservation by the tokens the provider actually counted (0 for a
  refused call, which releases it) and re-stamps it with the completion time, the moment the
  provider charged it, so our window never expires an entry before the provider's does;
* ``cooldown`` is set on a 429 (from Retry-After) and blocks every client of that model until it
  expires, not just the worker that was refused.

Time comes from Redis (``TIME``), so host clocks do not need to agree. A single reservation larger
than a whole budget is admitted into an empty window (as providers do), so it is never refused
forever. Keys: ``gf:rl:{<model>}:*`` for a model budget and the cool-down (one cluster slot per model),
``gf:t:{<tenant>}:rl:<model>:*`` for a tenant's own budget (the tenant's slot); a call under both reserves
each by its own script and releases the first when the second does not fit.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

from shared.infra.redis.keys import Keys, ratelimit_cooldown_key, ratelimit_keys, ratelimit_prefix, ratelimit_sum_key

log = logging.getLogger(__name__)

# Per budget, KEYS (zset, hash, sum, bucket) and ARGV (tpm, rpm). KEYS[1] is the cool-down; ARGV
# starts with window_ms, burst_ms, rid, tokens. Returns {1, 0} when reserved, else {0, wait_ms}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, burst, rid, tokens = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local cool = redis.call('PTTL', KEYS[1])
if cool > 0 then return {0, cool} end
local wait, tok, req = 0, {}, {}
local n = (#KEYS - 1) / 4
for i = 0, n - 1 do
  local z, h, s, b = KEYS[2 + 4 * i], KEYS[3 + 4 * i], KEYS[4 + 4 * i], KEYS[5 + 4 * i]
  local tpm, rpm = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  -- sliding window log: never more than tpm / rpm in any window
  local old = redis.call('ZRANGEBYSCORE', z, '-inf', now - window)
  if #old > 0 then
    local freed = 0
    for _, m in ipairs(old) do
      freed = freed + tonumber(redis.call('HGET', h, m) or '0')
      redis.call('HDEL', h, m)
    end
    redis.call('ZREMRANGEBYSCORE', z, '-inf', now - window)
    if redis.call('DECRBY', s, freed) < 0 then redis.call('SET', s, 0) end
  end
  local count = redis.call('ZCARD', z)
  if rpm > 0 and count >= rpm then
    local first = redis.call('ZRANGE', z, count - rpm, count - rpm, 'WITHSCORES')
    wait = math.max(wait, tonumber(first[2]) + window - now)
  end
  local used = tonumber(redis.call('GET', s) or '0')
  if tpm > 0 and count > 0 and used + tokens > tpm then
    local entries = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
    local freed, w = 0, window
    for j = 1, #entries, 2 do
      freed = freed + tonumber(redis.call('HGET', h, entries[j]) or '0')
      if used - freed + tokens <= tpm then w = tonumber(entries[j + 1]) + window - now break end
    end
    wait = math.max(wait, w)
  end
  -- token bucket: refills at tpm / rpm per window, holds burst_ms worth; paces the flow so the
  -- window is not spent in one burst and then left idle
  local st = redis.call('HMGET', b, 'tok', 'req', 'ts')
  local el = math.max(0, now - (tonumber(st[3]) or now))
  local cap_t, cap_r = tpm * burst / window, math.max(1, rpm * burst / window)
  tok[i] = math.min(cap_t, (tonumber(st[1]) or cap_t) + el * tpm / window)
  req[i] = math.min(cap_r, (tonumber(st[2]) or cap_r) + el * rpm / window)
  if tpm > 0 then
    local need = math.min(tokens, cap_t)  -- a reservation above the bucket needs a full one
    if tok[i] < need then wait = math.max(wait, math.ceil((need - tok[i]) * window / tpm)) end
  end
  if rpm > 0 and req[i] < 1 then wait = math.max(wait, math.ceil((1 - req[i]) * window / rpm)) end
end
if wait > 0 then return {0, math.max(1, wait)} end
for i = 0, n - 1 do
  local z, h, s, b = KEYS[2 + 4 * i], KEYS[3 + 4 * i], KEYS[4 + 4 * i], KEYS[5 + 4 * i]
  redis.call('ZADD', z, now, rid)
  redis.call('HSET', h, rid, tokens)
  redis.call('INCRBY', s, tokens)
  redis.call('HSET', b, 'tok', tostring(tok[i] - tokens), 'req', tostring(req[i] - 1), 'ts', now)
  for _, k in ipairs({z, h, s, b}) do redis.call('PEXPIRE', k, 2 * window) end
end
return {1, 0}
"""

# Per budget, KEYS (zset, hash, sum, bucket) and ARGV tpm; ARGV starts with window_ms, burst_ms,
# rid, actual tokens.
_RECONCILE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, burst, rid, actual = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
for i = 0, #KEYS / 4 - 1 do
  local z, h, s, b = KEYS[1 + 4 * i], KEYS[2 + 4 * i], KEYS[3 + 4 * i], KEYS[4 + 4 * i]
  local tpm = tonumber(ARGV[5 + i])
  local old = redis.call('HGET', h, rid)
  if old then
    local delta = actual - tonumber(old)
    redis.call('INCRBY', s, delta)
    if actual > 0 then
      redis.call('HSET', h, rid, actual)
      redis.call('ZADD', z, now, rid)
    else
      redis.call('HDEL', h, rid)
      redis.call('ZREM', z, rid)
    end
    -- the bucket gets the unused part back (or pays what the provider counted above it)
    local tok = tonumber(redis.call('HGET', b, 'tok') or '0')
    redis.call('HSET', b, 'tok', tostring(math.min(tpm * burst / window, tok - delta)))
    for _, k in ipairs({z, h, s, b}) do redis.call('PEXPIRE', k, 2 * window) end
  end
end
return 1
"""

# KEYS: cooldown. ARGV: ms. Only ever extends a cool-down.
_COOLDOWN = """
local ms = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then redis.call('SET', KEYS[1], '1', 'PX', ms) end
return 1
"""


class CompletionEstimate:
    """How many completion tokens to reserve for a call without ``max_tokens``.

    From the last ``size`` calls of that (model, stage) in this process (for a stage not seen yet,
    of the model's other stages; ``default`` before any): the largest recent completion, scaled up
    by how much longer this prompt is than that call's (a summary of 40 fragments answers about ten
    times longer than one of 4). Reserving less than the provider will count lets concurrent calls
    overshoot the window (429s); reserving far more idles budget while calls are in flight.
    """

    def __init__(self, default: int = 1000, size: int = 64, ceiling: int = 16_384):
        self.default = default
        self.size = size
        self.ceiling = ceiling  # no chat model we use answers longer
        self._seen: dict[tuple[str, str], deque[tuple[int, int]]] = {}
        self._lock = threading.Lock()

    def reserve(self, model: str, stage: str, prompt_tokens: int, max_tokens: int | None = None) -> int:
        if max_tokens:
            return int(max_tokens)
        with self._lock:
            seen = self._seen.get((model, stage)) or [
                pc for (m, _s), d in self._seen.items() if m == model for pc in d
            ]
            if not seen:
                return self.default
            return min(self.ceiling, max(int(c * max(1.0, prompt_tokens / max(p, 1))) for p, c in seen))

    def observe(self, model: str, stage: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            seen = self._seen.setdefault((model, stage), deque(maxlen=self.size))
            seen.append((int(prompt_tokens), int(completion_tokens)))


class RateLimitTimeout(RuntimeError):
    """No budget became free within ``max_wait_s``."""


@dataclass(frozen=True)
class Budget:
    prefix: str
    tpm: int
    rpm: int

    def redis_keys(self) -> list[str]:
        return ratelimit_keys(self.prefix)


@dataclass
class Reservation:
    model: str
    tokens: int
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    budgets: tuple[Budget, ...] = ()


def model_prefix(model: str) -> str:
    return ratelimit_prefix(model)


def tenant_prefix(tenant: str, model: str) -> str:
    return Keys(tenant).ratelimit(model)


def cooldown_key(model: str) -> str:
    return ratelimit_cooldown_key(model)


class RedisRateLimiter:
    """Implements ``shared.infra.llm.client.RateLimiter`` over Redis (see the module docstring)."""

    def __init__(self, redis, settings, sleep=time.sleep):
        self.redis = redis
        self.cfg = settings
        self.window_ms = int(settings.window_s * 1000)
        self.burst_ms = int(min(settings.burst_s, settings.window_s) * 1000)
        self._sleep = sleep
        self._acquire = redis.register_script(_ACQUIRE)
        self._reconcile = redis.register_script(_RECONCILE)
        self._cooldown = redis.register_script(_COOLDOWN)

    def budgets(self, model: str, tenant: str | None) -> tuple[Budget, ...]:
        out = []
        tpm, rpm = self.cfg.tpm.get(model, 0), self.cfg.rpm.get(model, 0)
        if tpm or rpm:
            out.append(Budget(model_prefix(model), tpm, rpm))
        if tenant:
            ttpm = self.cfg.tenant_tpm.get(tenant, self.cfg.tenant_tpm.get("*", 0))
            trpm = self.cfg.tenant_rpm.get(tenant, self.cfg.tenant_rpm.get("*", 0))
            if ttpm or trpm:
                out.append(Budget(tenant_prefix(tenant, model), ttpm, trpm))
        return tuple(out)

    def try_acquire(self, model: str, tokens: int, tenant: str | None = None) -> tuple[Reservation | None, float]:
        """One attempt: (reservation, 0) or (None, seconds until it could fit). The model's budget (with the
        cool-down) and a tenant's budget live in different cluster slots, so each is reserved by its own atomic
        script; when a later one does not fit, the ones already taken are released at once."""
        res = Reservation(model, max(0, int(tokens)), budgets=self.budgets(model, tenant))
        taken: list[tuple[Budget, ...]] = []
        for cool, group in self._slot_groups(model, res.budgets):
            keys = [cool] + [k for b in group for k in b.redis_keys()]
            args = [self.window_ms, self.burst_ms, res.rid, res.tokens] + [x for b in group for x in (b.tpm, b.rpm)]
            ok, wait_ms = self._acquire(keys=keys, args=args)
            if not int(ok):
                for done in taken:
                    self._release(done, res.rid, 0)
                return None, int(wait_ms) / 1000.0
            taken.append(group)
        return res, 0.0

    def _slot_groups(self, model: str, budgets: tuple[Budget, ...]) -> list[tuple[str, tuple[Budget, ...]]]:
        """(cool-down key, budgets) per slot: first the model's budget under the model's cool-down (also when
        the model has no budget, so the cool-down is always checked), then each tenant budget under a key of
        the tenant's slot that is never set."""
        mine = model_prefix(model)
        groups = [(cooldown_key(model), tuple(b for b in budgets if b.prefix == mine))]
        return groups + [(f"{b.prefix}:cooldown", (b,)) for b in budgets if b.prefix != mine]

    def _release(self, group: tuple[Budget, ...], rid: str, actual: int) -> None:
        if group:
            keys = [k for b in group for k in b.redis_keys()]
            self._reconcile(keys=keys, args=[self.window_ms, self.burst_ms, rid, actual] + [b.tpm for b in group])

    def acquire(self, model: str, tokens: int, tenant: str | None = None) -> Reservation:
        """Block until the reservation fits every budget (and no cool-down is set)."""
        deadline = time.monotonic() + self.cfg.max_wait_s
        while True:
            res, wait = self.try_acquire(model, tokens, tenant)
            if res is not None:
                return res
            left = deadline - time.monotonic()
            if left <= 0:
                raise RateLimitTimeout(f"no {model} budget for {tokens} tokens within {self.cfg.max_wait_s}s")
            # Redis computed when enough of the window expires: sleep exactly that, plus up to 0.02 s of
            # jitter so the waiters it releases together do not retry in lockstep (a proportional
            # jitter would leave budget idle after every long wait)
            self._sleep(min(left, wait + random.random() * 0.02))

    def reconcile(self, reservation: Reservation | None, actual: int) -> None:
        if reservation is None or not reservation.budgets:
            return
        for _cool, group in self._slot_groups(reservation.model, reservation.budgets):
            self._release(group, reservation.rid, max(0, int(actual)))

    def cooldown(self, model: str, seconds: float) -> None:
        ms = max(1, int(seconds * 1000))
        self._cooldown(keys=[cooldown_key(model)], args=[ms])
        log.info("rate limit cool-down for %s: %.2fs", model, seconds)

    def cooldown_left(self, model: str) -> float:
        return max(0, self.redis.pttl(cooldown_key(model))) / 1000.0

    def used(self, model: str, tenant: str | None = None) -> int:
        """Tokens reserved or charged in the budget's window as of the last acquire (which sweeps it)."""
        prefix = tenant_prefix(tenant, model) if tenant else model_prefix(model)
        return int(self.redis.get(ratelimit_sum_key(prefix)) or 0)
