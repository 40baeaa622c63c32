"""The stored form of usage records (``shared.infra.tenancy.usage_codec``) against a real Redis: what
``UsageRecorder`` writes reads back as the same record, entries of the earlier one-JSON-field form still read the
same, and the ledger's reports and monthly totals count both forms."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from shared.domain.models import UsageRecord
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.ledger import month_label, month_tokens, usage_report
from shared.infra.tenancy.tiers import DEFAULT_TIER
from shared.infra.tenancy.usage import UsageRecorder, read_usage


def _recorder(redis) -> UsageRecorder:
    return UsageRecorder(redis)


def _full(tenant: str) -> UsageRecord:
    """Every attribute away from its default, floats that a short decimal does not hold."""
    return UsageRecord(tenant=tenant, job_id="job-" + "ab" * 16, stage="summarize", model="gpt-4o-mini",
                       prompt_tokens=1834, completion_tokens=207, latency_s=1.2345678901234567,
                       cache_hit=True, cost_usd=0.1 + 0.2, kind="embedding", ts=time.time(), retries=3,
                       error="rate_limited: 429", queue="graphfleet.ingest", tier="enterprise")


def _entries(redis, tenant):
    return [{to_str(k): to_str(v) for k, v in fields.items()}
            for _id, fields in redis.xrange(Keys(tenant).usage_stream())]


def test_every_attribute_round_trips(redis_client, tenant):
    rec = _full(tenant)
    expected = rec.model_dump()
    _recorder(redis_client).record(rec)
    [back] = read_usage(redis_client, tenant)
    assert back.model_dump() == expected
    assert back.model_dump_json() == rec.model_dump_json()  # the public JSON, floats to the last digit
    [stored] = _entries(redis_client, tenant)
    assert "r" not in stored and tenant not in stored.values()  # the key names the tenant
    assert stored["p"] == "1834" and stored["h"] == "1"


def test_defaults_round_trip_and_are_not_stored(redis_client, tenant):
    rec = UsageRecord(tenant=tenant, stage="embed", model="m", ts=1_700_000_000.0)
    _recorder(redis_client).record(rec)  # fills tier
    [back] = read_usage(redis_client, tenant)
    assert back == rec and back.tier == DEFAULT_TIER and back.error is None and back.cache_hit is False
    assert set(_entries(redis_client, tenant)[0]) == {"s", "m", "t", "T"}


def test_values_that_look_like_defaults_or_numbers_round_trip(redis_client, tenant):
    """An empty error is not ``None``, -0.0 is not 0.0, a text of digits stays text, an odd ts keeps its bits."""
    rec = UsageRecord(tenant=tenant, stage="0", model="007", error="", latency_s=-0.0, cost_usd=1e-12,
                      ts=123456.789, prompt_tokens=-1, queue="12")
    _recorder(redis_client).record(rec)
    [back] = read_usage(redis_client, tenant)
    assert back.model_dump_json() == rec.model_dump_json()
    assert back.error == "" and repr(back.latency_s) == "-0.0" and back.stage == "0"


def test_old_and_new_forms_in_one_stream(redis_client, tenant):
    old = _full(tenant).model_copy(update={"ts": 1_600_000_000.123456, "stage": "extract"})
    redis_client.xadd(Keys(tenant).usage_stream(), {"r": old.model_dump_json()})  # the form before this one
    new = _full(tenant)
    _recorder(redis_client).record(new)
    assert [r.model_dump() for r in read_usage(redis_client, tenant)] == [old.model_dump(), new.model_dump()]


def _mixed(redis, tenant) -> list[UsageRecord]:
    """Old and new entries interleaved, over two UTC days, with cache hits and errors."""
    recorder, stream, recs = _recorder(redis), Keys(tenant).usage_stream(), []
    for i in range(12):
        rec = UsageRecord(tenant=tenant, job_id=f"job-{i % 3}", stage=("extract", "summarize")[i % 2],
                          model=("gpt-4o-mini", "gpt-4o")[i % 3 == 0], prompt_tokens=100 * i + 7,
                          completion_tokens=11 * i, latency_s=0.1 * i, cost_usd=0.0007 * i, cache_hit=i % 4 == 0,
                          error="timeout" if i % 5 == 0 else None, ts=1_700_000_000.0 + 40_000 * i, tier="free")
        if i % 2:
            redis.xadd(stream, {"r": rec.model_dump_json()})
        else:
            recorder.record(rec)
        recs.append(rec)
    return recs


def test_ledger_totals_equal_the_records_of_both_forms(redis_client, tenant):
    recs = _mixed(redis_client, tenant)
    assert read_usage(redis_client, tenant) == recs
    totals = usage_report(redis_client, tenant, None, None, None)["totals"]
    assert totals == {
        "calls": 12, "prompt_tokens": sum(r.prompt_tokens for r in recs),
        "completion_tokens": sum(r.completion_tokens for r in recs),
        "total_tokens": sum(r.prompt_tokens + r.completion_tokens for r in recs),
        "cost_usd": round(sum(r.cost_usd for r in recs), 8), "cache_hits": sum(r.cache_hit for r in recs),
        "errors": sum(bool(r.error) for r in recs)}
    days = usage_report(redis_client, tenant, None, None, "day")["groups"]
    by_day: dict[str, int] = {}
    for r in recs:
        day = datetime.fromtimestamp(r.ts, tz=UTC).date().isoformat()
        by_day[day] = by_day.get(day, 0) + r.prompt_tokens
    assert {g["key"]: g["prompt_tokens"] for g in days} == by_day and len(by_day) == 7
    stages = {g["key"]: g["prompt_tokens"] for g in usage_report(redis_client, tenant, None, None, "stage")["groups"]}
    assert stages == {s: sum(r.prompt_tokens for r in recs if r.stage == s) for s in ("extract", "summarize")}
    # the quota's monthly total folds the stream by entry id (written now)
    now = time.time()
    assert month_tokens(redis_client, tenant, now) == sum(r.prompt_tokens + r.completion_tokens for r in recs)
    redis_client.xadd(Keys(tenant).usage_stream(), {"r": recs[1].model_dump_json()})
    _recorder(redis_client).record(recs[2].model_copy(update={"ts": 0.0}))
    extra = recs[1].prompt_tokens + recs[1].completion_tokens + recs[2].prompt_tokens + recs[2].completion_tokens
    assert month_tokens(redis_client, tenant, now) == totals["total_tokens"] + extra
    assert month_label(now) in {to_str(k) for k in redis_client.hkeys(Keys(tenant).ledger_tokens())}
