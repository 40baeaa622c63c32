"""One Redis client per kombu channel, instead of a new one for every command kombu sends.

Upstream behaviour: kombu's Redis transport builds a new ``redis.Redis`` on the channel's connection pool each time
it sends a command outside its consumer loop (``Channel.conn_or_acquire`` calls ``_create_client()``): every publish
(``Channel._put``), and for every delivered message its bookkeeping (``QoS.append``) and its ack (``QoS.ack``,
``_remove_from_indices``). Building a client builds its table of response callbacks (redis-py), CPU held under the
GIL of a worker whose other threads are preparing LLM calls.

A client on a pool holds no connection of its own (each command, and each pipeline, takes one from the pool and
gives it back) and is safe to share between threads, so one per channel does what the new ones did. It is built
again when the channel's pool changes (kombu drops its pool with a broken connection), and ``pool`` is read on every
call as before, so a closed channel still fails the way :mod:`.redis_broken_connection` makes it fail. Installed in
every process that talks to a Redis broker (``install(worker=False)`` covers it). RabbitMQ does not use these
classes.

Applies to: kombu 5.7 (``APPLIES_TO``). Delete when kombu reuses one client per channel (``conn_or_acquire`` no
longer ends in ``yield self._create_client()``).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from kombu.transport import redis as kombu_redis

from shared.infra.messaging.celery_patches.patching import replace

APPLIES_TO = {"kombu": ">=5.7,<5.8"}
PATCHES = ("kombu.transport.redis:Channel.conn_or_acquire",)
_lock = threading.RLock()  # re-entrant: the SIGTERM handler runs acks on the thread it interrupted, maybe in here
_ATTR = "_graphfleet_shared_client"


def shared_client(channel):
    """The channel's one synchronous client on its current pool."""
    pool = channel.pool  # on a closed channel this raises, as kombu's own _create_client would
    client = channel.__dict__.get(_ATTR)
    if client is None or client.connection_pool is not pool:
        with _lock:
            client = channel.__dict__.get(_ATTR)
            if client is None or client.connection_pool is not pool:
                client = channel._create_client()
                channel.__dict__[_ATTR] = client
    return client


def _shared_conn_or_acquire(_original):
    @contextmanager
    def conn_or_acquire(self, client=None):
        yield client if client else shared_client(self)

    return conn_or_acquire


def install() -> None:
    replace(kombu_redis.Channel, "conn_or_acquire", _shared_conn_or_acquire)
