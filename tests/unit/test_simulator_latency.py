"""The simulator's latency model: ``--latency-ms`` per request plus ``--ms-per-completion-token`` per token
of a chat answer. The waits are recorded through an injected sleep, never timed."""

from __future__ import annotations

import argparse
import math

import openai
import pytest

from llm_simulator.cli import add_arguments, config_from_args
from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from tests.unit.sim_support import chat, extract_prompt


@pytest.fixture
def recorded():
    """``recorded(**SimConfig fields) -> (openai client, waits)``: a simulator whose sleeps are recorded."""
    stops = []

    def _start(**kwargs):
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        url, stop = start_in_thread(SimConfig(port=0, **kwargs), sleep=sleep)
        stops.append(stop)
        return openai.OpenAI(base_url=url, api_key="sk-sim", max_retries=0, timeout=30), waits

    yield _start
    for stop in stops:
        stop()


def test_delay_grows_with_completion_tokens():
    cfg = SimConfig(ms_per_completion_token=12.5)
    assert cfg.completion_delay_s(0) == 0
    assert cfg.completion_delay_s(80) == pytest.approx(1.0)
    assert cfg.completion_delay_s(160) == pytest.approx(2 * cfg.completion_delay_s(80))
    assert SimConfig().completion_delay_s(1000) == 0  # off by default


@pytest.mark.parametrize("bad", [-0.1, -12.5, math.nan])
def test_negative_ms_per_completion_token_refused(bad):
    with pytest.raises(ValueError, match="ms_per_completion_token"):
        SimConfig(ms_per_completion_token=bad)


def test_cli_flag():
    parser = add_arguments(argparse.ArgumentParser())
    assert config_from_args(parser.parse_args([])).ms_per_completion_token == 0
    cfg = config_from_args(parser.parse_args(["--latency-ms", "200", "--ms-per-completion-token", "12.5"]))
    assert (cfg.latency_ms, cfg.ms_per_completion_token) == (200.0, 12.5)


def test_chat_waits_per_completion_token_on_top_of_latency(recorded):
    client, waits = recorded(latency_ms=200, ms_per_completion_token=12.5)
    resp = chat(client, extract_prompt())
    tokens = resp.usage.completion_tokens
    assert tokens > 20
    assert waits == [pytest.approx(0.2), pytest.approx(tokens * 0.0125)]


def test_stream_spreads_the_wait_over_its_chunks(recorded):
    client, waits = recorded(ms_per_completion_token=10)
    plain = chat(client, extract_prompt())
    waits.clear()
    stream = chat(client, extract_prompt(), stream=True, stream_options={"include_usage": True})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == plain.choices[0].message.content
    assert len(waits) > 1 and len(set(round(w, 9) for w in waits)) == 1  # an equal share per content chunk
    assert sum(waits) == pytest.approx(plain.usage.completion_tokens * 0.010)


def test_embeddings_wait_the_request_latency_only(recorded):
    client, waits = recorded(latency_ms=50, ms_per_completion_token=12.5)
    client.embeddings.create(model="text-embedding-3-small", input=["Scrooge", "Marley"])
    assert waits == [pytest.approx(0.05)]
