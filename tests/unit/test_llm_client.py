"""The LLM client against the simulator over real HTTP: usage records, tenant-scoped cache,
Retry-After honoured, retries not multiplied with the openai client's own."""

from __future__ import annotations

import httpx
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.config import Settings
from shared.infra.llm.client import LLMClient, LLMError, LLMUnavailable
from shared.infra.tenancy.usage import CallContext, UsageRecorder, job_usage, read_usage


@pytest.fixture()
def sim_factory():
    stops = []

    def make(**kw):
        url, stop = start_in_thread(SimConfig(port=0, seed=3, **kw))
        stops.append(stop)
        return url

    yield make
    for stop in stops:
        stop()


def _client(url, redis_client, **llm):
    settings = Settings(llm_base_url=url, llm_api_key="sk-x", llm={"backoff_base_s": 0.01, **llm})
    records = []
    recorder = UsageRecorder(redis_client, listeners=[records.append])
    return LLMClient(settings, redis_client, recorder), records


def _stats(url):
    return httpx.get(url.removesuffix("/v1") + "/stats").json()


def test_usage_records_match_the_server_and_cache_is_tenant_scoped(sim_factory, redis_client, tenant, monkeypatch):
    url = sim_factory()
    client, records = _client(url, redis_client)

    def separate_set(*args, **kwargs):
        raise AssertionError("the answer's cache entry goes in the pipeline that books its usage")

    monkeypatch.setattr(redis_client, "set", separate_set)
    msgs = [{"role": "user", "content": "Tell me about Scrooge and Marley."}]
    first = client.chat(msgs, CallContext(tenant=tenant, stage="answer", job_id="j1"))
    again = client.chat(msgs, CallContext(tenant=tenant, stage="answer", job_id="j1"))
    other = client.chat(msgs, CallContext(tenant=tenant + "b", stage="answer", job_id="j2"))
    assert not first.cache_hit and again.cache_hit and not other.cache_hit
    assert again.text == first.text
    stats = _stats(url)["chat"]
    assert stats["calls"] == 2  # the cache hit never reached the server; the other tenant did
    assert [r.cache_hit for r in records] == [False, True, False]
    assert records[0].prompt_tokens == first.prompt_tokens and records[0].cost_usd > 0
    assert records[1].prompt_tokens == 0 and records[1].cost_usd == 0
    assert job_usage(redis_client, tenant, "j1")["prompt_tokens"] == first.prompt_tokens
    assert sum(r.prompt_tokens for r in read_usage(redis_client, tenant)) == first.prompt_tokens
    assert stats["prompt_tokens"] == first.prompt_tokens + other.prompt_tokens
    entries = list(redis_client.scan_iter(f"gf:t:{{{tenant}}}:llmcache:*"))
    assert len(entries) == 1 and 0 < redis_client.ttl(entries[0]) <= client.settings.llm.cache_ttl_s


def test_server_errors_are_retried_by_us_only_and_then_reported(sim_factory, redis_client, tenant):
    url = sim_factory(error_rate=1.0)
    client, records = _client(url, redis_client, max_retries=2)
    with pytest.raises(LLMError) as err:
        client.chat([{"role": "user", "content": "hi"}], CallContext(tenant=tenant, stage="answer"))
    assert err.value.cause.startswith("http_5")
    # 1 call + 2 retries; the openai client's own retries are off (max_retries=0), so nothing multiplies
    assert sum(_stats(url)["errors"].values()) == 3
    assert len(records) == 3 and all(r.error for r in records)
    assert not list(redis_client.scan_iter(f"gf:t:{{{tenant}}}:llmcache:*"))  # no answer, no cache entry


def test_an_endpoint_down_through_every_retry_is_unavailable_unless_jobs_do_not_wait(sim_factory, redis_client,
                                                                                     tenant):
    """Connection refused or 5xx through every retry: ``LLMUnavailable`` (a job waits for the endpoint,
    ``workers.llm_wait``); with ``outage_wait_s=0`` the plain ``LLMError`` of before (the step fails)."""
    import socket

    with socket.socket() as sock:  # a port with no server behind it
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    ctx = CallContext(tenant=tenant, stage="extract")
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(LLMUnavailable) as err:
        _client(down, redis_client, max_retries=1)[0].chat(msgs, ctx)
    assert err.value.cause == "connection"
    with pytest.raises(LLMUnavailable) as err:
        _client(sim_factory(error_rate=1.0), redis_client, max_retries=1)[0].chat(msgs, ctx)
    assert err.value.cause.startswith("http_5")
    with pytest.raises(LLMError) as err:
        _client(down, redis_client, max_retries=1, outage_wait_s=0)[0].chat(msgs, ctx)
    assert not isinstance(err.value, LLMUnavailable) and err.value.cause == "connection"


def test_429_retry_after_is_honoured(redis_client, tenant, monkeypatch):
    """A transport at the network boundary answers 429 (Retry-After: 1) once, then 200; the client's wait before
    its retry is recorded, not timed."""
    import time
    from types import SimpleNamespace

    import openai

    from shared.infra.llm import client as client_module

    seen: list[httpx.Request] = []
    slept: list[float] = []
    monkeypatch.setattr(client_module, "time", SimpleNamespace(perf_counter=time.perf_counter, sleep=slept.append))

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(429, headers={"retry-after": "1"}, json={"error": {"message": "slow down"}})
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

    client, records = _client("http://llm.invalid/v1", redis_client, max_retries=3)
    client._client = openai.OpenAI(base_url="http://llm.invalid/v1", api_key="k", max_retries=0,
                                   http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    result = client.chat([{"role": "user", "content": "hi"}], CallContext(tenant=tenant, stage="answer"))
    assert result.text == "ok" and result.prompt_tokens == 5
    assert len(seen) == 2 and slept == [1.0]  # the Retry-After of the 429, before the one retry
    assert [r.error for r in records] == ["rate_limited", None]
    assert records[1].retries == 1


class CountingProxy:
    """A TCP forwarder in front of the simulator that counts the connections clients open through it."""

    def __init__(self, url: str):
        import socket
        import threading
        from urllib.parse import urlparse

        target = urlparse(url)
        self._target = (target.hostname, target.port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}{target.path}"
        self.connections = 0
        self._threading = threading
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self._target)
            for a, b in ((client, upstream), (upstream, client)):
                self._threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(2)
                except OSError:
                    pass

    def close(self) -> None:
        self._server.close()


def test_preconnect_opens_the_connection_the_first_calls_reuse_and_books_nothing(sim_factory, redis_client, tenant):
    url = sim_factory()
    proxy = CountingProxy(url)
    try:
        client, records = _client(proxy.url, redis_client)
        assert proxy.connections == 0
        assert client.preconnect() is True
        assert proxy.connections == 1
        assert records == [] and _stats(url)["chat"]["calls"] == 0  # no tokens spent, nothing booked
        ctx = CallContext(tenant=tenant, stage="answer", job_id="j1")
        client.embed(["Scrooge"], ctx)
        client.chat([{"role": "user", "content": "Who is Scrooge?"}], ctx)
        assert proxy.connections == 1  # the embedding and the answer went over the connection opened ahead
        assert _stats(url)["chat"]["calls"] == 1
    finally:
        proxy.close()


def test_preconnect_to_an_unreachable_api_returns_false_quickly(redis_client):
    from shared.infra.redis.conn import free_port

    client, _ = _client(f"http://127.0.0.1:{free_port()}/v1", redis_client)
    assert client.preconnect(timeout_s=1.0) is False
