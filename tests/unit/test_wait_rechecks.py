"""The re-read rule of the job waits (``jobs.status._Listen``): the blocking wait re-reads at a steady pace (its
own pubsub cannot tell it was lost); the asyncio wait, whose shared subscription reports its losses, spaces its
re-reads out, up to ``RECHECK_MAX_S``, and never past its deadline."""

from __future__ import annotations

from shared.infra.jobs.status import RECHECK_MAX_S, _Listen


def test_the_blocking_wait_re_reads_at_a_steady_pace():
    listen = _Listen(3600, 0.5)
    assert [listen.next("running") for _ in range(5)] == [0.5] * 5


def test_the_asyncio_wait_spaces_its_re_reads_out_up_to_the_cap():
    listen = _Listen(3600, 1.0, grow=True)
    assert [listen.next("queued") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, RECHECK_MAX_S, RECHECK_MAX_S]
    assert _Listen(3600, 30.0, grow=True).next("queued") == 30.0  # a longer setting is kept, not capped


def test_a_wait_ends_on_a_final_or_missing_status_and_never_listens_past_its_deadline():
    listen = _Listen(0.3, 1.0, grow=True)
    assert 0 < listen.next("running") <= 0.3
    assert listen.next("succeeded") is None and listen.next(None) is None
    assert _Listen(0.0, 1.0).next("running") is None
