"""A tenant's synonym edges (``shared.domain.retrieval.synonyms``) in Redis: one hash, entity name -> JSON object
{partner name: cosine}, kept symmetric so that deleting an entity removes every edge it had, and a version the
graph-walk cache keys on. Both writes are Lua scripts on the tenant's own keys (one cluster slot), so concurrent
index batches never lose each other's edges."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from shared.domain.retrieval.synonyms import synonym_edges
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

# KEYS: hash, version. ARGV[1]: JSON [[a, b, cosine], ...]: each pair is recorded on both sides.
_LINK = """
local links = cjson.decode(ARGV[1])
local function add(a, b, s)
  local raw = redis.call('HGET', KEYS[1], a)
  local m = raw and cjson.decode(raw) or {}
  m[b] = s
  redis.call('HSET', KEYS[1], a, cjson.encode(m))
end
for _, p in ipairs(links) do
  add(p[1], p[2], p[3])
  add(p[2], p[1], p[3])
end
if #links > 0 then redis.call('INCR', KEYS[2]) end
return #links
"""

# KEYS: hash, version. ARGV: names whose edges go (on their side and on each partner's).
_DROP = """
local changed = 0
for _, name in ipairs(ARGV) do
  local raw = redis.call('HGET', KEYS[1], name)
  if raw then
    for partner, _ in pairs(cjson.decode(raw)) do
      local praw = redis.call('HGET', KEYS[1], partner)
      if praw then
        local m = cjson.decode(praw)
        m[name] = nil
        if next(m) == nil then redis.call('HDEL', KEYS[1], partner)
        else redis.call('HSET', KEYS[1], partner, cjson.encode(m)) end
      end
    end
    redis.call('HDEL', KEYS[1], name)
    changed = changed + 1
  end
end
if changed > 0 then redis.call('INCR', KEYS[2]) end
return changed
"""


class SynonymStore:
    def __init__(self, redis, tenant: str):
        self.redis = redis
        self.k = Keys(tenant)
        self._keys = [self.k.synonyms(), self.k.synonyms_version()]

    def link(self, links: Mapping[str, Sequence[tuple[str, float]]]) -> None:
        """Record each entity's links (and their reverse). Links are only added: an edge lasts while both names
        exist, since a name's vector depends on the name alone."""
        pairs = [[a, b, s] for a, others in links.items() for b, s in others if a != b]
        if pairs:
            self.redis.eval(_LINK, 2, *self._keys, json.dumps(pairs))

    def drop(self, names: Iterable[str]) -> int:
        """Remove every edge of ``names`` (deleted entities); the number of names that had some."""
        names = list(names)
        return int(self.redis.eval(_DROP, 2, *self._keys, *names)) if names else 0

    def clear(self) -> bool:
        """Forget every synonym edge of the tenant; True when there were some."""
        if not self.redis.delete(self.k.synonyms()):
            return False
        self.redis.incr(self.k.synonyms_version())
        return True

    def links(self) -> dict[str, dict[str, float]]:
        return {to_str(name): json.loads(raw) for name, raw in self.redis.hscan_iter(self.k.synonyms(), count=5000)}

    def edges(self) -> list[tuple[str, str, float]]:
        return synonym_edges({a: list(m.items()) for a, m in self.links().items()})
