"""A streamed chat completion read as plain JSON events.

The request goes through the ``openai`` client (``shared.infra.llm.wire.chat_stream``: its auth, headers,
timeouts and status errors, so a 429 or a 5xx raises the same ``openai`` exception as any call), but its body is
read here instead of through the SDK's ``Stream``. The SDK builds a ``ChatCompletionChunk`` model per event with
its recursive pure-Python ``construct``, a noticeable share of a query worker's CPU per local answer since a
real model streams a chunk per token. Each event here is one ``json.loads``.

Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html): ``data:`` lines
(one optional space after the colon) accumulate until a blank line ends the event; ``[DONE]`` ends the
stream; an event carrying ``error`` raises ``openai.APIError``, as the SDK's ``Stream`` does.

Why the ~20 lines of SSE framing are written here: the SDK's own decoder (``openai._streaming.SSEDecoder``) is
private API that may change in any release, and ``httpx-sse`` reads an ``httpx.Response``, while the body here
comes from the SDK's raw response, whose line iterator is all that is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

import openai


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each server-sent event in ``lines`` (decoded lines without their line ends)."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def read_chunks(events: Iterable[str], on_piece: Callable[[str], None], request=None) -> dict | None:
    """Pass each content piece of a chat-completion stream to ``on_piece``; the usage its last chunk carries
    (``stream_options.include_usage``, as sent), or None."""
    usage = None
    for data in events:
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("error"):
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            raise openai.APIError(message or "error in the completion stream", request, body=err)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                on_piece(piece)
    return usage

