"""``rediss://``: a real redis-server with TLS (certificates made with openssl), reached by ``connect()`` (the
gateway's and the workers' client) and by the workers' Celery broker connection, both verifying the server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from shared.config import Settings
from shared.infra.redis.conn import connect, free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory):
    if not shutil.which("openssl"):  # Debian's openssl is in every base image; say so rather than skip quietly
        raise RuntimeError("openssl CLI missing: apt-get install -y openssl")
    d = tmp_path_factory.mktemp("redis-tls")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
            "-out", "server.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "san.ext", "-out", "server.pem", cwd=d)
    port = free_port()
    redis_bin = shutil.which("redis-server") or subprocess.check_output(
        [sys.executable, "-c", "from shared.infra.redis.conn import redis_server_binary as b; print(b())"],
        text=True, cwd=ROOT).strip()
    proc = subprocess.Popen([redis_bin, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                             "--tls-cert-file", str(d / "server.pem"), "--tls-key-file", str(d / "server.key"),
                             "--tls-ca-cert-file", str(d / "ca.pem"), "--tls-auth-clients", "no",
                             "--save", "", "--appendonly", "no", "--requirepass", "pw"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"rediss://:pw@localhost:{port}/0"
    client = connect(url, Settings(redis_tls_ca_file=str(d / "ca.pem")))
    deadline = time.monotonic() + 15
    while True:
        assert proc.poll() is None, "redis-server exited: was it built without TLS?"
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    client.close()
    yield url, d / "ca.pem"
    proc.terminate()
    proc.wait(timeout=10)


def test_connect_verifies_the_server_certificate(tls_redis):
    url, ca = tls_redis
    client = connect(url, Settings(redis_tls_ca_file=str(ca)))
    assert client.set("tls", "ok") and client.get("tls") == b"ok"
    untrusted = connect(url, Settings())  # the system CAs do not know the test CA
    with pytest.raises(redis.ConnectionError, match="(?i)certificate"):
        untrusted.ping()


def test_the_workers_celery_broker_speaks_tls(tls_redis):
    url, ca = tls_redis
    code = ("from workers.celery_app import app\n"
            "assert app.conf.broker_use_ssl['ssl_ca_certs'], app.conf.broker_use_ssl\n"
            "with app.connection_for_write() as conn:\n"
            "    conn.ensure_connection(max_retries=2)\n"
            "    conn.default_channel.client.ping()\n"
            "print('broker ok')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update(PYTHONPATH=str(ROOT), GRAPHFLEET_REDIS_URL=url, GRAPHFLEET_REDIS_TLS_CA_FILE=str(ca))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert proc.returncode == 0 and "broker ok" in proc.stdout, proc.stderr[-3000:]
