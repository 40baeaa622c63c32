"""The simulator's faults: token and request rate limits, server errors, malformed output, concurrency."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.faults import RateLimiter
from llm_simulator.server import start_in_thread
from shared.domain.prompts import (
    community_report,
)
from tests.unit.sim_support import (
    TEXT,
    chat,
    extract_prompt,
    parse_records,
    stats,
)


def test_rate_limit_tokens_429(start):
    url, client = start(rate_limit_tpm=50)
    chat(client, "hello there, how are you today?")  # fits in an empty window
    with pytest.raises(openai.RateLimitError) as info:
        chat(client, extract_prompt())
    headers = info.value.response.headers
    assert 1 <= int(headers["retry-after"]) <= 60
    assert 0 < int(headers["retry-after-ms"]) <= 60000
    assert int(headers["retry-after"]) >= int(headers["retry-after-ms"]) / 1000
    s = stats(url)
    assert s["errors"]["429"] == 1 and s["chat"]["calls"] == 1


def test_rate_limit_requests_429(start):
    url, client = start(rate_limit_rpm=2)
    chat(client, "one")
    chat(client, "two")
    with pytest.raises(openai.RateLimitError) as info:
        chat(client, "three")
    assert 58 <= int(info.value.response.headers["retry-after"]) <= 60
    assert stats(url)["errors"]["429"] == 1


def test_sliding_window_retry_after():
    now = [0.0]
    limiter = RateLimiter(tpm=100, rpm=None, clock=lambda: now[0])
    assert limiter.check("m", 60).allowed
    now[0] = 10.0
    assert limiter.check("m", 30).allowed
    now[0] = 20.0
    verdict = limiter.check("m", 50)  # needs the first entry (t=0) gone: at t=60
    assert not verdict.allowed and verdict.retry_after_s == pytest.approx(40.0)
    assert limiter.check("m", 10).allowed  # still fits
    now[0] = 60.5
    assert limiter.check("m", 50).allowed
    assert limiter.check("other-model", 100).allowed  # windows are per model


def test_server_errors(start):
    url, client = start(error_rate=1.0)
    with pytest.raises(openai.APIStatusError) as info:
        chat(client, "hello")
    assert info.value.status_code in (500, 502, 503)
    with pytest.raises(openai.APIStatusError):
        client.embeddings.create(model="text-embedding-3-small", input="hello")
    s = stats(url)
    assert s["errors"]["5xx"] == 2 and s["chat"]["calls"] == 0 and s["embeddings"]["calls"] == 0


def _outcomes(client, n: int) -> list[str]:
    out = []
    for _ in range(n):
        try:
            chat(client, "retry me")
            out.append("ok")
        except openai.APIStatusError as exc:
            out.append(str(exc.status_code))
    return out


def test_faults_reproducible_and_retryable(start):
    url, client = start(error_rate=0.5, seed=3)
    _, twin = start(error_rate=0.5, seed=3)
    first = _outcomes(client, 30)
    assert "ok" in first and any(o != "ok" for o in first)  # a retry of the same body can succeed
    assert _outcomes(twin, 30) == first  # same seed, same requests: same faults
    httpx.post(url.removesuffix("/v1") + "/stats/reset")
    assert _outcomes(client, 30) == first  # reset forgets attempt numbers


def test_malformed_outputs(start):
    url, client = start(malformed_rate=1.0)
    broken = 0
    for i in range(6):
        answer = chat(client, extract_prompt(TEXT + f" Chunk {i}.")).choices[0].message.content
        with pytest.raises(ValueError):
            parse_records(answer)
        broken += 1
    report = chat(client, community_report.TEMPLATE.format(input_text="Scrooge and Marley")).choices[0].message
    with pytest.raises(ValueError):
        json.loads(report.content)
    s = stats(url)
    assert s["errors"]["malformed"] == broken + 1
    assert s["chat"]["calls"] == broken + 1  # malformed answers are still successful calls with usage
    plain = chat(client, "not an extraction").choices[0].message.content
    assert plain.startswith("This is a simulated answer")


def test_concurrent_requests_do_not_block():
    """32 requests wait out their latency at the same time: each simulated wait is held until all 32 are waiting,
    so a simulator that served one request at a time would never gather them (its waits give up after 30 s and
    the requests fail). No clock is read."""
    n, waiting, gathered = 32, [], asyncio.Event()  # the event binds to the server's loop at its first wait

    async def gate(_seconds: float) -> None:
        waiting.append(1)
        if len(waiting) >= n:
            gathered.set()
        await asyncio.wait_for(gathered.wait(), 30)

    url, stop = start_in_thread(SimConfig(port=0, latency_ms=200), sleep=gate)
    try:
        client = openai.OpenAI(base_url=url, api_key="sk-sim", max_retries=0, timeout=60)
        with ThreadPoolExecutor(max_workers=n) as pool:
            answers = list(pool.map(lambda i: chat(client, f"question {i}").choices[0].message.content, range(n)))
    finally:
        stop()
    assert len(waiting) == n and len(set(answers)) == n
