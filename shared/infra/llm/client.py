"""The one way graphfleet talks to an LLM: the ``openai`` client, a tenant-scoped cache, the
global rate limit, retries that honour Retry-After, and one usage record per call.

This loop is the only retry layer: the openai client's own retries are disabled
(``max_retries=0``) and no Celery task retries an LLM failure (tasks record it instead), so
attempts never multiply. A 429 also sets the shared cool-down so every worker backs off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import openai

from shared.domain.models import UsageRecord
from shared.domain.pricing import cost_usd
from shared.domain.tokens import count_tokens, estimate_tokens
from shared.infra.llm import wire
from shared.infra.llm.ratelimit import CompletionEstimate, RateLimitTimeout
from shared.infra.redis.keys import Keys
from shared.infra.redis.text_codec import pack_text, unpack_bytes
from shared.infra.tenancy.usage import CallContext, UsageRecorder

log = logging.getLogger(__name__)


class RateLimiter(Protocol):
    """A budget shared by every caller (``shared.infra.llm.ratelimit.RedisRateLimiter``).

    ``acquire`` blocks until ``tokens`` fit (raising after its own maximum wait) and returns an
    opaque reservation; ``reconcile`` replaces it by the tokens actually used (0 releases it);
    ``cooldown`` makes every caller of ``model`` wait ``seconds`` (set on a 429).
    """

    def acquire(self, model: str, tokens: int, tenant: str | None = None) -> Any: ...
    def reconcile(self, reservation: Any, actual: int) -> None: ...
    def cooldown(self, model: str, seconds: float) -> None: ...


class NoLimiter:
    def acquire(self, model: str, tokens: int, tenant: str | None = None) -> None:
        return None

    def reconcile(self, reservation: Any, actual: int) -> None:
        return None

    def cooldown(self, model: str, seconds: float) -> None:
        return None


class LLMError(RuntimeError):
    """An LLM call failed after all retries; ``cause`` is a short machine-readable reason."""

    def __init__(self, cause: str, message: str):
        super().__init__(f"{cause}: {message}")
        self.cause = cause


class LLMUnavailable(LLMError):
    """The endpoint stayed unreachable (connection error, timeout, 5xx, 429) through every retry of a call, while
    ``llm.outage_wait_s`` lets a job wait for it: the provider is down, the request is not at fault."""


class CanceledError(RuntimeError):
    """Raised between LLM calls when the job was canceled."""


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cache_hit: bool
    latency_s: float
    model: str


def cache_digest(model: str, messages: list[dict], params: dict) -> str:
    """The cache key's digest: model, parameters and each message's fields as JSON, with a text content in its
    place by its length, then the texts' bytes (unambiguous: the lengths split them). A 30,000-token prompt is
    not JSON-escaped a second time (the SDK escapes it for the request), which was most of the digest's cost."""
    shape = [{k: len(v) if k == "content" and isinstance(v, str) else v for k, v in m.items()} for m in messages]
    digest = hashlib.sha256(json.dumps({"m": model, "msgs": shape, "p": params}, sort_keys=True).encode())
    for m in messages:
        if isinstance(m.get("content"), str):
            digest.update(m["content"].encode())
    return digest.hexdigest()


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _gave_up(settings, cause: str, retryable: bool, exc: Exception) -> LLMError:
    """The error of a call that failed for good: ``LLMUnavailable`` when the endpoint is what failed (a retryable
    cause: the retries ran out) and jobs may wait for it, else ``LLMError``."""
    kind = LLMUnavailable if retryable and settings.llm.outage_wait_s > 0 else LLMError
    return kind(cause, str(exc)[:300])


def _classify(exc: Exception) -> tuple[str, bool]:
    """(cause, retryable)"""
    if isinstance(exc, openai.RateLimitError):
        return "rate_limited", True
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection", True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500 or exc.status_code in (408, 409):
            return f"http_{exc.status_code}", True
        return f"http_{exc.status_code}", False
    return type(exc).__name__, False


class LLMClient:
    def __init__(
        self,
        settings,
        redis,
        recorder: UsageRecorder,
        limiter: RateLimiter | None = None,
        cancel_check=None,
    ):
        self.settings = settings
        self.redis = redis
        self.recorder = recorder
        self.limiter = limiter or NoLimiter()
        self.cancel_check = cancel_check
        self.completions = CompletionEstimate()
        self._client = openai.OpenAI(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            max_retries=0,
            timeout=settings.llm.timeout_s,
            http_client=openai.DefaultHttpxClient(limits=wire.sdk_http().Limits(
                max_connections=1000, max_keepalive_connections=100, keepalive_expiry=settings.llm.keepalive_s)),
        )

    @property
    def enabled(self) -> bool:
        return self.settings.llm_enabled

    def preconnect(self, timeout_s: float = 2.0) -> bool:
        """Open a keep-alive connection to the API before a query needs one, so the first query does not pay
        the TCP and TLS set-up (several network round trips to a hosted API): ``GET /models``, which spends no
        tokens and is not booked. True when the server answered (any HTTP status leaves the connection open),
        False when not."""
        try:
            self._client.with_options(timeout=timeout_s, max_retries=0).models.list()
        except openai.APIStatusError:
            return True  # 401, 404...: it answered over a connection that stays in the pool
        except Exception:  # noqa: BLE001 - unreachable: the first call connects (and reports) instead
            return False
        return True

    # ---------------------------------------------------------------- chat
    def chat(
        self,
        messages: list[dict],
        ctx: CallContext,
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
        use_cache: bool = True,
        on_token: Callable[[str], None] | None = None,
    ) -> ChatResult:
        """One chat completion. With ``on_token`` the completion is streamed and each piece of text is passed
        to it as it arrives (a cache hit passes the whole text once); usage, cost, latency, the cache and the
        retries are the same as without (the usage comes from the stream's last chunk)."""
        model = model or self.settings.llm_model
        params: dict[str, Any] = {"temperature": self.settings.llm.temperature}
        if max_tokens:
            params["max_tokens"] = max_tokens
        if json_mode:
            params["response_format"] = {"type": "json_object"}
        use_cache = use_cache and self.settings.llm.cache_enabled
        key = Keys(ctx.tenant).llm_cache(cache_digest(model, messages, params)) if use_cache else None
        if key:
            cached = self.redis.get(key)
            if cached:
                data = json.loads(unpack_bytes(cached))
                self.recorder.record(
                    UsageRecord(
                        tenant=ctx.tenant, job_id=ctx.job_id, stage=ctx.stage, model=model,
                        cache_hit=True, queue=ctx.queue, tier=ctx.tier, kind="chat",
                    )
                )
                if on_token is not None and data["text"]:
                    on_token(data["text"])
                return ChatResult(data["text"], 0, 0, True, 0.0, model)
        if self.cancel_check and self.cancel_check():
            raise CanceledError("job canceled")
        return self._call_with_retries(messages, ctx, model, params, on_token, cache_key=key)

    def _cache_write(self, key: str | None, text: str, p_tok: int, c_tok: int) -> Callable[[Any], None] | None:
        """The answer's cache entry, written in the pipeline that books its usage (one round trip for both)."""
        if not key:
            return None
        entry = pack_text(json.dumps({"text": text, "p": p_tok, "c": c_tok}, ensure_ascii=False))  # deflated when long
        ttl = self.settings.llm.cache_ttl_s
        return lambda pipe: pipe.set(key, entry, ex=ttl)

    def _complete(self, messages, model: str, params: dict, on_token, streamed: list[str]) -> tuple[str, Any]:
        """(text, usage) of one attempt; streamed: every piece goes to ``on_token`` and to ``streamed``."""
        body = {"model": model, "messages": messages, **params}
        if on_token is None:
            return wire.chat(self._client, body)

        def piece(text: str) -> None:
            streamed.append(text)
            on_token(text)

        usage = wire.chat_stream(self._client, body, piece)
        return "".join(streamed), usage

    def _call_with_retries(self, messages, ctx: CallContext, model: str, params: dict,
                           on_token: Callable[[str], None] | None = None, cache_key: str | None = None) -> ChatResult:
        cfg = self.settings.llm
        estimate = sum(estimate_tokens(m.get("content") or "", model) + 4 for m in messages)
        reserve = estimate + self.completions.reserve(model, ctx.stage, estimate, params.get("max_tokens"))
        attempt = 0
        while True:
            reservation = self._acquire(model, reserve, ctx.tenant)
            started, streamed = time.perf_counter(), []
            try:
                text, usage = self._complete(messages, model, params, on_token, streamed)
            except Exception as exc:  # noqa: BLE001 - classified below
                latency = time.perf_counter() - started
                self.limiter.reconcile(reservation, 0)
                cause, retryable = _classify(exc)
                retryable = retryable and not streamed  # a retry would repeat the pieces already passed on
                wait = self._after_refusal(model, cause, exc, attempt)
                self.recorder.record(
                    UsageRecord(
                        tenant=ctx.tenant, job_id=ctx.job_id, stage=ctx.stage, model=model,
                        latency_s=latency, error=cause, retries=attempt, queue=ctx.queue, tier=ctx.tier,
                    )
                )
                attempt += 1
                if not retryable or attempt > cfg.max_retries:
                    raise _gave_up(self.settings, cause, retryable, exc) from exc
                time.sleep(min(wait, cfg.backoff_max_s))
                continue
            latency = time.perf_counter() - started
            p_tok = usage.prompt_tokens if usage else sum(count_tokens(m.get("content") or "", model) + 4
                                                          for m in messages)
            c_tok = usage.completion_tokens if usage else count_tokens(text, model)
            self.limiter.reconcile(reservation, p_tok + c_tok)
            self.completions.observe(model, ctx.stage, p_tok, c_tok)
            self.recorder.record(
                UsageRecord(
                    tenant=ctx.tenant, job_id=ctx.job_id, stage=ctx.stage, model=model,
                    prompt_tokens=p_tok, completion_tokens=c_tok, latency_s=latency,
                    cost_usd=cost_usd(model, p_tok, c_tok, self.settings.llm.prices),
                    retries=attempt, queue=ctx.queue, tier=ctx.tier,
                ),
                also=self._cache_write(cache_key, text, p_tok, c_tok),
            )
            return ChatResult(text, p_tok, c_tok, False, latency, model)

    def _acquire(self, model: str, tokens: int, tenant: str | None):
        try:
            return self.limiter.acquire(model, tokens, tenant)
        except RateLimitTimeout as exc:  # the shared budget stayed full for max_wait_s
            raise LLMError("rate_limit_wait", str(exc)[:300]) from exc

    def _after_refusal(self, model: str, cause: str, exc: Exception, attempt: int) -> float:
        """Seconds to wait before the next attempt; a 429 also sets the shared cool-down."""
        cfg = self.settings.llm
        wait = _retry_after(exc)
        if wait is None:
            wait = min(cfg.backoff_max_s, cfg.backoff_base_s * 2**attempt) * (0.5 + random.random() / 2)
        if cause == "rate_limited":
            self.limiter.cooldown(model, wait)
        return wait

    # ----------------------------------------------------------- embeddings
    def embed(self, texts: list[str], ctx: CallContext, *, model: str | None = None) -> list[list[float]]:
        model = model or self.settings.embedding_model
        ctx = ctx.with_stage("embed")
        cfg = self.settings.llm
        reserve = sum(count_tokens(t, model) for t in texts)
        attempt = 0
        while True:
            reservation = self._acquire(model, reserve, ctx.tenant)
            started = time.perf_counter()
            try:
                vectors, used = wire.embed(self._client, model, texts)
            except Exception as exc:  # noqa: BLE001
                self.limiter.reconcile(reservation, 0)
                cause, retryable = _classify(exc)
                wait = self._after_refusal(model, cause, exc, attempt)
                attempt += 1
                self.recorder.record(
                    UsageRecord(
                        tenant=ctx.tenant, job_id=ctx.job_id, stage="embed", model=model, kind="embedding",
                        latency_s=time.perf_counter() - started, error=cause, queue=ctx.queue, tier=ctx.tier,
                    )
                )
                if not retryable or attempt > cfg.max_retries:
                    raise _gave_up(self.settings, cause, retryable, exc) from exc
                time.sleep(min(wait, cfg.backoff_max_s))
                continue
            tokens = used if used is not None else reserve
            self.limiter.reconcile(reservation, tokens)
            self.recorder.record(
                UsageRecord(
                    tenant=ctx.tenant, job_id=ctx.job_id, stage="embed", model=model, kind="embedding",
                    prompt_tokens=tokens, latency_s=time.perf_counter() - started,
                    cost_usd=cost_usd(model, tokens, 0, cfg.prices), retries=attempt, queue=ctx.queue, tier=ctx.tier,
                )
            )
            return vectors
