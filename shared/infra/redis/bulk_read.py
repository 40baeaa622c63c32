"""A large Redis string read straight from the socket into one buffer.

A cold query worker reads a tenant's index snapshots and vector blocks, hundreds of MB at 100,000 passages.
Through redis-py each byte is copied four times (the socket into the parser's buffer, that buffer into hiredis's
reader, the reader's reply into a new ``bytes``, the parts of a snapshot joined into one), and on a first query
every copy lands in memory the process touches for the first time. redis-py has no way to read a reply into a
caller's buffer, so the reply to one ``GET`` or ``HGET`` is read here with the command sent, and its bytes received
by ``recv_into`` where they will stay (docs/scaling.md, "A cold query worker's first query").

This reads redis-py's pooled connection's socket directly: only between whole replies (a connection that holds
unread bytes is not handed out by the pool), only a bulk-string reply (anything else: the connection is dropped
and the command sent again through the client, whose errors and retries then apply), and a connection left
mid-reply by an error is disconnected, never returned to the pool half read. A cluster client reads from the
connection pool of the node that holds the key; a ``MOVED`` reply falls back to the cluster client.
"""

from __future__ import annotations

import logging

import redis as redis_lib

from shared.infra.pretouched import buffer

log = logging.getLogger(__name__)
RECV_BYTES = 4 * 2**20  # one recv_into at most
_HEADER_MAX = 64  # "$<length>\r\n" or an error line, as far as it is read


class _Unusual(Exception):
    """A reply this reader does not take: the command goes through the client instead."""


def read_value(client, command: str, key: str, *args, into: memoryview | None = None) -> memoryview | None:
    """The value ``command`` (``GET`` or ``HGET``) replies for ``key``, as a memoryview of the buffer it was read
    into: ``into`` (its first bytes; ``ValueError`` when the value is longer) or a new one; None when there is no
    value. Errors are the client's own (``ResponseError``, ``ConnectionError``...)."""
    node = _node_client(client, key)
    if node is not None:
        pool = node.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command(command, key, *args)
            return _read_bulk(conn._sock, into)
        except (_Unusual, OSError, AttributeError, redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            # AttributeError: a redis-py whose connections keep their socket elsewhere still reads, through it
            conn.disconnect()
            log.debug("reading %s %s through the client: %s", command, key, exc)
        except BaseException:
            conn.disconnect()  # mid-reply: never handed out again half read
            raise
        finally:
            pool.release(conn)
    value = client.execute_command(command, key, *args)
    if value is None:
        return None
    if into is None:
        return memoryview(value)
    if len(value) > len(into):
        raise ValueError(f"{command} {key}: a value of {len(value)} bytes, room for {len(into)}")
    into[: len(value)] = value
    return into[: len(value)]


def _node_client(client, key: str):
    """The plain client whose pool holds the connection to read ``key`` from, or None (read through ``client``)."""
    if isinstance(client, redis_lib.Redis):
        return client
    get_node = getattr(client, "get_node_from_key", None)  # a cluster client: the key's primary
    if get_node is None:
        return None
    try:
        return client.get_redis_connection(get_node(key))
    except Exception:  # noqa: BLE001 - no slot map yet or a node gone: the cluster client finds its way
        return None


def _read_bulk(sock, into: memoryview | None) -> memoryview | None:
    header = _read_line(sock)
    kind = header[:1]
    if kind == b"-":
        message = header[1:].decode("utf-8", "replace")
        if message.startswith(("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN")):
            raise _Unusual(message)  # the cluster client follows the slot
        raise redis_lib.ResponseError(message)
    if kind == b"_":  # RESP3 null
        return None
    if kind != b"$":
        raise _Unusual(f"a reply of type {kind!r}")
    length = int(header[1:])
    if length < 0:
        return None
    if into is None:
        into = memoryview(buffer(length))  # not zeroed: every byte is read into it
    elif length > len(into):
        raise ValueError(f"a value of {length} bytes, room for {len(into)}")
    view = into[:length]
    _recv_exact(sock, view)
    _recv_exact(sock, memoryview(bytearray(2)))  # the reply's closing CRLF
    return view


def _read_line(sock) -> bytes:
    line = bytearray()
    while not line.endswith(b"\r\n"):
        if len(line) > _HEADER_MAX and not line.startswith(b"-"):
            raise _Unusual("a reply header too long")
        byte = sock.recv(1)
        if not byte:
            raise redis_lib.ConnectionError("connection closed while reading a reply")
        line += byte
    return bytes(line[:-2])


def _recv_exact(sock, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:], min(len(view) - got, RECV_BYTES))
        if not n:
            raise redis_lib.ConnectionError("connection closed while reading a reply")
        got += n
