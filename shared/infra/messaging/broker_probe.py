"""A broker-neutral view of Celery's broker for readiness, queue metrics and the job watchdog.

``make_probe(settings)`` answers for the *broker* (``shared.infra.messaging.queueing.broker_url``), never for the state
Redis (they may be different servers):

* Redis (``redis://``, ``rediss://``) and Redis Sentinel (``sentinel://h:p;sentinel://h2:p2``, master name
  ``settings.broker_sentinel_master``): kombu's keys are read directly (``LLEN`` of each queue list, ``HLEN``
  of the ``unacked`` hash, a scan of both for a job id). Through Sentinel the client is redis-py's
  ``Sentinel.master_for``: every command goes to the *current* primary, also after a failover.
* RabbitMQ (``amqp://``, ``amqps://``): a passive ``queue.declare`` per queue gives its ready messages and its
  consumers; how many are delivered and not acked is not cheap to know (``None``). Which jobs have messages
  (the watchdog) cannot be scanned either: see :meth:`AmqpProbe.jobs_with_messages` for the rule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from urllib.parse import unquote, urlparse

from shared.infra.messaging.celery_patches.amqp_probe_channel import drop_default_channel
from shared.infra.messaging.queueing import broker_url, is_amqp, is_sentinel
from shared.infra.redis.keys import BROKER_UNACKED, broker_queue_keys

log = logging.getLogger(__name__)
INSPECT_TIMEOUT_S = 1.0


def sentinel_master(url: str, master_name: str, socket_timeout: float = 5.0):
    """A redis-py client of the current primary of the Sentinel group ``url`` (kombu's spelling: sentinels
    separated by ``;``; the password and db of the first one apply to the primary)."""
    from redis.sentinel import Sentinel

    parts = [urlparse(p) for p in url.split(";") if p.strip()]
    hosts = [(p.hostname or "localhost", p.port or 26379) for p in parts]
    first = parts[0]
    db = int((first.path or "/0").strip("/") or 0)
    password = unquote(first.password) if first.password else None
    sentinel = Sentinel(hosts, socket_timeout=socket_timeout)
    return sentinel.master_for(master_name, db=db, password=password, socket_timeout=socket_timeout)


def broker_redis(settings):
    """A client of the broker's Redis (the current primary through Sentinel); None for RabbitMQ."""
    from shared.infra.redis.conn import connect

    url = broker_url(settings)
    if is_amqp(url):
        return None
    if is_sentinel(url):
        return sentinel_master(url, settings.broker_sentinel_master)
    return connect(url, settings)


def jobs_with_messages(redis, job_ids: set[str], queues: Iterable[str]) -> set[str]:
    """Which of ``job_ids`` have a message queued or in flight (delivered, not acked) in the broker Redis
    ``redis``. Messages carry the job id in their ``kwargsrepr`` header (``argsrepr`` in earlier releases),
    so a substring test over the raw message is enough."""
    if not job_ids:
        return set()
    found: set[str] = set()
    ids = [(jid, jid.encode()) for jid in job_ids]

    def scan(raw: bytes) -> None:
        for jid, needle in ids:
            if jid not in found and needle in raw:
                found.add(jid)

    for key in [key for name in queues for key in broker_queue_keys(name)]:
        for raw in redis.lrange(key, 0, -1):
            scan(raw)
    for _tag, raw in redis.hscan_iter(BROKER_UNACKED, count=1000):
        scan(raw)
    return found


class RedisProbe:
    """kombu's Redis transport: queues are lists (plus priority sub-lists), in-flight messages a hash."""

    kind = "redis"

    def __init__(self, client):
        self.client = client

    def ping(self) -> bool:
        return bool(self.client.ping())

    def depths(self, queues: Iterable[str]) -> dict[str, int]:
        names = list(queues)
        pipe = self.client.pipeline(transaction=False)
        for q in names:
            for key in broker_queue_keys(q):
                pipe.llen(key)
        values = pipe.execute()
        per = len(broker_queue_keys(""))
        return {q: int(sum(values[i * per:(i + 1) * per])) for i, q in enumerate(names)}

    def unacked(self) -> int | None:
        return int(self.client.hlen(BROKER_UNACKED))

    def consumers(self, queues: Iterable[str]) -> dict[str, int] | None:
        return None  # Redis has no consumer registry: the workers' heartbeats (state Redis) say it

    def jobs_with_messages(self, job_ids: set[str], queues: Iterable[str]) -> set[str]:
        return jobs_with_messages(self.client, job_ids, queues)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass


class AmqpProbe:
    """RabbitMQ through kombu: passive declares (no queue is created, none is changed)."""

    kind = "amqp"

    def __init__(self, url: str, app=None):
        from kombu import Connection

        self.url = url
        self.app = app  # a Celery app, for the watchdog's ``inspect`` of what workers hold
        self.conn = Connection(url, connect_timeout=5)
        self._lock = threading.Lock()  # one channel, shared by the scrapes and readiness checks

    def ping(self) -> bool:
        self.conn.ensure_connection(max_retries=1)
        return bool(self.conn.connected)

    def _declare(self, queue: str) -> tuple[int, int]:
        """(ready messages, consumers) of ``queue``; (0, 0) when it does not exist yet."""
        from amqp.exceptions import NotFound

        channel = self.conn.default_channel
        try:
            _name, ready, consumers = channel.queue_declare(queue=queue, passive=True)
        except NotFound:  # the broker closed the channel: the next call opens a new one
            drop_default_channel(self.conn)
            return 0, 0
        return int(ready), int(consumers)

    def _declare_all(self, queues: Iterable[str]) -> dict[str, tuple[int, int]]:
        with self._lock:
            self.conn.ensure_connection(max_retries=1)
            try:
                return {q: self._declare(q) for q in queues}
            except Exception:
                self.conn.collect()  # a broken connection (broker restarted): a fresh one next time
                raise

    def depths(self, queues: Iterable[str]) -> dict[str, int]:
        return {q: ready for q, (ready, _c) in self._declare_all(queues).items()}

    def unacked(self) -> int | None:
        return None  # only the management API knows, per queue; not worth a scrape's time

    def consumers(self, queues: Iterable[str]) -> dict[str, int] | None:
        return {q: consumers for q, (_r, consumers) in self._declare_all(queues).items()}

    def jobs_with_messages(self, job_ids: set[str], queues: Iterable[str]) -> set[str]:
        """Which of ``job_ids`` may have a message in the broker. A queued message cannot be read without
        taking it, so: any ready message in ``queues`` counts for every job (a queue that drains is seen
        empty in a later sweep); a delivered, unacked message is held by a live worker (RabbitMQ requeues
        a dead consumer's messages at once) and listed by ``inspect`` (active, reserved, scheduled) with
        the job id in its kwargs. When a consumer of these queues did not answer, nothing is ruled out. With no
        ready message and no consumer on these queues, no job has a message there."""
        if not job_ids:
            return set()
        state = self._declare_all(queues)
        if any(ready for ready, _c in state.values()):
            return set(job_ids)
        if not any(consumers for _r, consumers in state.values()):
            return set()  # nothing ready and nobody to hold a message: none of them is in the broker
        held = self._held_by_workers() if self.app is not None else None
        if held is None:
            return set(job_ids)
        answered, text = held
        if answered < max((c for _r, c in state.values()), default=0):
            return set(job_ids)  # some consumer stayed silent: it may hold any job's message
        return {jid for jid in job_ids if jid in text}

    def _held_by_workers(self) -> tuple[int, str] | None:
        try:
            inspect = self.app.control.inspect(timeout=INSPECT_TIMEOUT_S)
            replies = [inspect.active() or {}, inspect.reserved() or {}, inspect.scheduled() or {}]
        except Exception:  # noqa: BLE001 - the broker is away: assume the worst
            log.warning("could not inspect the workers", exc_info=True)
            return None
        workers = set(replies[0]) & set(replies[1]) & set(replies[2])
        return len(workers), repr(replies)

    def close(self) -> None:
        try:
            self.conn.release()
        except Exception:  # noqa: BLE001
            pass


def make_probe(settings, app=None, state_redis=None):
    """The probe of ``settings``' broker. ``state_redis`` is reused when the broker *is* the state's Redis
    (no second connection pool); ``app`` (a Celery app) lets the RabbitMQ probe ask workers what they hold."""
    url = broker_url(settings)
    if is_amqp(url):
        return AmqpProbe(url, app)
    if state_redis is not None and url == settings.redis_url:
        return RedisProbe(state_redis)
    return RedisProbe(broker_redis(settings))


def default_probe(settings, state_redis, cached: bool = False):
    """The probe of ``settings``' broker; ``state_redis`` itself when no broker is set apart (one Redis).
    ``cached``: a broker apart gets the process's one probe of its URL (:func:`cached_probe`), for callers
    built anew on every use (the scrape-time collector)."""
    if settings is None or not settings.broker_url:
        return RedisProbe(state_redis)
    return cached_probe(settings) if cached else make_probe(settings, state_redis=state_redis)


_cached: dict[str, object] = {}
_cached_lock = threading.Lock()


def cached_probe(settings, state_redis=None):
    """One probe per broker URL for a long-lived process (the gateway's readiness checks and scrapes)."""
    url = broker_url(settings) or ""
    with _cached_lock:
        if url not in _cached:
            _cached[url] = make_probe(settings, state_redis=state_redis)
        return _cached[url]


def broker_readiness(probe, app, queues: Iterable[str]) -> tuple[bool, dict[str, bool]]:
    """(broker reachable, queue -> has a consumer). RabbitMQ counts each queue's consumers (passive declare);
    a Redis broker has no consumer registry, so the workers are asked (``inspect().active_queues()``)."""
    names = list(queues)
    try:
        ok = probe.ping()
    except Exception:  # noqa: BLE001 - any failure means not ready
        log.warning("broker unreachable", exc_info=True)
        ok = False
    consumed: set[str] = set()
    if ok:
        try:
            counts = probe.consumers(names)
            if counts is None:
                replies = app.control.inspect(timeout=INSPECT_TIMEOUT_S).active_queues() or {}
                consumed = {q["name"] for found in replies.values() for q in found}
            else:
                consumed = {q for q, n in counts.items() if n > 0}
        except Exception:  # noqa: BLE001
            log.warning("could not tell which queues are consumed", exc_info=True)
    return ok, {q: q in consumed for q in names}
