"""Process-wide gateway state: settings, Redis clients, the Celery producer, the tenant store."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
import redis.asyncio as aredis
from starlette.concurrency import run_in_threadpool

from api_gateway.draining import Draining
from shared.infra.messaging.channel_listener import ChannelListener
from shared.infra.messaging.queueing import QUEUES, make_celery, settings_for
from shared.infra.redis.conn import aconnect, connect, read_stack_info
from shared.infra.redis.key_migration import ensure_layout
from shared.infra.store.warmup import warm_sender
from shared.infra.tenancy.tenants import PEPPER_ENV, TenantStore, api_key_pepper

log = logging.getLogger("api_gateway")

READY_CACHE_S = 5.0


def resolve_admin_key(settings) -> str:
    if settings.admin_key:
        return settings.admin_key
    if settings.env != "development":
        raise RuntimeError(f"GRAPHFLEET_ADMIN_KEY must be set when env={settings.env!r} (only 'development' "
                           "generates a throwaway admin key)")
    key = "adm-" + secrets.token_urlsafe(24)
    log.warning("no GRAPHFLEET_ADMIN_KEY set (development): generated admin key %s", key)
    print(f"graphfleet gateway: development admin key: {key}", file=sys.stderr, flush=True)
    return key


def resolve_api_key_pepper(settings) -> bytes:
    """The API-key pepper (``Settings.api_key_pepper``). Outside development it must be set: without it,
    whoever reads the Redis could test guessed keys against the stored hashes offline."""
    pepper = api_key_pepper(settings)
    if not pepper and settings.env != "development":
        raise RuntimeError(f"{PEPPER_ENV} must be set when env={settings.env!r} (only 'development' hashes API "
                           "keys without a server-side secret)")
    return pepper


def resolve_redis_url(settings) -> str:
    if settings.redis_url:
        return settings.redis_url
    info = read_stack_info(settings.data_dir)
    if info and info.get("redis_url"):
        return info["redis_url"]
    raise RuntimeError("no Redis configured: set GRAPHFLEET_REDIS_URL or start the stack (`graphfleet up`)")


class LockedCelery:
    """``send_task`` serialised across threadpool workers (kombu producers are not thread-safe)."""

    def __init__(self, app):
        self.app = app
        self._lock = threading.RLock()  # re-entered by ``send_task`` within ``producer_or_acquire``

    def send_task(self, name: str, args=None, **kwargs):
        with self._lock:
            return self.app.send_task(name, args=args, **kwargs)

    @contextmanager
    def producer_or_acquire(self, producer=None):
        """A pooled producer, the lock held for all the sends made with it (a batch: ``messages.send_all``)."""
        with self._lock, self.app.producer_or_acquire(producer) as held:
            yield held

    def warm(self) -> None:
        """What the first ``send_task`` would pay in a fresh gateway (the Redis transport is imported on first
        use, and the first publish to a queue declares it), paid now: ``warmup.warm_sender``, under the lock."""
        with self._lock:
            warm_sender(self.app)


@dataclass
class Gateway:
    settings: object
    redis_url: str
    admin_key: str
    max_body_bytes: int
    redis: object = None
    celery: LockedCelery | None = None
    tenants: TenantStore | None = None
    _aredis: dict = field(default_factory=dict)
    _ready: tuple[float, dict] | None = None
    _ready_lock: threading.Lock = field(default_factory=threading.Lock)
    draining: Draining = field(default_factory=Draining)  # the stop signal ends held waits

    @classmethod
    def build(cls, settings, max_body_bytes: int | None = None) -> Gateway:
        url = resolve_redis_url(settings)
        settings = settings_for(settings, url)
        limit = max_body_bytes or settings.gateway_max_body_bytes
        gw = cls(settings=settings, redis_url=url, admin_key=resolve_admin_key(settings), max_body_bytes=limit)
        pepper = resolve_api_key_pepper(settings)
        gw.redis = connect(url)
        try:
            ensure_layout(gw.redis)  # a Redis of an older version: its tenants' keys get their hash tag
        except redis.ConnectionError as exc:  # not up yet: the workers move the keys when they start
            log.warning("key layout not checked, Redis not reachable: %s", exc)
        gw.celery = LockedCelery(make_celery(settings, name="graphfleet-gateway"))
        gw.tenants = TenantStore(gw.redis, pepper)
        return gw

    def aredis(self) -> aredis.Redis:
        """An asyncio client bound to the running event loop."""
        loop = asyncio.get_running_loop()
        client = self._aredis.get(id(loop))
        if client is None:
            client = aconnect(self.redis_url)
            self._aredis = {id(loop): client}
        return client

    async def warm(self) -> None:
        """At start-up, so the first request does not pay for it: the Celery producer (``LockedCelery.warm``)
        and both Redis clients' first connections. Best effort: a Redis not up yet is only logged."""
        try:
            await run_in_threadpool(self._warm_sync)  # AnyIO's pool: its thread stays for the first request's work
            await self.aredis().ping()
            await self._warm_wait()
        except Exception:  # noqa: BLE001 - the gateway starts anyway; readiness reports Redis
            log.warning("gateway warm-up failed", exc_info=True)

    async def _warm_wait(self) -> None:
        """A ``?wait``'s and a stream's path: the client's shared subscription (``ChannelListener``) connected
        and subscribed, so the first held request finds it up; no tenant's key or channel is touched."""
        client = self.aredis()
        await ChannelListener.of(client).start()
        await client.ping()

    def _warm_sync(self) -> None:
        self.redis.ping()
        try:  # a submission's pipelines (MULTI ... EXEC), no key touched
            pipe = self.redis.pipeline(transaction=True)
            pipe.ping()
            pipe.execute()
        except Exception:  # noqa: BLE001 - a cluster may refuse a keyless transaction: the first submission builds it
            log.debug("pipeline warm-up skipped", exc_info=True)
        self.celery.warm()
        self.celery.app.backend  # noqa: B018 - Celery builds its (disabled) result backend on first access

    async def aclose(self) -> None:
        for client in self._aredis.values():
            await ChannelListener.close_for(client)
            await client.aclose()
        self._aredis = {}

    def is_admin(self, presented: str | None) -> bool:
        if not presented:
            return False
        a = hashlib.sha256(presented.encode()).digest()
        b = hashlib.sha256(self.admin_key.encode()).digest()
        return hmac.compare_digest(a, b)

    def readiness(self) -> dict:
        """Redis reachable and a consumer on every queue; cached for a few seconds."""
        with self._ready_lock:
            if self._ready and time.monotonic() - self._ready[0] < READY_CACHE_S:
                return self._ready[1]
            state = self._probe()
            self._ready = (time.monotonic(), state)
            return state

    def _probe(self) -> dict:
        """State Redis reachable, broker reachable (``shared.infra.messaging.broker_probe``: Redis, Sentinel or
        RabbitMQ) and a consumer on every queue (RabbitMQ: consumer counts; Redis: the workers' ``active_queues``)."""
        from shared.infra.messaging.broker_probe import broker_readiness, cached_probe

        try:
            redis_ok = bool(self.redis.ping())
        except Exception:  # noqa: BLE001 - any failure means not ready
            redis_ok = False
        broker_ok, queues = False, dict.fromkeys(QUEUES, False)
        try:
            probe = cached_probe(self.settings, state_redis=self.redis)
            broker_ok, queues = broker_readiness(probe, self.celery.app, QUEUES)
        except Exception:  # noqa: BLE001 - a broker URL that cannot even be parsed: not ready
            log.warning("broker probe failed", exc_info=True)
        ready = redis_ok and broker_ok and all(queues.values())
        return {"ready": ready, "redis": redis_ok, "broker": broker_ok, "queues": queues}
