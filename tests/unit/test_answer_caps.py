"""``extraction.max_tokens`` and ``report.max_output_tokens`` cap the answers of those stages' LLM calls: the cap
goes out as the call's ``max_tokens`` (the simulator cuts the answer there, as a model does), and no other stage
is capped. Real simulator over HTTP, real Redis, the task's own ``Job.chat``."""

from __future__ import annotations

import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.config import Settings
from shared.domain.extraction.llm_extractor import build_extract_messages
from shared.domain.prompts import glean_continue
from shared.domain.tokens import count_tokens
from shared.infra.llm.client import LLMClient
from shared.infra.messaging import messages as m
from shared.infra.tenancy.usage import UsageRecorder
from workers.job import Job
from workers.runtime import Runtime

CHUNK = " ".join(f"Scrooge met Marley, Fezziwig and Belle in London on night {i}; Bob Cratchit and Tiny Tim "
                 f"waited in Camden Town while Fred dined with Topper." for i in range(30))
SLACK = 4


@pytest.fixture()
def sim_url():
    url, stop = start_in_thread(SimConfig(port=0, seed=3))
    yield url
    stop()


def _job(url, redis_client, tenant, **sections) -> Job:
    settings = Settings(llm_base_url=url, llm_api_key="sk-x", llm={"cache_enabled": False}, **sections)
    llm = LLMClient(settings, redis_client, UsageRecorder(redis_client))
    rt = Runtime(settings, redis_client, UsageRecorder(redis_client), llm, None, None)
    return Job(rt, m.ExtractChunk(tenant, "job-caps", "chunk-1"), token="t")


def test_the_extraction_cap_cuts_extraction_and_gleaning_answers_and_leaves_other_stages_alone(
        sim_url, redis_client, tenant):
    messages = build_extract_messages(CHUNK, ["person", "geo"])
    uncapped = _job(sim_url, redis_client, tenant).chat("extract")(messages, "extract")
    assert count_tokens(uncapped) > 200
    job = _job(sim_url, redis_client, tenant, extraction={"max_tokens": 60}, report={"max_output_tokens": 25})
    capped = job.chat("extract")(messages, "extract")
    # a cut text encodes to about the cap (a token split at the cut may re-encode as two)
    assert uncapped.startswith(capped) and 50 <= count_tokens(capped) <= 60 + SLACK
    more = [*messages, {"role": "assistant", "content": capped},
            {"role": "user", "content": glean_continue.TEMPLATE}]
    assert count_tokens(_job(sim_url, redis_client, tenant).chat("extract")(more, "glean")) > 100
    assert count_tokens(job.chat("extract")(more, "glean")) <= 60 + SLACK  # bound under the extraction's cap
    assert count_tokens(job.chat("report")(messages, "report")) <= 25 + SLACK
    assert job.chat("summarize")(messages, "summarize") == uncapped  # a stage without a cap


def test_caps_are_off_by_default_and_never_negative():
    settings = Settings()
    assert [settings.answer_cap(s) for s in ("extract", "report", "summarize", "answer")] == [0, 0, 0, 0]
    with pytest.raises(ValueError):
        Settings(extraction={"max_tokens": -1})
