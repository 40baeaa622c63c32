"""Dirty sets (and the merges' description counts) worked off by a stage that reads rows and then saves what it
made of them (the clustering, the index stage): the stage moves the marks aside when it starts (``take``) and drops
each one it finished from there (``done``), so a writer that marks a row again after the stage read it leaves a
mark the stage cannot drop; that mark waits for the next stage. A stage that did not finish leaves its taken marks,
and the next one takes them with the new ones."""

from __future__ import annotations

from collections.abc import Iterable

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

# KEYS[1] the writers' marks of one kind, KEYS[2] those a stage took: the first moved into the second (joined to it
# when a stage that did not finish left it), and the second returned
TAKE_MARKS = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('RENAME', KEYS[1], KEYS[2])
  else redis.call('SUNIONSTORE', KEYS[2], KEYS[2], KEYS[1]) redis.call('DEL', KEYS[1]) end
end
return redis.call('SMEMBERS', KEYS[2])
"""

# The same for a hash of counts: KEYS[1] the merges' counts, KEYS[2] those a clustering took, into which the first is
# moved (added, when a clustering that did not finish left some); the merges count afresh from then on
TAKE_COUNTS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('RENAME', KEYS[1], KEYS[2]) return 1 end
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do redis.call('HINCRBY', KEYS[2], flat[i], flat[i + 1]) end
redis.call('DEL', KEYS[1])
return 1
"""


def take(redis, k: Keys, kind: str) -> list[str]:
    """The ``kind`` marks moved aside for this stage, with those a stage that did not finish took; sorted."""
    return sorted(to_str(x) for x in redis.eval(TAKE_MARKS, 2, k.dirty(kind), k.dirty_taken(kind)))


def done(redis, k: Keys, kind: str, members: Iterable[str], batch: int = 5000) -> None:
    """Drop ``members`` from the marks taken (their work is saved)."""
    members = list(members)
    for i in range(0, len(members), batch):
        redis.srem(k.dirty_taken(kind), *members[i : i + batch])
