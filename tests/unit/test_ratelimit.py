"""The global LLM rate limit against a real Redis: atomic reservations across many clients,
reconciliation, the shared cool-down, per-tenant budgets, and the LLM client honouring it."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from shared.config import RateLimitSettings, Settings
from shared.infra.llm.client import LLMClient, LLMError
from shared.infra.llm.ratelimit import CompletionEstimate, RateLimitTimeout, RedisRateLimiter, cooldown_key
from shared.infra.redis.conn import connect
from shared.infra.tenancy.usage import CallContext, UsageRecorder


@pytest.fixture()
def model() -> str:
    return "m-" + uuid.uuid4().hex[:8]  # fresh budget keys per test


def _limiter(redis_server, **cfg) -> RedisRateLimiter:
    """A limiter with its own connection, as a worker on another host would have; without pacing
    (the bucket holds the whole window) unless the test sets ``burst_s``."""
    cfg.setdefault("burst_s", 60.0)
    return RedisRateLimiter(connect(redis_server.url), RateLimitSettings(enabled=True, **cfg))


def test_concurrent_acquirers_never_exceed_the_window_tpm(redis_server, model):
    limiters = [_limiter(redis_server, tpm={model: 10_000}) for _ in range(8)]
    granted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(limiters) * 5)

    def worker(lim: RedisRateLimiter, tokens: int) -> None:
        start.wait()
        for _ in range(10):
            res, wait = lim.try_acquire(model, tokens)
            if res is not None:
                with lock:
                    granted.append(tokens)
            else:
                assert wait > 0

    threads = [threading.Thread(target=worker, args=(lim, 300 + 100 * (i % 5)))
               for lim in limiters for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) <= 10_000
    assert sum(granted) >= 10_000 - 700  # only the tail that no longer fits is refused
    assert limiters[0].used(model) == sum(granted)


def test_rpm_budget_counts_requests(redis_server, model):
    lim = _limiter(redis_server, rpm={model: 3})
    assert all(lim.try_acquire(model, 10)[0] is not None for _ in range(3))
    res, wait = lim.try_acquire(model, 10)
    assert res is None and 0 < wait <= 60


def test_reconcile_returns_the_unused_reservation(redis_server, model):
    a, b = _limiter(redis_server, tpm={model: 10_000}), _limiter(redis_server, tpm={model: 10_000})
    res, _ = a.try_acquire(model, 8_000)  # prompt + max_tokens reserved before the call
    assert res is not None
    assert b.try_acquire(model, 5_000)[0] is None
    a.reconcile(res, 3_000)  # the provider counted 3,000
    assert a.used(model) == 3_000
    assert b.try_acquire(model, 7_000)[0] is not None  # exactly fills the window
    assert b.try_acquire(model, 1)[0] is None


def test_refused_call_releases_its_whole_reservation(redis_server, model):
    lim = _limiter(redis_server, tpm={model: 1_000})
    res, _ = lim.try_acquire(model, 1_000)
    lim.reconcile(res, 0)
    assert lim.used(model) == 0
    assert lim.try_acquire(model, 1_000)[0] is not None


def test_oversized_request_is_admitted_into_an_empty_window_only(redis_server, model):
    lim = _limiter(redis_server, tpm={model: 1_000})
    assert lim.try_acquire(model, 5_000)[0] is not None
    assert lim.try_acquire(model, 1)[0] is None


def test_token_bucket_paces_the_window_instead_of_one_burst(redis_server, model):
    lim = _limiter(redis_server, tpm={model: 60_000}, burst_s=5)  # bucket of 5,000, refills 1,000/s
    first, _ = lim.try_acquire(model, 4_000)
    assert first is not None
    res, wait = lim.try_acquire(model, 4_000)  # the window has room, the bucket about 1,000
    assert res is None and 1.5 < wait <= 3.0
    lim.reconcile(first, 1_000)  # the unused 3,000 go back to the bucket too
    assert lim.try_acquire(model, 4_000)[0] is not None
    assert lim.used(model) == 5_000


def test_cooldown_blocks_every_client_of_that_model(redis_server, model):
    refused, other = _limiter(redis_server, tpm={model: 10**9}), _limiter(redis_server)
    refused.cooldown(model, 30)
    res, wait = other.try_acquire(model, 1)  # a different worker, plenty of budget
    assert res is None and 25 < wait <= 30
    assert other.try_acquire(model + "-other", 1)[0] is not None  # other models unaffected
    refused.cooldown(model, 1)  # a shorter cool-down never shortens the current one
    assert other.cooldown_left(model) > 25


def test_acquire_sleeps_out_the_cooldown_then_reserves(redis_server, redis_client, model):
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # time passes: the cool-down expires
        slept.append(seconds)
        redis_client.delete(cooldown_key(model))

    settings = RateLimitSettings(enabled=True, tpm={model: 100}, burst_s=60)
    lim = RedisRateLimiter(connect(redis_server.url), settings, sleep=sleep)
    lim.cooldown(model, 10)
    assert lim.acquire(model, 50) is not None
    assert len(slept) == 1 and 9 < slept[0] < 12
    with pytest.raises(RateLimitTimeout):  # the budget stays full past max_wait_s
        settings = settings.model_copy(update={"max_wait_s": 1e-6})
        RedisRateLimiter(redis_client, settings, sleep=lambda _s: None).acquire(model, 60)


def test_per_tenant_budgets_are_separate(redis_server, model):
    lim = _limiter(redis_server, tpm={model: 100_000}, tenant_tpm={"alpha": 1_000, "*": 2_000})
    assert lim.try_acquire(model, 1_000, "alpha")[0] is not None
    assert lim.try_acquire(model, 1, "alpha")[0] is None  # alpha's own budget is spent
    assert lim.try_acquire(model, 2_000, "beta")[0] is not None  # beta has its own ("*") budget
    assert lim.try_acquire(model, 2_000, "gamma")[0] is not None
    assert lim.try_acquire(model, 1, "beta")[0] is None
    assert lim.used(model) == 5_000  # every tenant also draws on the shared model budget
    assert lim.used(model, "alpha") == 1_000


def test_tenant_reservation_is_all_or_nothing(redis_server, model):
    lim = _limiter(redis_server, tpm={model: 1_500}, tenant_tpm={"*": 1_000})
    assert lim.try_acquire(model, 1_000, "alpha")[0] is not None
    assert lim.try_acquire(model, 1_000, "beta")[0] is None  # the model budget refuses
    assert lim.used(model, "beta") == 0  # so beta's budget is not charged either


@pytest.fixture()
def limited_sim(redis_client):
    from llm_simulator.config import SimConfig
    from llm_simulator.server import start_in_thread

    url, stop = start_in_thread(SimConfig(port=0, seed=5, rate_limit_rpm=2))
    yield url
    stop()
    redis_client.delete(cooldown_key("gpt-4o-mini"))  # the session's Redis is shared with other tests


def test_a_429_sets_the_shared_cooldown_and_a_single_retry_layer(redis_server, redis_client, limited_sim):
    settings = Settings(llm_base_url=limited_sim, llm_api_key="sk-x", llm={"max_retries": 0},
                        ratelimit={"enabled": True})
    limiter = RedisRateLimiter(redis_client, settings.ratelimit)
    client = LLMClient(settings, redis_client, UsageRecorder(redis_client), limiter=limiter)
    ctx = CallContext(tenant="t" + uuid.uuid4().hex[:8], stage="extract")
    for i in range(2):
        client.chat([{"role": "user", "content": f"hello {i}"}], ctx, use_cache=False)
    with pytest.raises(LLMError) as err:
        client.chat([{"role": "user", "content": "hello 3"}], ctx, use_cache=False)
    assert err.value.cause == "rate_limited"
    assert limiter.cooldown_left("gpt-4o-mini") > 1  # every worker now waits (simulator: Retry-After ~60 s)
    stats = httpx.get(limited_sim.removesuffix("/v1") + "/stats").json()
    assert (stats["chat"]["calls"], stats["errors"]["429"]) == (2, 1)  # no hidden retries inside openai
    other = RedisRateLimiter(connect(redis_server.url), settings.ratelimit)
    assert other.try_acquire("gpt-4o-mini", 1)[0] is None


def test_completion_reserve_follows_recent_completions_scaled_by_prompt():
    est = CompletionEstimate(default=1000, size=3)
    assert est.reserve("m", "extract", 500) == 1000
    assert est.reserve("m", "extract", 500, max_tokens=4000) == 4000  # an explicit max_tokens wins
    for c in (1500, 300, 200):
        est.observe("m", "extract", 500, c)
    assert est.reserve("m", "extract", 500) == 1500  # the largest recent completion
    est.observe("m", "extract", 500, 250)  # 1500 leaves the last three
    assert est.reserve("m", "extract", 500) == 300
    assert est.reserve("m", "extract", 5000) == 3000  # a prompt 10x longer may answer 10x longer
    assert est.reserve("m", "summarize", 500) == 300  # a new stage: the model's other stages
    assert est.reserve("other", "summarize", 500) == 1000  # nothing seen: the default
