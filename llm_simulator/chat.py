"""One chat completion: classify, answer, optionally break, count tokens; and its OpenAI shapes."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from shared.domain.tokens import count_tokens, truncate_text

from .malformed import BREAKABLE, malform
from .responders import Conversation, classify, respond

PER_MESSAGE_TOKENS = 4  # fixed overhead per message, the same as the project's own estimate
DEFAULT_MODEL = "gpt-4o-mini"
_PIECE = re.compile(r"\S+\s*|\s+")


@dataclass
class ChatResult:
    kind: str
    model: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    malformed: bool

    def usage(self) -> dict:
        total = self.prompt_tokens + self.completion_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": total}

    def completion(self, rid: str) -> dict:
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": "fp_llm_simulator",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(),
        }


def prompt_tokens(conv: Conversation, model: str) -> int:
    return sum(count_tokens(text, model) + PER_MESSAGE_TOKENS for _, text in conv.messages)


def compute_chat(body: dict, malformed: bool, fault_key: str) -> ChatResult:
    """Everything CPU-bound about a chat request (run off the event loop)."""
    model = str(body.get("model") or DEFAULT_MODEL)
    conv = Conversation.from_request(body["messages"])
    kind = classify(conv)
    fmt = body.get("response_format") or {}
    json_mode = isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")
    text = respond(kind, conv, model, json_mode)
    broken = malformed and kind in BREAKABLE
    if broken:
        text = malform(kind, text, fault_key)
    finish = "stop"
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and limit > 0 and count_tokens(text, model) > limit:
        text = truncate_text(text, limit, model)
        finish = "length"
    return ChatResult(kind, model, text, prompt_tokens(conv, model), count_tokens(text, model), finish, broken)


def _chunk(rid: str, created: int, model: str, delta: dict, finish: str | None, usage: bool) -> str:
    payload: dict = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": "fp_llm_simulator",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage:
        payload["usage"] = None
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


async def stream_events(result: ChatResult, rid: str, include_usage: bool, generation_s: float = 0.0,
                        sleep: Callable[[float], Awaitable[None]] | None = None) -> AsyncIterator[str]:
    """SSE: a role chunk, content chunks of a few words, a finish chunk, the usage chunk, ``[DONE]``.
    ``generation_s`` is spread evenly over the content chunks (each waits its share before it is sent)."""
    created = int(time.time())
    yield _chunk(rid, created, result.model, {"role": "assistant", "content": ""}, None, include_usage)
    pieces = _PIECE.findall(result.text)
    starts = range(0, len(pieces), 4)
    share = generation_s / len(starts) if starts and generation_s > 0 and sleep is not None else 0.0
    for i in starts:
        if share:
            await sleep(share)
        yield _chunk(rid, created, result.model, {"content": "".join(pieces[i : i + 4])}, None, include_usage)
    yield _chunk(rid, created, result.model, {}, result.finish_reason, include_usage)
    if include_usage:
        final = {
            "id": rid, "object": "chat.completion.chunk", "created": created, "model": result.model,
            "system_fingerprint": "fp_llm_simulator", "choices": [], "usage": result.usage(),
        }
        yield f"data: {json.dumps(final, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"
