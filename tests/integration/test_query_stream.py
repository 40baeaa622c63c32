"""Streamed answers (``GET /v1/queries/{id}/events`` and ``POST /v1/queries`` with ``"stream": true``), read with a
real HTTP client from a live gateway, real workers and the LLM simulator: status first, the answer's tokens as the
worker's LLM call produces them and before the result, the map progress of a global query, the result equal to
``GET /v1/queries/{id}``, and an LLM call streamed books the same usage and cost as one that is not."""

from __future__ import annotations

import json

import httpx
import pytest

from shared.config import get_settings, reset_settings_cache
from shared.infra.jobs.store import JobStore
from shared.infra.llm import wire as llm_wire
from shared.infra.llm.client import LLMClient
from shared.infra.tenancy.usage import CallContext, UsageRecorder
from tests.gateway.e2e_corpus import SYNTHETIC
from tests.gateway.live import SAFETY_TIMEOUT_S

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tenant(live):
    api = live.new_tenant("stream")
    api.ingest_and_wait(*SYNTHETIC.values())
    return api


def read_events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a Server-Sent Events body, read as the server sends them."""
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
        elif not line and name:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    return events


def follow(api, query_id: str) -> tuple[httpx.Response, list[tuple[str, dict]]]:
    with api.http.stream("GET", f"/v1/queries/{query_id}/events", timeout=SAFETY_TIMEOUT_S) as r:
        return r, read_events(r) if r.status_code == 200 else []


def check_stream(api, query_id: str, events: list[tuple[str, dict]], llm: bool = True) -> dict:
    names = [name for name, _ in events]
    assert names[0] == "status" and names[-1] == "result" and names.count("result") == 1, names
    result = events[-1][1]
    assert result == api.get(f"/v1/queries/{query_id}").json()  # exactly the body of GET /v1/queries/{id}
    assert result["status"] == "succeeded", result
    statuses = [data for name, data in events if name == "status"]
    assert all(a != b for a, b in zip(statuses, statuses[1:], strict=False)), statuses  # only changes
    assert statuses[-1] == {"status": "succeeded", "stage": "done"}
    tokens = [data["text"] for name, data in events if name == "token"]
    if llm:
        assert result["answer_kind"] == "llm" and len(tokens) > 1, names
        assert "".join(tokens) == result["answer"]
    return result


def test_a_local_query_streams_its_answer_tokens_before_the_result(tenant, live):
    with live.slow_llm(2000):  # the answer is still being written when the client connects (it gets every token)
        r = tenant.submit_query(mode="local", query="Who is Velmora Thistlewick and whom does she trust?")
        assert r.status_code == 202, r.text
        query_id = r.json()["query_id"]
        response, events = follow(tenant, query_id)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    result = check_stream(tenant, query_id, events)
    assert result["usage"]["answer"]["calls"] == 1 and result["usage"]["answer"]["completion_tokens"] > 0
    assert result["total_usage"]["cost_usd"] > 0
    # a client that comes after the end gets the current status and the result at once
    _, late = follow(tenant, query_id)
    assert late == [("status", {"status": "succeeded", "stage": "done"}), ("result", result)]


def test_a_global_query_streams_map_progress_then_the_reduce_tokens(tenant):
    with tenant.http.stream("POST", "/v1/queries", timeout=SAFETY_TIMEOUT_S,
                            json={"mode": "global", "query": "What happens around Port Azurine?",
                                  "global_group_tokens": 300, "global_direct_answer": False,
                                  "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = read_events(r)
    name, accepted = events[0]
    assert name == "accepted" and accepted["location"] == f"/v1/queries/{accepted['query_id']}"
    assert r.headers["Location"] == accepted["location"]
    result = check_stream(tenant, accepted["query_id"], events[1:])
    groups = result["details"]["groups"]
    progress = [data for name, data in events if name == "map"]
    assert progress and all(p["total"] == groups for p in progress)
    assert progress[-1]["done"] == groups
    names = [name for name, _ in events]
    assert max(i for i, n in enumerate(names) if n == "map") < names.index("token")  # map, then reduce tokens
    assert result["usage"]["reduce"]["calls"] == 1 and result["usage"]["map"]["calls"] == groups


def test_a_streamed_submission_gets_every_token_however_fast_the_query(tenant):
    with tenant.http.stream("POST", "/v1/queries", timeout=SAFETY_TIMEOUT_S,
                            json={"mode": "hybrid", "query": "Who pays Oskarr Brandwhistle?", "stream": True}) as r:
        events = read_events(r)
    assert events[0][0] == "accepted"
    check_stream(tenant, events[0][1]["query_id"], events[1:])


def test_only_context_streams_no_tokens_and_unknown_queries_are_404(tenant, live):
    with tenant.http.stream("POST", "/v1/queries", timeout=SAFETY_TIMEOUT_S,
                            json={"mode": "naive", "query": "Who guards the Vault?", "only_need_context": True,
                                  "stream": True}) as r:
        events = read_events(r)
    assert [n for n, _ in events if n == "token"] == []
    check_stream(tenant, events[0][1]["query_id"], events[1:], llm=False)
    response, _ = follow(tenant, "qry-unknown")
    assert response.status_code == 404
    other = live.new_tenant("stream-other")
    assert follow(other, events[0][1]["query_id"])[0].status_code == 404  # another tenant's query


def test_a_streamed_llm_call_books_the_same_usage_and_cost(live, redis_server, monkeypatch):
    monkeypatch.setenv("GRAPHFLEET_LLM_BASE_URL", live.sim_url)
    monkeypatch.setenv("GRAPHFLEET_LLM_API_KEY", "sk-test")
    reset_settings_cache()
    client = LLMClient(get_settings(), live.redis, UsageRecorder(live.redis))
    messages = [{"role": "system", "content": "Answer in a few sentences."},
                {"role": "user", "content": "Who charted the Glimmering Shoals?"}]
    reported: list = []  # the usage the LLM itself reported in each response (the stream's last chunk)
    chat, chat_stream = llm_wire.chat, llm_wire.chat_stream

    def spy(sdk, body):
        text, usage = chat(sdk, body)
        reported.append(usage)
        return text, usage

    def stream_spy(sdk, body, on_piece):
        reported.append(chat_stream(sdk, body, on_piece))
        return reported[-1]

    monkeypatch.setattr(llm_wire, "chat", spy)
    monkeypatch.setattr(llm_wire, "chat_stream", stream_spy)
    pieces: list[str] = []
    plain = client.chat(messages, CallContext(tenant="streamusage", stage="answer", job_id="plain"), use_cache=False)
    streamed = client.chat(messages, CallContext(tenant="streamusage", stage="answer", job_id="streamed"),
                           use_cache=False, on_token=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == streamed.text == plain.text
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (plain.prompt_tokens, plain.completion_tokens)
    assert reported[0] is not None and reported[1] is not None, "a response reported no usage"
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (reported[1].prompt_tokens,
                                                                    reported[1].completion_tokens)
    jobs = JobStore(live.redis, "streamusage")
    booked = [jobs.usage(job_id) for job_id in ("plain", "streamed")]
    assert booked[0]["calls"] == booked[1]["calls"] == 1
    for field in ("prompt_tokens", "completion_tokens", "cost_usd"):
        assert booked[0][field] == booked[1][field] > 0, field
    reset_settings_cache()


def check_order(events: list[tuple[str, dict]]) -> None:
    """The documented order: ``accepted``? -> ``status``... -> every ``map``/``token`` -> final ``status`` ->
    ``result``; the status just before the first ``map``/``token`` is ``running``."""
    names = [name for name, _ in events]
    final = max(i for i, n in enumerate(names) if n == "status")
    assert events[final][1]["status"] in ("succeeded", "failed", "canceled") and names[final + 1:] == ["result"], names
    published = [i for i, n in enumerate(names) if n in ("map", "token")]
    assert all(i < final for i in published), names  # no token after the final status
    if published:
        before = [data for name, data in events[:published[0]] if name == "status"]
        assert before and before[-1]["status"] == "running", (before, names)


@pytest.fixture
def slow_tokens(live):
    """Answers written token by token over time (20 ms a token), so a second stream opens mid-answer."""
    before = live.sim_config.ms_per_completion_token
    live.sim_config.ms_per_completion_token = 20.0
    try:
        yield
    finally:
        live.sim_config.ms_per_completion_token = before


@pytest.mark.parametrize("body", [
    {"mode": "local", "query": "Who is Velmora Thistlewick and whom does she trust?"},
    {"mode": "global", "query": "What happens around Port Azurine?", "global_group_tokens": 300,
     "global_direct_answer": False},
], ids=["local", "global"])
def test_every_token_comes_before_the_final_status(tenant, body):
    for attempt in range(8):  # fresh answers each time (the LLM cache is keyed by the question); tokens at full speed
        fields = {**body, "query": f"{body['query']} ({attempt})", "stream": True}
        with tenant.http.stream("POST", "/v1/queries", timeout=SAFETY_TIMEOUT_S, json=fields) as r:
            events = read_events(r)
        assert events[0][0] == "accepted"
        check_order(events[1:])
        check_stream(tenant, events[0][1]["query_id"], events[1:])


def test_a_stream_opened_mid_answer_replays_in_order(tenant, live, slow_tokens):
    with tenant.http.stream("POST", "/v1/queries", timeout=SAFETY_TIMEOUT_S, json={
            "mode": "local", "query": "Whom does Velmora Thistlewick trust most?", "stream": True}) as r:
        lines = r.iter_lines()
        query_id = json.loads(next(line for line in lines if line.startswith("data: "))[6:])["query_id"]
        next(line for line in lines if line == "event: token")  # the first token, then a second stream
        _, late = follow(tenant, query_id)
    check_order(late)
    check_stream(tenant, query_id, late)
