"""The gateway keeps an idle client connection longer than uvicorn's default 5 s (``--timeout-keep-alive``, as
``graphfleet up``, the image and docker-compose start it; docs/deployment.md says why): a request after a 6 s quiet
spell goes out on the same TCP connection and is answered."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from graphfleet_cli.stack import GATEWAY_KEEPALIVE_S

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"


def _response(sock: socket.socket) -> bytes:
    """One whole response (head and ``Content-Length`` body), or what came before the server closed the socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:  # the server closed the connection
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_an_idle_connection_outlives_five_seconds(live):
    url = urlsplit(live.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(REQUEST)
        first = _response(sock)
        assert first.startswith(b"HTTP/1.1 200"), first
        time.sleep(6.0)  # uvicorn's default keep-alive (5 s) would have closed it by now
        sock.sendall(REQUEST)
        again = _response(sock)
        assert again.startswith(b"HTTP/1.1 200"), again
    assert float(GATEWAY_KEEPALIVE_S) > 60  # above a proxy's common idle timeout
