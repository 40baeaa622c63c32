"""One Redis client per kombu channel, instead of a new one for every command kombu sends.

kombu's Redis transport (5.7) builds a new ``redis.Redis`` on the channel's connection pool each time it sends a
command outside its consumer loop (``Channel.conn_or_acquire``): every publish (``Channel._put``), and for every
delivered message its bookkeeping (``QoS.append``) and its ack (``QoS.ack``, ``_remove_from_indices``). Building
a client builds its table of response callbacks (redis-py 8), CPU held under the GIL of a worker whose other
threads are preparing LLM calls: in an ingest worker, building those clients was a visible share of the time
its threads held the GIL.

A client on a pool holds no connection of its own (each command, and each pipeline, takes one from the pool and
gives it back) and is safe to share between threads, so one per channel does what the new ones did. It is built
again when the channel's pool changes (kombu drops its pool with a broken connection), and ``pool`` is read on
every call as before, so a closed channel still fails the way ``workers/kombu_fixes.py`` makes it fail.
:func:`install` is idempotent; ``shared.infra.queueing.make_celery`` (the gateway, the CLI) and ``workers.celery_app``
call it. On RabbitMQ (``amqp://``) these classes are not used and the patch is inert.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from kombu.transport import redis as kombu_redis

_lock = threading.Lock()
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


@contextmanager
def _conn_or_acquire_shared(self, client=None):
    yield client if client else shared_client(self)


def install() -> None:
    kombu_redis.Channel.conn_or_acquire = _conn_or_acquire_shared
