"""The OpenAI SDK's own first-use work (request options, headers, status handling, response models), done in memory
before a worker's first call (``workers.celery_app``): what a process's first extraction, summary, report or query
call would otherwise pay."""

from __future__ import annotations

import json
import logging

from shared.infra.llm import wire

log = logging.getLogger(__name__)

_COMPLETION = {"id": "warm", "object": "chat.completion", "created": 0, "model": "warm",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
_CHUNKS = [{"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "warm",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
           {"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "warm", "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}]
_EMBEDDING = {"object": "list", "model": "warm", "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}],
              "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def warm_openai_sdk() -> None:
    """One chat completion (plain, and streamed) and one embedding sent as ``LLMClient`` sends them
    (``shared.infra.llm.wire``) through the SDK against an in-memory transport: the SDK builds its request
    options, headers and status handling on first use (CPU at a process's first query); these caches are the
    SDK's, shared by every client of the process. No request leaves the process, nothing is booked. Best
    effort."""
    try:
        import openai

        http = wire.sdk_http()

        def answer(request):
            body = json.loads(request.content or b"{}")
            if request.url.path.endswith("/embeddings"):
                return http.Response(200, json=_EMBEDDING)
            if body.get("stream"):
                events = "".join(f"data: {json.dumps(c)}\n\n" for c in _CHUNKS) + "data: [DONE]\n\n"
                return http.Response(200, content=events.encode(), headers={"content-type": "text/event-stream"})
            return http.Response(200, json=_COMPLETION)

        client = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm", max_retries=0,
                               http_client=openai.DefaultHttpxClient(transport=http.MockTransport(answer)))
        messages = [{"role": "user", "content": "warm"}]
        body = {"model": "warm", "messages": messages, "temperature": 0.0}
        wire.chat(client, body)
        wire.chat_stream(client, body, lambda _piece: None)
        wire.embed(client, "warm", ["warm"])
    except Exception:  # noqa: BLE001 - the first query builds them instead
        log.warning("OpenAI SDK warm-up failed", exc_info=True)
