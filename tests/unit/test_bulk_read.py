"""Large values read straight into a buffer (``bulk_read``): the same bytes the client reads, on one Redis and on
a cluster, and a connection never left half read."""

import numpy as np
import pytest
import redis

from shared.infra.redis.bulk_read import read_value
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import Keys


def payload(n: int, seed: int = 0) -> bytes:
    data = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
    return b"$3\r\nGET\r\n" + data + b"\r\n-ERR"  # protocol-looking bytes inside the value


def test_get_and_hget_read_the_value_whole(redis_client, tenant):
    k = Keys(tenant)
    big, small = payload(5 * 2**20 + 3), payload(10, 1)
    redis_client.set(k.vector_block("chunks", 0), big)
    redis_client.hset(k.index_snapshot("walk"), mapping={"0": small, "1": b""})
    assert bytes(read_value(redis_client, "GET", k.vector_block("chunks", 0))) == big
    assert bytes(read_value(redis_client, "HGET", k.index_snapshot("walk"), "0")) == small
    assert bytes(read_value(redis_client, "HGET", k.index_snapshot("walk"), "1")) == b""
    assert read_value(redis_client, "GET", k.vector_block("chunks", 1)) is None
    assert read_value(redis_client, "HGET", k.index_snapshot("walk"), "9") is None
    # into a caller's buffer: the value's bytes at its start, the rest untouched
    buf = np.full(len(small) + 4, 7, dtype=np.uint8)
    got = read_value(redis_client, "HGET", k.index_snapshot("walk"), "0", into=memoryview(buf))
    assert bytes(got) == small and buf[len(small):].tolist() == [7] * 4
    assert redis_client.get(k.vector_block("chunks", 0)) == big  # the pooled connections still answer right


def test_a_value_too_long_or_of_the_wrong_type_is_an_error_and_the_connection_stays_sound(redis_client, tenant):
    k = Keys(tenant)
    redis_client.set(k.vector_block("chunks", 0), payload(4096))
    redis_client.hset(k.index_snapshot("walk"), "0", b"x")
    with pytest.raises(ValueError, match="room for 100"):
        read_value(redis_client, "GET", k.vector_block("chunks", 0), into=memoryview(np.empty(100, dtype=np.uint8)))
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        read_value(redis_client, "GET", k.index_snapshot("walk"))
    for _ in range(20):  # every pooled connection answers its own command
        assert redis_client.hget(k.index_snapshot("walk"), "0") == b"x"
        assert bytes(read_value(redis_client, "GET", k.vector_block("chunks", 0))) == payload(4096)


def test_a_connection_the_server_closed_is_read_again_through_the_client(redis_server, redis_client, tenant):
    k = Keys(tenant)
    redis_client.set(k.vector_block("chunks", 0), payload(1000))
    name = "bulk-read-" + tenant
    reader = connect(redis_server.url, client_name=name)
    try:
        assert bytes(read_value(reader, "GET", k.vector_block("chunks", 0))) == payload(1000)
        killed = 0
        for node in _nodes(redis_client):  # the server drops the reader's pooled connections
            for c in node.client_list():
                if c.get("name") == name:
                    node.execute_command("CLIENT", "KILL", "ID", c["id"])
                    killed += 1
        assert killed
        assert bytes(read_value(reader, "GET", k.vector_block("chunks", 0))) == payload(1000)
    finally:
        reader.close()


def _nodes(client) -> list:
    """A plain client for each Redis server behind ``client``."""
    if isinstance(client, redis.Redis):
        return [client]
    return [client.get_redis_connection(node) for node in client.get_nodes()]


def test_a_connection_without_a_readable_socket_reads_through_the_client(redis_client, tenant, monkeypatch):
    from shared.infra.redis import bulk_read

    def no_socket(sock, into):
        raise AttributeError("'Connection' object has no attribute '_sock'")  # a redis-py that moved it

    k = Keys(tenant)
    redis_client.set(k.vector_block("chunks", 0), payload(3000))
    monkeypatch.setattr(bulk_read, "_read_bulk", no_socket)
    buf = memoryview(np.empty(4000, dtype=np.uint8))
    assert bytes(read_value(redis_client, "GET", k.vector_block("chunks", 0), into=buf)) == payload(3000)
    assert read_value(redis_client, "GET", k.vector_block("chunks", 9)) is None
    assert redis_client.get(k.vector_block("chunks", 0)) == payload(3000)  # the pool's connections answer right
