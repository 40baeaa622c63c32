"""One tenant's communities and community reports in Redis: the community half of ``GraphStore``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from shared.domain.models import Community, CommunityReport
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import REMOVALS, Keys
from shared.infra.store import dirty_marks
from shared.infra.store.community_codec import pack_community, pack_report, unpack_community, unpack_report
from shared.infra.store.graph_edges import take_deltas
from shared.infra.store.lru import CACHED_TENANTS, LRU
from shared.infra.store.stale_reads import may_stand, stale_after

# the merges mark what they wrote in these sets (entity names, relation fields); a clustering takes them in
CLUSTER_DIRTY = ("cluster_entities", "cluster_relations")
# the clustering's bookkeeping in the community meta hash: report waves of the last clustering (json), graph size
# at the last whole-graph Leiden, entities + relations changed since, largest chunk count per level (json)
CLUSTER_META = ("waves", "full_size", "changed", "occurrence_max")
CHAR_KINDS = ("entities", "relations")  # the merges count their description changes per kind (``char_deltas``)
# KEYS[1] the current signatures (space-separated); ARGV[1] n, then n signatures to drop, then the ones to add
_SWAP_SIGNATURES = """
local n = tonumber(ARGV[1])
local keep, drop, out = {}, {}, {}
for i = 2, n + 1 do drop[ARGV[i]] = true end
local current = redis.call('GET', KEYS[1])
if current then for sig in string.gmatch(current, '%S+') do if not drop[sig] then keep[sig] = true end end end
for i = n + 2, #ARGV do keep[ARGV[i]] = true end
for sig in pairs(keep) do out[#out + 1] = sig end
table.sort(out)
redis.call('SET', KEYS[1], table.concat(out, ' '))
return #out
"""
REF = "@"  # a community's report entry that refers to the report cache: "@<level>@<signature>"
# Parsed communities + reports per tenant: ((the random revision every write of either sets, the graph version
# they were clustered at, the graph's epoch), the connection, communities, reports). Read cache only; a user's
# query may be served the rows of the revision before while they are read again (``stale_reads``).
_COMMUNITY_ROWS: LRU[str, tuple[tuple, object, dict[str, Community], dict[str, CommunityReport]]] = LRU(CACHED_TENANTS)

# Drop the report cache's entries that no report refers to and no current community's signature names, in one step
# (a report written between reading the references and deleting would otherwise be left dangling: ``save_reports``
# writes an entry and the reference to it together). KEYS[1] the reports, KEYS[2] the current signatures, KEYS[3]
# the report cache. Returns how many entries went.
_PRUNE_CACHE = """
local keep = {}
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  local sig = string.match(v, '^@[^@]*@(.+)$')
  if sig then keep[sig] = true end
end
local current = redis.call('GET', KEYS[2])
if current then for sig in string.gmatch(current, '%S+') do keep[sig] = true end end
local stale = {}
for _, sig in ipairs(redis.call('HKEYS', KEYS[3])) do
  if not keep[sig] then stale[#stale + 1] = sig end
end
for i = 1, #stale, 1000 do
  redis.call('HDEL', KEYS[3], unpack(stale, i, math.min(i + 999, #stale)))
end
return #stale
"""


class CommunityStore:
    """Communities, their membership index and reports. A mixin of ``GraphStore``: uses its ``redis`` and ``k``."""

    redis: Any
    k: Keys

    # ---------------------------------------------------------- communities
    def cluster_dirty(self) -> tuple[list[str], list[str]]:
        """(entity names, relation fields) merged since the communities last took them in (``CLUSTER_DIRTY``),
        with those a clustering that did not finish took: what the next clustering takes."""
        pipe = self.redis.pipeline(transaction=False)
        for kind in CLUSTER_DIRTY:
            pipe.smembers(self.k.dirty(kind))
            pipe.smembers(self.k.dirty_taken(kind))
        got = pipe.execute()
        pairs = zip(got[::2], got[1::2], strict=True)
        names, fields = (sorted({to_str(x) for x in fresh | held}) for fresh, held in pairs)
        return names, fields

    def take_cluster_dirty(self) -> tuple[list[str], list[str]]:
        """``cluster_dirty`` moved aside for this clustering (``dirty_marks``: the merges go on marking afresh);
        ``_clustered(..., taken)`` drops them with the clustering's save."""
        names, fields = (dirty_marks.take(self.redis, self.k, kind) for kind in CLUSTER_DIRTY)
        return names, fields

    def cluster_meta(self) -> dict[str, str]:
        """The clustering's bookkeeping (``CLUSTER_META`` fields, ``graph_version``, ``levels``); absent ones left
        out."""
        return {to_str(k): to_str(v) for k, v in self.redis.hgetall(self.k.community_meta()).items()}

    def note_removal(self) -> None:
        """Count a merged row that lost content (a removed chunk's fragments): until a clustering takes it in, no
        report may stand for a community it did not see (``ReportSettings.reuse_max_drift``)."""
        self.redis.hincrby(self.k.community_meta(), REMOVALS, 1)

    def removals_pending(self, meta: dict[str, str]) -> int:
        """Rows that lost content since the last clustering (``note_removal``), from ``cluster_meta()``'s fields."""
        return int(meta.get(REMOVALS) or 0)

    def char_deltas(self) -> tuple[dict[str, int], dict[str, int]]:
        """(entity name -> description characters its merges added less removed since a clustering last took the
        counts in, the same per relation field); a key no merge wrote since is left out."""
        pipe = self.redis.pipeline(transaction=False)
        for kind in CHAR_KINDS:
            pipe.hgetall(self.k.char_delta(kind))
        got = pipe.execute()
        return tuple({to_str(k): int(v) for k, v in g.items()} for g in got)  # type: ignore[return-value]

    def take_char_deltas(self, read: bool = True) -> tuple[dict[str, int], dict[str, int]]:
        """The merges' counts (``char_deltas``) moved aside for this clustering, with those a clustering that did
        not finish had moved (the merges go on counting afresh), and returned when ``read``;
        ``_clustered(..., chars_taken=True)`` drops them with the clustering's save."""
        pipe = self.redis.pipeline(transaction=False)
        for kind in CHAR_KINDS:
            pipe.execute_command("EVAL", dirty_marks.TAKE_COUNTS, 2, self.k.char_delta(kind),
                                 self.k.char_delta_taken(kind))
        for kind in CHAR_KINDS if read else ():
            pipe.hgetall(self.k.char_delta_taken(kind))
        got = pipe.execute()[len(CHAR_KINDS):]
        if not read:
            return {}, {}
        entities, relations = ({to_str(k): int(v) for k, v in g.items()} for g in got)
        return entities, relations

    def _clustered(self, pipe, version: int, levels: dict[int, int], meta: dict | None, taken,
                   removals: int = 0, chars_taken: bool = False) -> None:
        """In a write's transaction: the clustering's version, levels and bookkeeping (fields not in ``meta``
        dropped: a clustering written without them is taken as not to be extended), with ``taken`` the dirty marks
        it took in (``take_cluster_dirty``) dropped, the removals it took in (``removals``) counted off
        (those made meanwhile stay for the next clustering), and with ``chars_taken`` the character counts it took
        in (``take_char_deltas``) dropped."""
        meta = meta or {}
        if chars_taken:
            pipe.delete(*(self.k.char_delta_taken(kind) for kind in CHAR_KINDS))
        if removals:
            pipe.hincrby(self.k.community_meta(), REMOVALS, -removals)
        if dropped := [f for f in CLUSTER_META if f not in meta]:
            pipe.hdel(self.k.community_meta(), *dropped)
        pipe.hset(self.k.community_meta(), mapping={
            "levels": json.dumps({str(k): v for k, v in levels.items()}), "graph_version": version, **meta})
        if taken is not None:
            pipe.delete(*(self.k.dirty_taken(kind) for kind in CLUSTER_DIRTY))

    def update_communities(self, touched: list[Community], chains: dict[str, list[str]], levels: dict[int, int],
                           version: int, meta: dict, taken, deltas: dict[str, int], replaced: list[str],
                           removals: int = 0, chars_taken: bool = False) -> None:
        """Write the communities an incremental clustering changed or made, the node index rows of the entities
        it placed, its bookkeeping and the pending degree counts it read (``deltas``, added to the degrees), in one
        transaction; the current signatures lose the touched communities' former ones (``replaced``) and gain
        their new ones."""
        pipe = self.redis.pipeline(transaction=True)
        take_deltas(pipe, self.k, deltas, apply=True)
        for i in range(0, len(touched), 500):
            pipe.hset(self.k.communities(), mapping={c.id: pack_community(c) for c in touched[i : i + 500]})
        items = list(chains.items())
        for i in range(0, len(items), 2000):
            pipe.hset(self.k.node_communities(), mapping={n: json.dumps(ids) for n, ids in items[i : i + 2000]})
        signatures = sorted({c.signature for c in touched if c.signature})
        pipe.execute_command("EVAL", _SWAP_SIGNATURES, 1, self.k.community_signatures(), len(replaced), *replaced,
                             *signatures)
        self._clustered(pipe, version, levels, meta, taken, removals, chars_taken)
        self._touch(pipe)
        pipe.execute()

    def replace_communities(self, communities: list[Community], levels: dict[int, int], version: int,
                            meta: dict | None = None, taken=None, removals: int = 0, chars_taken: bool = False
                            ) -> None:
        node_comm: dict[str, list[str]] = {}
        for c in communities:
            for n in c.nodes:
                node_comm.setdefault(n, []).append(c.id)
        tmp_c, tmp_n = self.k.staging(self.k.communities()), self.k.staging(self.k.node_communities())
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(tmp_c, tmp_n)
        for i in range(0, len(communities), 500):
            pipe.hset(tmp_c, mapping={c.id: pack_community(c) for c in communities[i : i + 500]})
        items = list(node_comm.items())
        for i in range(0, len(items), 2000):
            pipe.hset(tmp_n, mapping={n: json.dumps(ids) for n, ids in items[i : i + 2000]})
        pipe.execute()
        pipe = self.redis.pipeline(transaction=True)
        if communities:
            pipe.execute_command("RENAME", tmp_c, self.k.communities())  # one slot: a cluster pipeline allows it
        else:
            pipe.delete(self.k.communities())
        if node_comm:
            pipe.execute_command("RENAME", tmp_n, self.k.node_communities())
        else:
            pipe.delete(self.k.node_communities())
        self._clustered(pipe, version, levels, meta, taken, removals, chars_taken)
        pipe.set(self.k.community_signatures(), " ".join(sorted({c.signature for c in communities if c.signature})))
        self._touch(pipe)
        pipe.execute()

    def _touch(self, pipe) -> None:
        """New revision of the communities/reports (invalidates every process's parsed copy)."""
        pipe.hset(self.k.community_meta(), "rev", uuid.uuid4().hex)

    def _community_rows(self) -> tuple[dict[str, Community], dict[str, CommunityReport]]:
        """All communities and reports, parsed once per revision per process: a global query reads every report,
        and parsing thousands of them per query dominated its time. While a batch writes its reports, each write
        is a new revision: a user's query (``serving_stale``) is served the revision before, of the same graph
        epoch and no later clustering, once its wait for the rows is spent."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(self.k.community_meta(), "rev", "graph_version")
        pipe.get(self.k.graph_epoch())
        (rev, clustered), epoch = pipe.execute()
        now = _revision(rev, clustered, epoch)
        hit = _COMMUNITY_ROWS.get_or_build(
            self.k.p, lambda held: held[1] is self.redis and held[0][0] == now[0], self._read_community_rows,
            stale_after(), lambda held: held[1] is self.redis and may_stand(held[0][1:], now[1:]))
        return hit[2], hit[3]

    def _read_community_rows(self) -> tuple[tuple, object, dict[str, Community], dict[str, CommunityReport]]:
        pipe = self.redis.pipeline(transaction=True)  # rows and revision from one snapshot
        pipe.hgetall(self.k.communities())
        pipe.hgetall(self.k.reports())
        pipe.hmget(self.k.community_meta(), "rev", "graph_version")
        pipe.get(self.k.graph_epoch())
        raw_c, raw_r, (rev, clustered), epoch = pipe.execute()
        communities = {to_str(k): unpack_community(v) for k, v in raw_c.items()}
        reports = self._resolve_reports({to_str(k): v for k, v in raw_r.items()})
        return _revision(rev, clustered, epoch), self.redis, communities, reports

    def community_rows(self) -> tuple[dict[str, Community], dict[str, CommunityReport]]:
        """Communities and reports of one revision, checked in one round trip (``communities()`` then ``reports()``
        check it twice); the dicts are the caller's, their rows shared and read-only by contract."""
        communities, reports = self._community_rows()
        return dict(communities), dict(reports)

    def communities(self) -> dict[str, Community]:
        """Shared parsed rows (read-only by contract); the dict itself is the caller's."""
        return dict(self._community_rows()[0])

    def communities_by_ids(self, ids: Iterable[str]) -> dict[str, Community]:
        ids = list(dict.fromkeys(ids))
        raws = self.redis.hmget(self.k.communities(), ids) if ids else []
        return {i: unpack_community(r) for i, r in zip(ids, raws, strict=True) if r}

    def reports_by_ids(self, ids: Iterable[str]) -> dict[str, CommunityReport]:
        ids = list(dict.fromkeys(ids))
        raws = self.redis.hmget(self.k.reports(), ids) if ids else []
        return self._resolve_reports({i: r for i, r in zip(ids, raws, strict=True) if r})

    def community_levels(self) -> dict[int, int]:
        raw = self.redis.hget(self.k.community_meta(), "levels")
        return {int(k): v for k, v in json.loads(raw).items()} if raw else {}

    def clustered_version(self) -> int:
        return int(self.redis.hget(self.k.community_meta(), "graph_version") or -1)

    def entity_communities(self, name: str) -> list[str]:
        raw = self.redis.hget(self.k.node_communities(), name)
        return json.loads(raw) if raw else []

    def entities_communities(self, names: Iterable[str]) -> dict[str, list[str]]:
        """Community ids of many entities in one round trip."""
        names = list(dict.fromkeys(names))
        raws = self.redis.hmget(self.k.node_communities(), names) if names else []
        return {n: json.loads(r) for n, r in zip(names, raws, strict=True) if r}

    # -------------------------------------------------------------- reports
    def reports(self) -> dict[str, CommunityReport]:
        """Shared parsed rows (read-only by contract); the dict itself is the caller's."""
        return dict(self._community_rows()[1])

    def cached_reports(self, signatures: Iterable[str]) -> dict[str, CommunityReport]:
        sigs = [x for x in dict.fromkeys(signatures) if x]
        raws = self.redis.hmget(self.k.report_cache(), sigs) if sigs else []
        return {sig: unpack_report(r) for sig, r in zip(sigs, raws, strict=True) if r}

    def cached_signatures(self, signatures: Iterable[str]) -> set[str]:
        """Which of ``signatures`` the report cache holds (no report read)."""
        sigs = [x for x in dict.fromkeys(signatures) if x]
        pipe = self.redis.pipeline(transaction=False)
        for sig in sigs:
            pipe.hexists(self.k.report_cache(), sig)
        return {sig for sig, held in zip(sigs, pipe.execute() if sigs else [], strict=True) if held}

    def report_signatures(self, ids: Iterable[str]) -> dict[str, str]:
        """Community id -> the signature of the report it has (a fallback's is empty); a community with none, or
        whose reference dangles, is left out. A reference is not read: its signature is in it."""
        ids = list(dict.fromkeys(ids))
        raws = {i: r for i, r in zip(ids, self.redis.hmget(self.k.reports(), ids) if ids else [], strict=True) if r}
        refs = {cid: sig for cid, (_level, sig) in _references(raws).items()}
        held = self.cached_signatures(refs.values())
        out = {cid: unpack_report(raw).signature for cid, raw in raws.items() if cid not in refs}
        out.update({cid: sig for cid, sig in refs.items() if sig in held})
        return out

    def cache_reports(self, reports: Iterable[CommunityReport]) -> None:
        """Put reports in the report cache under their signatures only (no community refers to them yet)."""
        items = [(r.signature, pack_report(r)) for r in reports if r.signature]
        for i in range(0, len(items), 500):
            self.redis.hset(self.k.report_cache(), mapping=dict(items[i:i + 500]))

    def save_reports(self, reports: Iterable[CommunityReport], cached: Iterable[Community] = ()) -> None:
        """A report with a signature is written once, in the report cache under its signature; the community's
        entry refers to it (``@<level>@<signature>``). One without (a fallback) is written whole. ``cached``:
        communities whose signatures the cache holds already (``cached_signatures``), referred to as they are."""
        pipe = self.redis.pipeline(transaction=True)
        for community in cached:
            pipe.hset(self.k.reports(), community.id, f"{REF}{community.level}{REF}{community.signature}")
        for report in reports:
            if report.signature:
                pipe.hset(self.k.report_cache(), report.signature, pack_report(report))
                pipe.hset(self.k.reports(), report.community_id, f"{REF}{report.level}{REF}{report.signature}")
            else:
                pipe.hset(self.k.reports(), report.community_id, pack_report(report))
        self._touch(pipe)
        pipe.execute()

    def _resolve_reports(self, raws: dict[str, bytes]) -> dict[str, CommunityReport]:
        """Reports from the community entries read, their references looked up in the report cache (one round trip;
        a cache entry is only ever replaced by a report of the same signature). A dangling reference reads as no
        report (it is made again)."""
        refs = _references(raws)
        sigs = list(dict.fromkeys(sig for _level, sig in refs.values()))
        cached = dict(zip(sigs, self.redis.hmget(self.k.report_cache(), sigs), strict=True)) if sigs else {}
        out = {}
        for cid, raw in raws.items():
            if cid not in refs:
                out[cid] = unpack_report(raw)
            elif (payload := cached.get(refs[cid][1])) is not None:
                out[cid] = unpack_report(payload).model_copy(update={"community_id": cid, "level": int(refs[cid][0])})
        return out

    def prune_reports(self, community_ids: set[str] | None = None) -> None:
        """Drop the reports of communities not in ``community_ids``; by default, of those not stored. Their ids and
        the reports' come from one snapshot, as keys: parsing every community and report to learn the ids held up an
        ingestion's end after its last report wave (``finalize`` waited on it). Then the report cache's entries no
        longer used (``prune_report_cache``)."""
        pipe = self.redis.pipeline(transaction=True)  # one slot: both hashes share the tenant's hash tag
        pipe.hkeys(self.k.reports())
        if community_ids is None:
            pipe.hkeys(self.k.communities())
        raw = pipe.execute()
        keep = community_ids if community_ids is not None else {to_str(x) for x in raw[1]}
        stale = [k for k in (to_str(x) for x in raw[0]) if k not in keep]
        if stale:
            pipe = self.redis.pipeline(transaction=True)
            pipe.hdel(self.k.reports(), *stale)
            self._touch(pipe)
            pipe.execute()
        self.prune_report_cache()

    def prune_report_cache(self) -> int:
        """Drop the cached reports that no community's report refers to and whose signature no current community has
        (so a community whose members are unchanged still reuses its report when the next clustering is reported):
        the cache holds what the current communities use, not every signature ever made. Returns how many went."""
        return int(self.redis.eval(_PRUNE_CACHE, 3, self.k.reports(), self.k.community_signatures(),
                                   self.k.report_cache()))


def _references(raws: dict[str, bytes]) -> dict[str, list[str]]:
    """Community id -> [level, signature] of the report entries that refer to the report cache (``REF``)."""
    return {cid: to_str(raw)[1:].split(REF, 1) for cid, raw in raws.items() if to_str(raw[:1]) == REF}


def _revision(rev, clustered, epoch) -> tuple[str | None, int, str | None]:
    return to_str(rev) if rev is not None else None, int(clustered or 0), to_str(epoch) if epoch is not None else None
