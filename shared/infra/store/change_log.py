"""A tenant's change logs: the keys of a hash that writes changed, newest last, so that a query worker holding an
index built from that hash takes a later version's changes instead of reading the whole hash again.

Each log is a list of the changed fields and a count of every field ever appended to it (less the list's length:
the position of its first entry). A reader remembers the count it read with its index; next time it asks for the
fields appended since, and gets them, or None when the log no longer reaches back (trimmed, a tenant deleted and
written again, or a Redis restarted from a file that had not yet seen the last writes): it then reads the whole
hash, as before.

The log keeps the last ``LOG_KEPT`` fields, or half as many as the hash holds when that is more: a reader one batch
behind reads that batch's changes unless the batch changed more than half the tenant's rows, when reading every
row costs at most twice what the batch wrote. Both logs (edge weights, ``graph_edges``; entity rows,
``merge_write``) are appended in the write's own transaction, so a change is never in the hash without being logged.
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.infra.redis.conn import to_str

LOG_KEPT = 10_000  # a log keeps at least this many fields, else half its hash's fields


def trim_lua(log: str, follows: str, least: str) -> str:
    """The Lua statements that trim a log after an append, by the rule above; each argument is a Lua expression:
    the log's key, the key of the hash it follows, the least length kept (``LOG_KEPT``, passed as an ARGV)."""
    return (f"local keep = math.max(tonumber({least}), math.floor(redis.call('HLEN', {follows}) / 2))\n"
            f"if redis.call('LLEN', {log}) > keep then redis.call('LTRIM', {log}, -keep, -1) end")


# KEYS[1] the log, KEYS[2] its count, KEYS[3] the hash it follows; ARGV[1] the least length kept, then the fields
_APPEND = f"""
local n = #ARGV - 1
if n > 0 then
  for i = 2, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
  redis.call('INCRBY', KEYS[2], n)
  {trim_lua("KEYS[1]", "KEYS[3]", "ARGV[1]")}
end
return n
"""
# KEYS[1] the log, KEYS[2] its count; ARGV[1] a count read before: {the count now, 1 and the fields appended
# since, or 0 when the log no longer holds them all}
_READ = """
local logged = tonumber(redis.call('GET', KEYS[2]) or '0')
local length = redis.call('LLEN', KEYS[1])
local since = tonumber(ARGV[1])
if since < logged - length or since > logged then return {logged, 0} end
if since == logged then return {logged, 1, {}} end
return {logged, 1, redis.call('LRANGE', KEYS[1], length - (logged - since), -1)}
"""


def append(pipe, log: str, count: str, follows: str, fields: list[str]) -> None:
    """Queue on ``pipe`` (a transaction's) appending ``fields`` to the log ``log`` of the hash ``follows``. EVAL as a
    plain command: a Redis Cluster's pipeline has no ``eval``; the keys share the tenant's hash tag."""
    for i in range(0, len(fields), 4000):
        pipe.execute_command("EVAL", _APPEND, 3, log, count, follows, LOG_KEPT, *fields[i : i + 4000])


def read_since(redis, log: str, count: str, since: int) -> tuple[int, list[str] | None]:
    """(the log's count now, the fields appended since the count ``since``, each once; None when the log no longer
    holds them all)."""
    logged, complete, *rest = redis.execute_command("EVAL", _READ, 2, log, count, since)
    if not int(complete):
        return int(logged), None
    return int(logged), list(dict.fromkeys(to_str(f) for f in rest[0]))


def current(redis, follows: str, fields: list[str]) -> Iterator[tuple[str, bytes | None]]:
    """Each of ``fields`` (as ``read_since`` returned them) with its value in the hash ``follows`` now, None when
    gone: read in parts of 5,000, so one call never holds the server for a whole batch's changes."""
    for i in range(0, len(fields), 5000):
        part = fields[i : i + 5000]
        yield from zip(part, redis.hmget(follows, part), strict=True)
