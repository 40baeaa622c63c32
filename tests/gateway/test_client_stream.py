"""``Client.query_stream`` / ``AsyncClient.query_stream`` and ``graphfleet query`` on a terminal against the live
gateway's Server-Sent Events (``POST /v1/queries`` with ``"stream": true``, ``GET /v1/queries/{id}/events``)."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys

import pytest

from graphfleet import AsyncClient, Client
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
TEXT = "Ebenezer Scrooge runs a counting-house in London. Bob Cratchit is his clerk and works in the cold."


@pytest.fixture(scope="module")
def streamed(live):
    api = live.new_tenant("cls")
    api.ingest_and_wait(TEXT)
    return api


def _check(events) -> str:
    names = [e.event for e in events]
    assert names[0] == "accepted" and names[-1] == "result" and names.count("result") == 1, names
    result = events[-1].data
    assert result["status"] == "succeeded" and result["query_id"] == events[0].data["query_id"]
    tokens = [e.data["text"] for e in events if e.event == "token"]
    assert tokens and "".join(tokens) == result["answer"], (tokens, result["answer"])
    assert {"status"} <= set(names)
    return result["answer"]


def test_query_stream_yields_the_events_sync_and_async(live, streamed):
    with Client(live.url, streamed.key) as gf:
        answer = _check(list(gf.query_stream("Who is Bob Cratchit?", mode="local")))
        replay = list(gf.query_events(gf.submit_query("Who is Scrooge?", mode="naive").query_id))
        assert replay[-1].event == "result" and replay[-1].data["status"] == "succeeded"
    assert answer

    async def collect():
        async with AsyncClient(live.url, streamed.key) as gf:
            return [e async for e in gf.query_stream("Who is Bob Cratchit?", mode="local")]

    _check(asyncio.run(collect()))


def test_cli_query_prints_tokens_as_they_arrive_on_a_tty(live, streamed):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update(GRAPHFLEET_URL=live.url, GRAPHFLEET_API_KEY=streamed.key)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "graphfleet_cli.main", "query", "Who is Bob Cratchit?"],
                            env=env, cwd=ROOT, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    out = b"".join(chunks).decode()
    assert "budget:" in out and "usage:" in out and out.split("budget:")[0].strip()  # the answer, then the rest
    assert "[local]" not in out  # the answer was streamed as it came, not printed under a label after the result
