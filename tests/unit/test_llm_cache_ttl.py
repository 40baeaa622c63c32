"""The LLM answer cache is bounded: every entry expires (``llm.cache_ttl_s``, default 7 days), so with Redis's
``noeviction`` policy it cannot fill the memory. Real Redis, the LLM simulator over HTTP."""

from __future__ import annotations

import pydantic
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.config import Settings
from shared.infra.llm.client import LLMClient, cache_digest
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.usage import CallContext, UsageRecorder

WEEK = 7 * 24 * 3600


@pytest.fixture(scope="module")
def sim_url():
    url, stop = start_in_thread(SimConfig(port=0, seed=5))
    yield url
    stop()


def cached_key(client: LLMClient, tenant: str, msgs: list[dict]) -> str:
    model = client.settings.llm_model
    return Keys(tenant).llm_cache(cache_digest(model, msgs, {"temperature": client.settings.llm.temperature}))


@pytest.mark.parametrize(("llm", "bound"), [({}, WEEK), ({"cache_ttl_s": 90}, 90)])
def test_a_cached_answer_expires(sim_url, redis_client, tenant, llm, bound):
    settings = Settings(llm_base_url=sim_url, llm_api_key="sk-x", llm=llm)
    client = LLMClient(settings, redis_client, UsageRecorder(redis_client))
    msgs = [{"role": "user", "content": f"What does Marley's ghost tell Scrooge? ({tenant})"}]
    first = client.chat(msgs, CallContext(tenant=tenant, stage="answer"))
    assert client.chat(msgs, CallContext(tenant=tenant, stage="answer")).cache_hit and not first.cache_hit
    key = cached_key(client, tenant, msgs)
    assert redis_client.exists(key)
    assert 0 < redis_client.ttl(key) <= bound


def test_the_cache_ttl_cannot_be_disabled():
    with pytest.raises(pydantic.ValidationError):
        Settings(llm={"cache_ttl_s": 0})


def test_the_cache_digest_tells_apart_every_change_of_model_parameters_roles_and_texts():
    def msgs(*texts, role="user"):
        return [{"role": role, "content": t} for t in texts]

    base = cache_digest("m", msgs("ab", "c"), {"temperature": 0})
    assert base == cache_digest("m", msgs("ab", "c"), {"temperature": 0})
    others = [cache_digest("m", msgs("a", "bc"), {"temperature": 0}),  # same bytes, another split
              cache_digest("m", msgs("abc"), {"temperature": 0}),
              cache_digest("m", msgs("ab", "c", role="system"), {"temperature": 0}),
              cache_digest("n", msgs("ab", "c"), {"temperature": 0}),
              cache_digest("m", msgs("ab", "c"), {"temperature": 0.5}),
              cache_digest("m", msgs("äb", "c"), {"temperature": 0}),
              cache_digest("m", [{"role": "user", "content": [{"type": "text", "text": "abc"}]}], {"temperature": 0})]
    assert len({base, *others}) == len(others) + 1
