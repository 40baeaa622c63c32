"""Usage aggregation over the per-call records (``shared.infra.tenancy.usage``): the billing source.

Reports are computed from :func:`read_usage` directly, so they always equal the sum of the
records. The monthly token total used by quotas is kept incrementally:

- ``gf:t:{tenant}:ledger:cursor`` last usage-stream id folded into the totals
- ``gf:t:{tenant}:ledger:tokens`` hash ``YYYY-MM`` -> prompt + completion tokens
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from datetime import time as dtime

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.usage import read_usage
from shared.infra.tenancy.usage_codec import decode_usage

GROUP_BY = ("day", "model", "stage")
_FOLD_BATCH = 5000


def parse_time(value: str | float | None, end: bool = False) -> float | None:
    """Unix seconds, an ISO date (whole UTC day; ``end`` = its last instant) or an ISO datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if len(text) == 10:
        day = date.fromisoformat(text)  # ValueError for garbage
        moment = datetime.combine(day, dtime.max if end else dtime.min, tzinfo=UTC)
        return moment.timestamp()
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _empty() -> dict:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
            "cost_usd": 0.0, "cache_hits": 0, "errors": 0}


def _add(acc: dict, rec) -> None:
    acc["calls"] += 1
    acc["prompt_tokens"] += rec.prompt_tokens
    acc["completion_tokens"] += rec.completion_tokens
    acc["total_tokens"] += rec.prompt_tokens + rec.completion_tokens
    acc["cost_usd"] += rec.cost_usd
    acc["cache_hits"] += int(rec.cache_hit)
    acc["errors"] += int(bool(rec.error))


def _group_key(rec, group_by: str) -> str:
    if group_by == "day":
        return datetime.fromtimestamp(rec.ts, tz=UTC).date().isoformat()
    return rec.model if group_by == "model" else rec.stage


def summarize(records, group_by: str | None = None) -> dict:
    if group_by is not None and group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}")
    totals, groups = _empty(), {}
    for rec in records:
        _add(totals, rec)
        if group_by:
            _add(groups.setdefault(_group_key(rec, group_by), _empty()), rec)
    totals["cost_usd"] = round(totals["cost_usd"], 8)
    out = {"totals": totals}
    if group_by:
        for acc in groups.values():
            acc["cost_usd"] = round(acc["cost_usd"], 8)
        out["groups"] = [{"key": k, **v} for k, v in sorted(groups.items())]
    return out


def usage_report(redis, tenant: str, start: float | None, end: float | None, group_by: str | None) -> dict:
    return summarize(read_usage(redis, tenant, start, end), group_by)


# ---------------------------------------------------------------- monthly totals (quotas)
def month_label(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m")


def next_month_start(ts: float) -> float:
    d = datetime.fromtimestamp(ts, tz=UTC)
    year, month = (d.year + 1, 1) if d.month == 12 else (d.year, d.month + 1)
    return datetime(year, month, 1, tzinfo=UTC).timestamp()


def _cursor_key(tenant: str) -> str:
    return Keys(tenant).ledger_cursor()


def _totals_key(tenant: str) -> str:
    return Keys(tenant).ledger_tokens()


def _fold_once(redis, tenant: str) -> bool:
    """Fold one batch of new usage records into the monthly totals; True when more may remain."""
    import redis as redis_lib

    cursor_key, totals_key = _cursor_key(tenant), _totals_key(tenant)
    with redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(cursor_key)
            cursor = pipe.get(cursor_key)
            lo = "(" + to_str(cursor) if cursor else "-"
            entries = pipe.xrange(Keys(tenant).usage_stream(), lo, "+", count=_FOLD_BATCH)
            if not entries:
                return False
            incr: dict[str, int] = {}
            for entry_id, fields in entries:
                rec = decode_usage(fields, tenant)
                ms = int(to_str(entry_id).split("-")[0])
                label = month_label(ms / 1000)
                incr[label] = incr.get(label, 0) + rec.prompt_tokens + rec.completion_tokens
            pipe.multi()
            for label, tokens in incr.items():
                pipe.hincrby(totals_key, label, tokens)
            pipe.set(cursor_key, to_str(entries[-1][0]))
            pipe.execute()
            return len(entries) == _FOLD_BATCH
        except redis_lib.WatchError:
            return True


def month_tokens(redis, tenant: str, now: float) -> int:
    """Tokens (prompt + completion) recorded for the tenant in ``now``'s UTC month."""
    for _ in range(100):
        if not _fold_once(redis, tenant):
            break
    return int(redis.hget(_totals_key(tenant), month_label(now)) or 0)
