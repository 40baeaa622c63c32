"""The compact edge hash, what its changes do to the entity degrees, and the log of its changes.

The degrees are counted by a clustering. Between clusterings, a merge that adds an edge (a relation field new to
the edge hash) counts one more pending degree for each end, and one that removes an edge one less, in the same
step (a script: exact with concurrent writers). A clustering that only extends the communities (no whole-graph
read) then applies the pending counts to the degrees of the entities they name; a whole-graph one recounts every
degree and drops the pending counts it read.

Every field whose weight a write changes (added, reweighted or removed) is also appended to the tenant's change
log, in the same script, and counted. The neighbour lists a query worker holds then take a later version's
changes from the log instead of reading every edge again (``edge_changes``; how long the log is kept:
``change_log``): a reader that fell further behind reads the whole hash."""

from __future__ import annotations

from shared.infra.store import change_log
from shared.infra.store.redis_extractions import split_rel_field

# KEYS[1] the edge hash, KEYS[2] the pending degree counts, KEYS[3] the change log, KEYS[4] its count; ARGV[1] the
# log's least length kept; then field, src, tgt, weight ("" removes the edge), ...
_WRITE_EDGES = f"""
local function add(name, by)
  if redis.call('HINCRBY', KEYS[2], name, by) == 0 then redis.call('HDEL', KEYS[2], name) end
end
local changed = 0
for i = 2, #ARGV, 4 do
  local field, a, b, w = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if w == '' then
    if redis.call('HDEL', KEYS[1], field) == 1 then
      add(a, -1) add(b, -1)
      redis.call('RPUSH', KEYS[3], field) changed = changed + 1
    end
  elseif redis.call('HGET', KEYS[1], field) ~= w then
    if redis.call('HSET', KEYS[1], field, w) == 1 then add(a, 1) add(b, 1) end
    redis.call('RPUSH', KEYS[3], field) changed = changed + 1
  end
end
if changed > 0 then
  redis.call('INCRBY', KEYS[4], changed)
  {change_log.trim_lua("KEYS[3]", "KEYS[1]", "ARGV[1]")}
end
return 0
"""
# KEYS[1] the pending degree counts, KEYS[2] the degrees; ARGV[1] "1" to add the counts to the degrees ("0": only
# drop them), then name, count, ...: the counts read are taken off the pending ones (what a merge added since stays)
_TAKE_DELTAS = """
for i = 2, #ARGV, 2 do
  local name, by = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('HINCRBY', KEYS[1], name, -by) == 0 then redis.call('HDEL', KEYS[1], name) end
  if ARGV[1] == '1' and redis.call('HINCRBY', KEYS[2], name, by) <= 0 then redis.call('HDEL', KEYS[2], name) end
end
return 0
"""


def write_edges(pipe, keys, weights: dict[str, float | None]) -> None:
    """Queue on ``pipe`` (a transaction's) the edge writes: relation field -> weight, or None to remove it.
    ``keys``: the tenant's ``Keys``. EVAL as a plain command: a Redis Cluster's pipeline has no ``eval``."""
    args: list = []
    for field, weight in weights.items():
        args.extend((field, *split_rel_field(field), "" if weight is None else repr(float(weight))))
    for i in range(0, len(args), 4000):
        pipe.execute_command("EVAL", _WRITE_EDGES, 4, keys.edges(), keys.degree_delta(), keys.edge_log(),
                             keys.edge_logged(), change_log.LOG_KEPT, *args[i : i + 4000])


def edge_changes(redis, keys, since: int) -> tuple[int, dict[tuple[str, str], float | None] | None]:
    """(the change log's count now, each edge changed since the count ``since`` -> its weight now, None when gone),
    the changes None when the log no longer holds them all (trimmed, or taken back by a restore): the caller then
    reads the whole edge hash. Weights are read after the log, so a change written meanwhile may be seen early;
    it is read again from the log next time, to the same weight."""
    logged, fields = change_log.read_since(redis, keys.edge_log(), keys.edge_logged(), since)
    if fields is None:
        return logged, None
    return logged, {split_rel_field(field): None if raw is None else float(raw)
                    for field, raw in change_log.current(redis, keys.edges(), fields)}


def take_deltas(pipe, keys, deltas: dict[str, int], apply: bool) -> None:
    """Queue on ``pipe`` taking ``deltas`` (pending counts read before) off the pending ones, and with ``apply``
    adding them to the degrees (a degree reaching 0 is removed: absent reads as 0)."""
    items = [x for name, by in deltas.items() if by for x in (name, by)]
    for i in range(0, len(items), 4000):
        pipe.execute_command("EVAL", _TAKE_DELTAS, 2, keys.degree_delta(), keys.degrees(), "1" if apply else "0",
                             *items[i : i + 4000])
