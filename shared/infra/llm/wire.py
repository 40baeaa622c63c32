"""Chat completions and embeddings sent with the ``openai`` client's own ``post``, bodies read as JSON.

``client.post(path, body=..., cast_to=<the SDK's httpx Response>)`` is how the SDK's README says to reach an
endpoint without one of its typed methods ("Undocumented endpoints"). The request is the client's: its base URL,
auth, default headers and timeouts, and a 4xx/5xx or a broken connection raises the same ``openai`` exception as
``chat.completions.create`` (``APIStatusError`` with its status and headers, ``APIConnectionError``...), so the
retry loop and the error classes of ``LLMClient`` are unchanged.

What it skips is CPU the typed methods spend on every call:

* ``chat.completions.create`` walks the request through ``maybe_transform``, recursive type introspection of
  every message, and builds a ``ChatCompletion`` model with the SDK's recursive ``construct``: together about
  as much CPU again as posting the same body;
* ``embeddings.create`` does the same for the inputs and builds an ``Embedding`` model per vector, which
  grows with the batch.

An ingestion makes hundreds of calls from worker threads that share one GIL, so that CPU is on its critical
path; a query makes one or two. The bodies sent are the ones the typed methods would send:
``messages``, ``model`` and the parameters as given (plain JSON already, which is all the transform would pass
through), ``stream_options.include_usage`` when streaming, and embeddings asked for as base64 and decoded to
float32 exactly as the SDK does (a server answering with a list of floats is read as such).
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import openai

from shared.infra.llm import stream


class Usage(NamedTuple):
    prompt_tokens: int
    completion_tokens: int


@cache
def sdk_http():
    """The HTTP library the openai SDK is built on (httpx, or its fork ``httpx2`` in recent SDKs): its own
    ``Limits``, transports and ``Response`` must be used with the SDK's client."""
    return importlib.import_module(openai.DefaultHttpxClient.__bases__[0].__module__.split(".")[0])


def usage_of(raw: Any) -> Usage | None:
    """The usage block of a response or of a stream's last chunk, or None when the server sent none (a count
    missing from a block that was sent reads 0)."""
    if not isinstance(raw, dict):
        return None
    return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))


def prompt_tokens_of(raw: Any) -> int | None:
    """An embedding response's prompt tokens, or None when the server did not count them (the caller then
    books its own count: a missing count is not 0 tokens)."""
    usage = usage_of(raw)
    return usage.prompt_tokens if usage is not None and "prompt_tokens" in raw else None


def chat(client: openai.OpenAI, body: dict) -> tuple[str, Usage | None]:
    """(answer text, usage) of one chat completion: ``POST /chat/completions`` with ``body``."""
    data = client.post("/chat/completions", body=body, cast_to=sdk_http().Response).json()
    choices = data.get("choices") or []
    message = (choices[0].get("message") or {}) if choices else {}
    return message.get("content") or "", usage_of(data.get("usage"))


def chat_stream(client: openai.OpenAI, body: dict, on_piece: Callable[[str], None]) -> Usage | None:
    """One streamed chat completion: each content piece to ``on_piece``; the usage of the last chunk returned."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    response = client.post("/chat/completions", body=body, cast_to=sdk_http().Response, stream=True)
    try:
        return usage_of(stream.read_chunks(stream.sse_data(response.iter_lines()), on_piece, response.request))
    finally:
        response.close()


def embed(client: openai.OpenAI, model: str, texts: list[str]) -> tuple[list[list[float]], int | None]:
    """(vectors in the order of ``texts``, prompt tokens or None) of ``POST /embeddings``."""
    body = {"model": model, "input": texts, "encoding_format": "base64"}
    data = client.post("/embeddings", body=body, cast_to=sdk_http().Response).json()
    rows = sorted(data.get("data") or [], key=lambda row: row.get("index", 0))
    vectors = [_vector(row.get("embedding")) for row in rows]
    return vectors, prompt_tokens_of(data.get("usage"))


def _vector(raw: Any) -> list[float]:
    if isinstance(raw, str):  # base64 of little-endian float32, as the SDK decodes it
        return np.frombuffer(base64.b64decode(raw), dtype="float32").tolist()
    return [float(x) for x in raw or ()]
