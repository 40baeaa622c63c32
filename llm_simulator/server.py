"""The simulator's ASGI app (OpenAI-compatible endpoints plus ``/stats``) and ways to serve it."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from shared.domain.tokens import count_tokens, get_encoding

from . import embeddings
from .chat import ChatResult, compute_chat, stream_events
from .config import SimConfig
from .faults import FaultPlan, RateLimiter, body_digest, retry_headers
from .stats import Stats

log = logging.getLogger(__name__)
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "text-embedding-3-small", "text-embedding-3-large")
_ERROR_TEXT = {500: "Internal server error", 502: "Bad gateway", 503: "Service unavailable"}


def error_response(status: int, message: str, etype: str, code: str | None = None, headers=None) -> JSONResponse:
    body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


Sleep = Callable[[float], Awaitable[None]]


class Simulator:
    def __init__(self, config: SimConfig, sleep: Sleep = asyncio.sleep):
        self.config = config
        self.sleep = sleep  # every simulated wait goes through it (tests record the waits instead of waiting)
        self.stats = Stats()
        self.faults = FaultPlan(config.seed, config.error_rate, config.malformed_rate)
        self.limiter = RateLimiter(config.rate_limit_tpm, config.rate_limit_rpm)
        self.vectors = embeddings.Embeddings(config.embeddings)  # the local model loads here, once per process

    async def _body(self, request: Request) -> dict | Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "invalid_request_error")
        return body

    async def _admit(self, body: dict) -> tuple[str, int, Response | None]:
        """Latency, then an injected server error or not: (digest, attempt, error response)."""
        digest = body_digest(body)
        attempt = self.faults.attempt(digest)
        if self.config.latency_ms > 0:
            await self.sleep(self.config.latency_ms / 1000.0)
        status = self.faults.server_error(digest, attempt)
        if status is None:
            return digest, attempt, None
        self.stats.error("5xx")
        return digest, attempt, error_response(status, f"{_ERROR_TEXT[status]} (simulated)", "server_error")

    def _rate_limited(self, model: str, tokens: int) -> Response | None:
        verdict = self.limiter.check(model, tokens)
        if verdict.allowed:
            return None
        self.stats.error("429")
        headers = retry_headers(verdict.retry_after_s)
        headers[f"x-ratelimit-limit-{verdict.kind}"] = str(verdict.limit)
        headers[f"x-ratelimit-remaining-{verdict.kind}"] = str(verdict.remaining)
        headers[f"x-ratelimit-reset-{verdict.kind}"] = f"{verdict.retry_after_s:.3f}s"
        message = (
            f"Rate limit reached for {model} on {verdict.kind} per min: limit {verdict.limit}. "
            f"Please try again in {verdict.retry_after_s:.3f}s. (simulated)"
        )
        return error_response(429, message, "requests" if verdict.kind == "requests" else "tokens",
                              "rate_limit_exceeded", headers)

    async def chat_completions(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return error_response(400, "'messages' must be a non-empty list of objects", "invalid_request_error")
        digest, attempt, failure = await self._admit(body)
        if failure is not None:
            return failure
        malformed = self.faults.malformed(digest, attempt)
        try:
            result: ChatResult = await asyncio.to_thread(
                compute_chat, body, malformed, f"{self.config.seed}|{digest}|{attempt}"
            )
        except Exception:  # noqa: BLE001 - a simulator bug must not kill the server
            log.exception("simulator failed to answer a chat request")
            self.stats.error("5xx")
            return error_response(500, "simulator internal error", "server_error")
        limited = self._rate_limited(result.model, result.prompt_tokens + result.completion_tokens)
        if limited is not None:
            return limited
        self.stats.chat(result.kind, result.prompt_tokens, result.completion_tokens, result.malformed)
        rid = f"chatcmpl-{digest[:20]}{attempt:04d}"
        generation_s = self.config.completion_delay_s(result.completion_tokens)
        if body.get("stream"):  # the generation time is spread over the content chunks
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = stream_events(result, rid, include_usage, generation_s, self.sleep)
            return StreamingResponse(events, media_type="text/event-stream")
        if generation_s > 0:
            await self.sleep(generation_s)
        return JSONResponse(result.completion(rid), headers={"x-simulator-type": result.kind})

    async def embeddings(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        model = str(body.get("model") or "text-embedding-3-small")
        texts, counts = _embedding_inputs(body.get("input"), model)
        if texts is None:
            return error_response(400, "'input' must be a string, a list of strings or token arrays",
                                  "invalid_request_error")
        dim = body.get("dimensions")
        dim = self.config.embedding_dim if dim is None else dim
        most = self.vectors.max_dim
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1 or (most is not None and dim > most):
            limit = f" from 1 to {most}" if most is not None else " >= 1"
            return error_response(400, f"'dimensions' must be an integer{limit}, got {dim!r}", "invalid_request_error")
        digest, attempt, failure = await self._admit(body)
        if failure is not None:
            return failure
        tokens = sum(counts) if counts is not None else sum(count_tokens(t, model) for t in texts)
        limited = self._rate_limited(model, tokens)
        if limited is not None:
            return limited
        vectors = await asyncio.to_thread(self.vectors.embed, texts, dim)
        self.stats.embeddings(len(texts), tokens)
        fmt = body.get("encoding_format")
        data = [
            {"object": "embedding", "index": i, "embedding": embeddings.encode(v, fmt)} for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})

    async def models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "llm-simulator"} for m in MODELS]
        return JSONResponse({"object": "list", "data": data})

    async def get_stats(self, request: Request) -> Response:
        return JSONResponse(self.stats.snapshot())

    async def reset_stats(self, request: Request) -> Response:
        """Zero the counters and forget attempt numbers and rate windows (a fresh, reproducible run)."""
        self.stats.reset()
        self.faults.reset()
        self.limiter.reset()
        return JSONResponse({"ok": True})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})


def _embedding_inputs(raw, model: str) -> tuple[list[str] | None, list[int] | None]:
    """(texts, token counts when the input came as token arrays, else None)."""
    if isinstance(raw, str):
        return [raw], None
    if not isinstance(raw, list) or not raw:
        return None, None
    if all(isinstance(x, str) for x in raw):
        return raw, None
    arrays = [raw] if all(isinstance(x, int) for x in raw) else raw
    if not all(isinstance(a, list) and all(isinstance(x, int) for x in a) for a in arrays):
        return None, None
    enc = get_encoding(model)
    return [enc.decode(a) for a in arrays], [len(a) for a in arrays]


def create_app(config: SimConfig, sleep: Sleep = asyncio.sleep) -> Starlette:
    sim = Simulator(config, sleep)
    routes = [
        Route("/v1/chat/completions", sim.chat_completions, methods=["POST"]),
        Route("/v1/embeddings", sim.embeddings, methods=["POST"]),
        Route("/v1/models", sim.models, methods=["GET"]),
        Route("/stats", sim.get_stats, methods=["GET"]),
        Route("/stats/reset", sim.reset_stats, methods=["POST"]),
        Route("/health", sim.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.simulator = sim
    return app


def run(config: SimConfig) -> None:
    """Serve until interrupted."""
    get_encoding(None)  # load the tokenizer before the first request
    anyio.run(anyio.sleep, 0)  # imports anyio's asyncio backend now, not in the first streamed answer
    app = create_app(config)  # loads the embedding model before the first request
    print(f"LLM simulator listening on http://{config.host}:{config.port}/v1", flush=True)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level, access_log=False,
                lifespan="off")


def start_in_thread(config: SimConfig, timeout_s: float = 10.0, sleep: Sleep = asyncio.sleep
                    ) -> tuple[str, Callable[[], None]]:
    """Serve in a background thread; returns (base URL ending in ``/v1``, stop function).

    ``config.port == 0`` picks a free port; ``sleep`` replaces ``asyncio.sleep`` for the simulated waits.
    """
    get_encoding(None)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit this; without it small responses wait for the client's delayed ACK (Nagle)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((config.host, config.port))
    port = sock.getsockname()[1]
    uv_config = uvicorn.Config(create_app(config, sleep), log_level=config.log_level, access_log=False, lifespan="off")
    server = uvicorn.Server(uv_config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"llm-simulator-{port}",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError("LLM simulator did not start")
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout_s)
        sock.close()

    return f"http://{config.host}:{port}/v1", stop
