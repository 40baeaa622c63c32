"""The LLM client against the simulator over real HTTP: usage records, tenant-scoped cache,
Retry-After honoured, retries not multiplied with the openai client's own."""

from __future__ import annotations

import httpx
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.config import Settings
from shared.infra.llm.client import LLMClient, LLMError
from shared.infra.llm.usage import CallContext, UsageRecorder, job_usage, read_usage


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


def test_usage_records_match_the_server_and_cache_is_tenant_scoped(sim_factory, redis_client, tenant):
    url = sim_factory()
    client, records = _client(url, redis_client)
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


def test_server_errors_are_retried_by_us_only_and_then_reported(sim_factory, redis_client, tenant):
    url = sim_factory(error_rate=1.0)
    client, records = _client(url, redis_client, max_retries=2)
    with pytest.raises(LLMError) as err:
        client.chat([{"role": "user", "content": "hi"}], CallContext(tenant=tenant, stage="answer"))
    assert err.value.cause.startswith("http_5")
    # 1 call + 2 retries; the openai client's own retries are off (max_retries=0), so nothing multiplies
    assert sum(_stats(url)["errors"].values()) == 3
    assert len(records) == 3 and all(r.error for r in records)


def test_429_retry_after_is_honoured(redis_client, tenant):
    """A transport at the network boundary answers 429 (Retry-After: 1) once, then 200."""
    import time

    import openai

    seen: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(time.monotonic())
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
    assert len(seen) == 2 and seen[1] - seen[0] >= 1.0
    assert [r.error for r in records] == ["rate_limited", None]
    assert records[1].retries == 1
