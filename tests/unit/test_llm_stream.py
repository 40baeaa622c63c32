"""Streamed answers read as plain JSON events (``shared.infra.llm.stream``): the same text and usage as the
SDK's non-streamed call, server-sent-event framing as the standard defines it, an error event raised as the
SDK raises it."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.config import Settings
from shared.infra.llm.client import LLMClient, LLMError
from shared.infra.llm.stream import read_chunks, sse_data
from shared.infra.tenancy.usage import CallContext, UsageRecorder


@pytest.fixture()
def sim_url():
    url, stop = start_in_thread(SimConfig(port=0, seed=3))
    yield url
    stop()


def _client(url, redis_client, **llm):
    settings = Settings(llm_base_url=url, llm_api_key="sk-x", llm={"backoff_base_s": 0.01, "cache_enabled": False,
                                                                   **llm})
    records = []
    return LLMClient(settings, redis_client, UsageRecorder(redis_client, listeners=[records.append])), records


def test_a_streamed_answer_has_the_plain_answers_text_and_the_servers_usage(sim_url, redis_client, tenant):
    client, records = _client(sim_url, redis_client)
    context = "\n".join(f"Scrooge met the ghost number {i} of Marley in room {i * 7} at night." for i in range(40))
    msgs = [{"role": "system", "content": f"Answer from the data.\n{context}"},
            {"role": "user", "content": "Which ghosts did Scrooge meet, and where?"}]
    plain = client.chat(msgs, CallContext(tenant=tenant, stage="answer"))
    pieces: list[str] = []
    streamed = client.chat(msgs, CallContext(tenant=tenant, stage="answer"), on_token=pieces.append)
    assert len(pieces) > 3 and "".join(pieces) == streamed.text == plain.text
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (plain.prompt_tokens, plain.completion_tokens)
    stats = httpx.get(sim_url.removesuffix("/v1") + "/stats").json()["chat"]
    assert stats["prompt_tokens"] == 2 * plain.prompt_tokens  # the usage booked is the server's own count
    assert [r.completion_tokens for r in records] == [plain.completion_tokens] * 2


def test_server_sent_events_are_framed_as_the_standard_says():
    lines = [": a comment", "event: message", "data: {\"a\":", "data:1}", "", "", "data:[DONE]", "", "data: tail"]
    assert list(sse_data(lines)) == ['{"a":\n1}', "[DONE]", "tail"]
    got: list[str] = []
    usage = read_chunks(['{"choices":[{"delta":{"content":"Hi"}}]}', '{"choices":[{"delta":{}}]}',
                         '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}',
                         "[DONE]", '{"choices":[{"delta":{"content":"after done"}}]}'], got.append)
    assert got == ["Hi"] and (usage["prompt_tokens"], usage["completion_tokens"]) == (3, 1)


def test_an_error_event_mid_stream_fails_the_call_without_a_retry_that_would_repeat_pieces(redis_client, tenant):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in (
            {"choices": [{"index": 0, "delta": {"content": "Half an"}}]},
            {"error": {"message": "the model went away", "type": "server_error"}})) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    client, records = _client("http://llm.invalid/v1", redis_client, max_retries=3)
    client._client = openai.OpenAI(base_url="http://llm.invalid/v1", api_key="k", max_retries=0,
                                   http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    pieces: list[str] = []
    with pytest.raises(LLMError, match="the model went away"):
        client.chat([{"role": "user", "content": "hi"}], CallContext(tenant=tenant, stage="answer"),
                    on_token=pieces.append)
    assert pieces == ["Half an"] and len(calls) == 1  # a retry would pass "Half an" on twice
    assert [r.error for r in records] == ["APIError"]
