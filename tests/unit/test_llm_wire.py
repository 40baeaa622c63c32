"""Requests sent with the openai client's ``post`` (``shared.infra.llm.wire``): the same request the SDK's typed
methods send, answers read as the typed methods read them, and the SDK's own errors."""

from __future__ import annotations

import base64
import json

import numpy as np
import openai
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.infra.llm import wire

http = wire.sdk_http()
VECTORS = np.array([[0.25, -1.5, 3.0], [1e-3, 2.0, -0.125]], dtype="float32")


def _answer(request):
    body = json.loads(request.content)
    if request.url.path.endswith("/embeddings"):
        data = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(v.tobytes()).decode() if body.get("encoding_format") == "base64"
                               else v.tolist())} for i, v in reversed(list(enumerate(VECTORS)))]
        return http.Response(200, json={"object": "list", "model": body["model"], "data": data,
                                        "usage": {"prompt_tokens": 7, "total_tokens": 7}})
    return http.Response(200, json={
        "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Marley."}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}})


def _client(sent: list):
    def handler(request):
        sent.append(request)
        return _answer(request)

    return openai.OpenAI(base_url="http://llm.invalid/v1", api_key="sk-k", max_retries=0, timeout=17,
                         http_client=openai.DefaultHttpxClient(transport=http.MockTransport(handler)))


def _same_request(a, b) -> None:
    assert (a.method, str(a.url)) == (b.method, str(b.url))
    assert json.loads(a.content) == json.loads(b.content)
    assert dict(a.headers) == dict(b.headers)
    assert a.extensions.get("timeout") == b.extensions.get("timeout")  # the client's own timeouts


def test_a_chat_completion_sends_what_the_sdk_sends_and_reads_the_same_text_and_usage():
    sent: list = []
    client = _client(sent)
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Who was dead?"},
                {"role": "assistant", "content": "Marley."}, {"role": "user", "content": "Again?"}]
    typed = client.chat.completions.create(model="m", messages=messages, temperature=0.0, max_tokens=50)
    text, usage = wire.chat(client, {"model": "m", "messages": messages, "temperature": 0.0, "max_tokens": 50})
    _same_request(sent[0], sent[1])
    assert text == typed.choices[0].message.content == "Marley."
    assert usage == (typed.usage.prompt_tokens, typed.usage.completion_tokens) == (11, 2)


def test_embeddings_are_asked_as_base64_like_the_sdk_and_decoded_to_the_same_floats_in_input_order():
    sent: list = []
    client = _client(sent)
    typed = client.embeddings.create(model="e", input=["a", "b"])
    vectors, tokens = wire.embed(client, "e", ["a", "b"])
    _same_request(sent[0], sent[1])
    assert json.loads(sent[1].content)["encoding_format"] == "base64"
    assert vectors == [d.embedding for d in sorted(typed.data, key=lambda d: d.index)] == VECTORS.tolist()
    assert tokens == typed.usage.prompt_tokens == 7


def test_a_server_that_answers_embeddings_as_floats_is_read_as_such():
    def handler(request):
        body = {**json.loads(request.content)}
        body.pop("encoding_format")
        return _answer(http.Request("POST", request.url, json=body))

    client = openai.OpenAI(base_url="http://llm.invalid/v1", api_key="k", max_retries=0,
                           http_client=openai.DefaultHttpxClient(transport=http.MockTransport(handler)))
    vectors, tokens = wire.embed(client, "e", ["a", "b"])
    assert vectors == VECTORS.tolist() and tokens == 7


def test_status_errors_are_the_sdks_own_exceptions_with_status_and_headers():
    def handler(request):
        return http.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow down"}})

    client = openai.OpenAI(base_url="http://llm.invalid/v1", api_key="k", max_retries=0,
                           http_client=openai.DefaultHttpxClient(transport=http.MockTransport(handler)))
    with pytest.raises(openai.RateLimitError) as caught:
        wire.chat(client, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert caught.value.status_code == 429 and caught.value.response.headers["retry-after"] == "2"
    with pytest.raises(openai.RateLimitError):
        wire.chat_stream(client, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, print)
    with pytest.raises(openai.RateLimitError):
        wire.embed(client, "e", ["a"])


def test_against_the_simulator_the_plain_and_streamed_answers_and_embeddings_match_the_typed_calls():
    url, stop = start_in_thread(SimConfig(port=0, seed=5))
    try:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "Tell me about Scrooge and Marley and the counting-house."}]
        typed = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0.0)
        body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.0}
        text, usage = wire.chat(client, body)
        pieces: list[str] = []
        streamed_usage = wire.chat_stream(client, body, pieces.append)
        assert text == "".join(pieces) == typed.choices[0].message.content and len(pieces) > 1
        assert usage == streamed_usage == (typed.usage.prompt_tokens, typed.usage.completion_tokens)
        texts = ["Scrooge", "Marley's ghost", "the counting-house"]
        vectors, _ = wire.embed(client, "text-embedding-3-small", texts)
        typed_vectors = client.embeddings.create(model="text-embedding-3-small", input=texts).data
        assert vectors == [d.embedding for d in typed_vectors]
    finally:
        stop()


def test_a_missing_count_reads_0_in_a_chat_usage_but_none_in_an_embedding_usage():
    assert wire.usage_of({"prompt_tokens": 5}) == wire.Usage(5, 0)
    assert wire.usage_of(None) is None and wire.usage_of("12") is None
    assert wire.prompt_tokens_of({"prompt_tokens": 7, "total_tokens": 7}) == 7
    assert wire.prompt_tokens_of({"total_tokens": 7}) is None  # not counted: the caller books its own count
    assert wire.prompt_tokens_of(None) is None
