"""The stored form of a usage record: one entry of the tenant's usage stream (``Keys.usage_stream``).

Each attribute is a stream field of its own under a one-character name, left out when it equals the
attribute's default. The tenant is not stored: the stream's key names it, and the reader passes it in.
Integers are plain integer strings (Redis keeps them as integers inside the stream's listpacks); floats are
their ``repr``, which reads back as the same float.

Entries written before this form hold the whole record as JSON in the single field ``r`` (a name this form
never uses); :func:`decode_usage` reads both, so one stream may hold entries of either form.
"""

from __future__ import annotations

import json

from shared.domain.models import UsageRecord
from shared.infra.redis.conn import to_str

LEGACY_FIELD = "r"

_TEXT = {"job_id": "j", "stage": "s", "model": "m", "kind": "k", "queue": "q", "tier": "T"}
_INT = {"prompt_tokens": "p", "completion_tokens": "c", "retries": "n"}
_FLOAT = {"latency_s": "l", "cost_usd": "$"}
_CACHE_HIT, _ERROR, _TS = "h", "e", "t"

# ``ts`` is stored, not taken from the entry id: it is the writer's clock when the call was booked (or the
# value the caller set), while the id is the Redis server's clock cut to milliseconds. Reports group records by
# the UTC day of ``ts`` and callers read ``ts`` back exactly (e.g. ``ts - latency_s`` as the call's start), so
# an id-derived value could move a record across midnight by the clock skew and would change what they read.
# It is stored as an integer count of 2**-22 s: every float second count from 2004 on is a whole multiple of
# that (a double's resolution at that magnitude), so the integer is exact, Redis keeps it as a 64-bit integer
# rather than an 18-character string, and dividing it back gives the same float. Any other value is its repr.
TS_SCALE = 1 << 22
_INT64 = 1 << 63


def _ts_text(ts: float) -> str:
    scaled = ts * TS_SCALE  # a power of two: exact
    if scaled.is_integer() and abs(scaled) < _INT64:
        return str(int(scaled))
    return repr(ts)


def _ts_value(text: str) -> float:
    digits = text[1:] if text[:1] == "-" else text
    return int(text) / TS_SCALE if digits.isdigit() else float(text)


def _default(name: str):
    return UsageRecord.model_fields[name].default


def encode_usage(rec: UsageRecord) -> dict[str, str]:
    """The stream fields of ``rec``: what ``XADD`` writes."""
    out: dict[str, str] = {}

    def put(field: str, text: str, default_text: str | None) -> None:
        if text != default_text:
            out[field] = text

    for name, field in _TEXT.items():
        put(field, getattr(rec, name), _default(name))
    for name, field in _INT.items():
        put(field, str(int(getattr(rec, name))), str(_default(name)))
    for name, field in _FLOAT.items():
        put(field, repr(float(getattr(rec, name))), repr(_default(name)))
    if rec.cache_hit:
        out[_CACHE_HIT] = "1"
    if rec.error is not None:
        out[_ERROR] = rec.error
    put(_TS, _ts_text(float(rec.ts)), _ts_text(_default("ts")))
    return out


_DECODE = {
    **{field: (name, str) for name, field in _TEXT.items()},
    **{field: (name, int) for name, field in _INT.items()},
    **{field: (name, float) for name, field in _FLOAT.items()},
    _CACHE_HIT: ("cache_hit", lambda text: text == "1"),
    _ERROR: ("error", str),
    _TS: ("ts", _ts_value),
}


def decode_usage(fields: dict, tenant: str) -> UsageRecord:
    """The record of one usage-stream entry (``fields`` as ``XRANGE`` returns them, bytes or str) of
    ``tenant``'s stream, in either stored form; fields of neither form are ignored."""
    values = {to_str(k): to_str(v) for k, v in fields.items()}
    legacy = values.get(LEGACY_FIELD)
    if legacy is not None:
        return UsageRecord.model_validate(json.loads(legacy))
    attrs: dict = {"tenant": tenant}
    for field, text in values.items():
        known = _DECODE.get(field)
        if known is not None:
            name, parse = known
            attrs[name] = parse(text)
    return UsageRecord.model_validate(attrs)
