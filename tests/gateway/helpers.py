"""Fixtures and helpers for the gateway tests (imported by the other ``test_gateway_*`` modules).

The gateway runs in-process (TestClient) against the session's real Redis, on its own database
index so that no worker ever consumes the messages these tests enqueue and queue lengths are exact.
"""

from __future__ import annotations

import os

from fastapi.testclient import TestClient

from shared.infra.jobs.store import JobStore
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import Keys

ADMIN = "adm-test-key-123"
GATEWAY_DB = 7
ADMIN_HEADERS = {"X-API-Key": ADMIN}


def db_url(redis_server) -> str:
    return redis_server.gateway_url


def make_client(**create_kwargs) -> TestClient:
    from api_gateway.app import create_app

    return TestClient(create_app(**create_kwargs))


def new_tenant(api, tenant_id: str, **fields) -> dict:
    r = api.post("/v1/tenants", json={"id": tenant_id, **fields}, headers=ADMIN_HEADERS)
    assert r.status_code == 201, r.text
    r = api.post(f"/v1/tenants/{tenant_id}/keys", json={"name": "test"}, headers=ADMIN_HEADERS)
    assert r.status_code == 201, r.text
    key = r.json()
    return {"id": tenant_id, "key": key["api_key"], "key_id": key["key_id"],
            "headers": {"X-API-Key": key["api_key"]}}


def queue_lengths(redis) -> dict[str, int]:
    """Messages waiting per queue in the gateway's broker: ``redis`` itself when it is the broker, else
    ``GRAPHFLEET_BROKER_URL`` (a Redis or RabbitMQ, counted by a passive queue declare)."""
    broker = os.environ.get("GRAPHFLEET_BROKER_URL")
    if not broker:
        return {q: redis.llen(q) for q in [*QUEUES, "default"]}
    from kombu import Connection

    with Connection(broker) as conn:
        channel = conn.default_channel
        return {q: _declared_size(channel, q) for q in [*QUEUES, "default"]}


def newest_message_headers(redis, queue: str) -> dict:
    """The headers (task name, kwargsrepr) of the message last sent to ``queue``, left in the queue."""
    import json

    broker = os.environ.get("GRAPHFLEET_BROKER_URL")
    if not broker or not broker.startswith("amqp"):  # kombu LPUSHes: the newest message is at index 0
        return json.loads((connect(broker) if broker else redis).lindex(queue, 0))["headers"]
    from kombu import Connection

    with Connection(broker) as conn:  # RabbitMQ hands out the oldest first: take them all, put them back
        channel = conn.default_channel
        taken = []
        while (message := channel.basic_get(queue, no_ack=False)) is not None:
            taken.append(message)
        for message in taken:
            channel.basic_reject(message.delivery_info["delivery_tag"], True)
        return dict(taken[-1].headers)


def purge_broker(url: str) -> None:
    """Empty every graphfleet queue of the broker at ``url`` (Redis or RabbitMQ)."""
    from kombu import Connection

    with Connection(url) as conn:
        for q in [*QUEUES, "default"]:
            try:
                conn.default_channel.queue_purge(q)
            except Exception:  # noqa: BLE001 - a queue never declared holds nothing
                conn.close()  # RabbitMQ closed the channel: the next one is new


def _declared_size(channel, queue: str) -> int:
    try:
        return int(channel.queue_declare(queue, passive=True).message_count)
    except Exception:  # noqa: BLE001 - a queue never declared holds nothing (RabbitMQ closes the channel)
        return 0


def enqueued(redis) -> int:
    return sum(queue_lengths(redis).values())


def job_count(redis, tenant: str) -> int:
    return redis.zcard(Keys(tenant).jobs())


def finish(redis, tenant: str, job_id: str, status: str = "succeeded", **fields) -> None:
    JobStore(redis, tenant).finish(job_id, status, **fields)


def ingest(api, who: dict, *texts: str, headers: dict | None = None):
    docs = [{"text": t} for t in texts]
    return api.post("/v1/documents", json={"documents": docs}, headers={**who["headers"], **(headers or {})})


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) >= {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body


def with_a_document(redis, tenant: str) -> None:
    """Store one document record for ``tenant``, so its queries are accepted (a tenant with no documents is
    answered 404 ``no_documents``) without ingesting anything."""
    from shared.domain.models import Document
    from shared.infra.store.redis_graph import GraphStore

    GraphStore(redis, tenant).put_document(Document(id="seed", tenant=tenant, title="seed", text_hash="seed"), "seed")
