"""The Redis key layout. Every tenant-owned key starts with ``gf:t:{<tenant>}:``.

Keeping all key construction here makes tenant scoping auditable in one place. The braces are a Redis
Cluster hash tag: all of a tenant's keys hash to one slot, so its Lua scripts, ``WATCH``/``MULTI`` merges and
pipelines stay valid on a cluster while tenants spread over its shards. A key spanning tenants lives in a slot
of its own and is never in one command, script or transaction with another key (docs/scaling.md lists them).
"""

from __future__ import annotations

import re

from shared.domain.ids import validate_tenant

ROOT = "gf"
SEP = "\x1f"  # separator inside hash fields (never appears in names after normalisation)


# field of the community meta hash: merged rows that lost fragments since the last clustering (a removal)
REMOVALS = "removals"


class Keys:
    def __init__(self, tenant: str):
        self.tenant = validate_tenant(tenant)
        self.p = tenant_prefix(tenant)

    # documents and chunks
    def doc(self, doc_id: str) -> str:
        return f"{self.p}doc:{doc_id}"

    def docs(self) -> str:  # zset doc_id -> created_at
        return f"{self.p}docs"

    def chunk(self, chunk_id: str) -> str:
        return f"{self.p}chunk:{chunk_id}"

    def chunks(self) -> str:  # set of chunk ids
        return f"{self.p}chunks"

    def extraction(self, chunk_id: str) -> str:
        return f"{self.p}extraction:{chunk_id}"

    # graph
    def entity_fragments(self, name: str) -> str:  # hash chunk_id -> EntityFragment json
        return f"{self.p}entfrag:{name}"

    def relation_fragments(self, src: str, tgt: str) -> str:
        return f"{self.p}relfrag:{src}{SEP}{tgt}"

    def entities(self) -> str:  # hash name -> Entity row (``row_codec``)
        return f"{self.p}entities"

    def relations(self) -> str:  # hash "src\x1ftgt" -> Relation row (``row_codec``)
        return f"{self.p}relations"

    def edges(self) -> str:  # hash "src\x1ftgt" -> weight (compact, for clustering)
        return f"{self.p}edges"

    def edge_log(self) -> str:  # list of the edge fields whose weight changed, newest last (``graph_edges``)
        return f"{self.p}edges:log"

    def edge_logged(self) -> str:  # how many fields were ever appended to ``edge_log`` (less its length: the first's)
        return f"{self.p}edges:logged"

    def entity_log(self) -> str:  # list of the entity names whose row a merge wrote or removed (``change_log``)
        return f"{self.p}entities:log"

    def entity_logged(self) -> str:  # how many names were ever appended to ``entity_log``
        return f"{self.p}entities:logged"

    def lock(self, name: str) -> str:
        return f"{self.p}lock:{name}"

    def communities(self) -> str:  # hash community_id -> Community json
        return f"{self.p}communities"

    def staging(self, key: str) -> str:  # a key's replacement being written, renamed over it when complete
        return f"{key}:tmp"

    def community_meta(self) -> str:  # hash: levels json, version, the clustering's bookkeeping, REMOVALS
        return f"{self.p}communities:meta"

    def reports(self) -> str:  # hash community_id -> CommunityReport json
        return f"{self.p}reports"

    def report_cache(self) -> str:  # hash signature -> CommunityReport json (incremental reports)
        return f"{self.p}reportcache"

    def community_signatures(self) -> str:  # string: the current communities' signatures, space-separated
        return f"{self.p}communities:sigs"

    # jobs
    def job(self, job_id: str) -> str:
        return f"{self.p}job:{job_id}"

    def job_done_channel(self, job_id: str) -> str:  # pub/sub: the final status, published once when the job ends
        return f"{self.p}job:{job_id}:done"

    def job_failures(self, job_id: str) -> str:  # hash chunk_id -> ChunkFailure json
        return f"{self.p}job:{job_id}:failures"

    def job_chunks(self, job_id: str) -> str:  # set of chunk ids the job must extract
        return f"{self.p}job:{job_id}:chunks"

    def job_chunks_done(self, job_id: str) -> str:  # set of chunk ids finished (done or failed)
        return f"{self.p}job:{job_id}:chunks_done"

    def job_docs(self, job_id: str) -> str:
        return f"{self.p}job:{job_id}:docs"

    def job_docs_done(self, job_id: str) -> str:
        return f"{self.p}job:{job_id}:docs_done"

    def job_docs_files(self, job_id: str) -> str:  # set of doc ids uploaded as files: their text is to be parsed
        return f"{self.p}job:{job_id}:docs_files"

    def job_docs_parsed(self, job_id: str) -> str:  # set of doc ids whose text is extracted (or failed to be)
        return f"{self.p}job:{job_id}:docs_parsed"

    def job_doc_failures(self, job_id: str) -> str:  # hash doc_id -> why its file could not be parsed
        return f"{self.p}job:{job_id}:doc_failures"

    def job_touched(self, job_id: str, kind: str) -> str:  # set of entity names / relation keys
        return f"{self.p}job:{job_id}:touched:{kind}"

    def job_stage_done(self, job_id: str, stage: str) -> str:  # set of finished batch ids
        return f"{self.p}job:{job_id}:stage:{stage}"

    def job_warmed(self, job_id: str) -> str:  # list: one entry per query worker that warmed the job's index
        return f"{self.p}job:{job_id}:warmed"

    def job_usage(self, job_id: str) -> str:  # hash of counters
        return f"{self.p}job:{job_id}:usage"

    def jobs(self) -> str:  # zset job_id -> created_at
        return f"{self.p}jobs"

    def deliveries(self, job_id: str) -> str:  # hash "stage:item" -> delivery count
        return f"{self.p}job:{job_id}:deliveries"

    def doc_text(self, doc_id: str) -> str:
        return f"{self.p}doctext:{doc_id}"

    def doc_original(self, doc_id: str) -> str:  # the uploaded file (PDF, HTML, DOCX) as sent
        return f"{self.p}docfile:{doc_id}"

    def chunk_docs(self, chunk_id: str) -> str:  # set of doc ids containing the chunk
        return f"{self.p}chunkdocs:{chunk_id}"

    def dirty(self, kind: str) -> str:  # set of names/keys awaiting merge / embedding
        return f"{self.p}dirty:{kind}"

    def dirty_taken(self, kind: str) -> str:  # set: the marks of ``dirty(kind)`` a stage took (``dirty_marks``),
        # dropped as its work is saved
        return f"{self.p}dirty:{kind}:taken"

    def degrees(self) -> str:  # hash name -> degree
        return f"{self.p}degrees"

    def degree_delta(self) -> str:  # hash name -> edges added less removed since the degrees were counted
        return f"{self.p}degdelta"

    def char_delta(self, kind: str) -> str:  # hash name / relation field -> description characters added less
        # removed by the merges since the communities last counted them (kind: entities | relations)
        return f"{self.p}chardelta:{kind}"

    def char_delta_taken(self, kind: str) -> str:  # hash: the counts a clustering took in, dropped with its save
        return f"{self.p}chardelta:{kind}:taken"

    def node_communities(self) -> str:  # hash name -> json list of community ids
        return f"{self.p}nodecomm"

    def graph_version(self) -> str:
        return f"{self.p}graphver"

    def graph_epoch(self) -> str:  # set once per incarnation of a tenant's graph (a deleted one counts from 0 again)
        return f"{self.p}graphepoch"

    def job_flags(self, job_id: str) -> str:  # hash: stage -> task id that advanced it
        return f"{self.p}job:{job_id}:flags"

    def job_batch(self, job_id: str, stage: str, index: int) -> str:  # json payload of one planned batch
        return f"{self.p}job:{job_id}:batch:{stage}:{index}"

    def job_batch_stages(self, job_id: str) -> str:  # set of the stages that planned batches ("merge", "report0")
        return f"{self.p}job:{job_id}:batch_stages"

    def job_stages(self, job_id: str) -> str:  # hash stage -> first start time
        return f"{self.p}job:{job_id}:stages"

    def job_warnings(self, job_id: str) -> str:  # hash chunk_id -> json list of extraction warnings
        return f"{self.p}job:{job_id}:warnings"

    def job_report_errors(self, job_id: str) -> str:  # hash community_id -> why its LLM report failed
        return f"{self.p}job:{job_id}:report_errors"

    # llm
    def llm_cache(self, digest: str) -> str:
        return f"{self.p}llmcache:{digest}"

    def usage_stream(self) -> str:
        return f"{self.p}usage"

    # vectors
    def vectors(self, kind: str) -> str:  # hash id -> float32 bytes: the layout before the row blocks, read to move it
        return f"{self.p}vec:{kind}"

    def vector_rows(self, kind: str) -> str:  # hash id -> row number in the blocks (``redis_vectors``)
        return f"{self.p}vecrow:{kind}"

    def vector_layout(self, kind: str) -> str:  # hash: row bytes, rows per block, rows allocated
        return f"{self.p}veclayout:{kind}"

    def vector_free(self, kind: str) -> str:  # list of the rows deleted vectors left, reused first
        return f"{self.p}vecfree:{kind}"

    def vector_block(self, kind: str, block: int) -> str:  # string: fixed-size float16 rows, one after another
        return f"{self.p}vecblk:{kind}:{block}"

    def vector_meta(self, kind: str) -> str:  # hash id -> json payload
        return f"{self.p}vecmeta:{kind}"

    def vector_version(self, kind: str) -> str:
        return f"{self.p}vecver:{kind}"

    def index_snapshot(self, kind: str) -> str:  # hash: a query index's snapshot ("walk", "edges", "chunks", ...)
        return f"{self.p}idxsnap:{kind}"

    def synonyms(self) -> str:  # hash entity name -> json [[other name, cosine], ...] (synonym edges)
        return f"{self.p}synonyms"

    def synonyms_version(self) -> str:  # bumped whenever the synonym edges change (the walk index is rebuilt)
        return f"{self.p}synonyms_version"

    def vector_embedder(self) -> str:  # hash: the embedder that made the tenant's vectors (name, dims, state)
        return f"{self.p}vecembedder"

    # quotas, ledger, idempotency, rate limits
    def quota_rate(self) -> str:  # the tenant's request-rate window
        return f"{self.p}quota:rate"

    def quota_active(self) -> str:  # the tenant's jobs in flight
        return f"{self.p}quota:active"

    def quota_recount(self) -> str:  # set while a full count of the jobs in flight ran recently (its TTL)
        return f"{self.p}quota:recount"

    def ledger_cursor(self) -> str:  # the usage stream id the ledger has folded up to
        return f"{self.p}ledger:cursor"

    def ledger_tokens(self) -> str:  # hash period -> tokens and cost booked
        return f"{self.p}ledger:tokens"

    def idempotency(self, scope: str, digest: str) -> str:  # a submission's Idempotency-Key record
        return f"{self.p}idem:{scope}:{digest}"

    def ratelimit(self, model: str) -> str:  # prefix of the tenant's own LLM rate-limit budget keys
        return f"{self.p}rl:{model}"

    def api_key(self, key_id: str) -> str:  # one API key's record (digest, name, created_at)
        return f"{self.p}apikey:{key_id}"

    def api_key_ids(self) -> str:  # set of the tenant's API key ids
        return f"{self.p}apikeys"

    def tenant_record(self) -> str:  # the tenant record (JSON: name, tier, preset, limits)
        return f"{self.p}tenant"

    # queries
    def query(self, query_id: str) -> str:
        return f"{self.p}query:{query_id}"

    def query_map_results(self, query_id: str) -> str:  # hash group index -> map answer
        return f"{self.p}query:{query_id}:map"

    def query_plan(self, query_id: str) -> str:  # GlobalPlan json of a global query in flight
        return f"{self.p}query:{query_id}:plan"

    def query_partial(self, query_id: str) -> str:  # QueryResult json before the reduce
        return f"{self.p}query:{query_id}:result"

    def query_map_times(self, query_id: str) -> str:  # hash group index -> json [start, end, worker]
        return f"{self.p}query:{query_id}:maptimes"

    def query_events(self, query_id: str) -> str:  # pub/sub: a query's stream events "seq json" (token, map)
        return f"{self.p}query:{query_id}:events"

    def query_event_log(self, query_id: str) -> str:  # list of those events (json), replayed to late followers
        return f"{self.p}query:{query_id}:eventlog"

    def query_followed(self, query_id: str) -> str:  # "1" once a stream follows the query: tokens go out one by one
        return f"{self.p}query:{query_id}:followed"


def tenant_prefix(tenant: str) -> str:
    """``gf:t:{acme}:``: the hash tag ``{acme}`` puts every key of the tenant in one cluster slot."""
    return f"{ROOT}:t:{{{tenant}}}:"


LEGACY_TENANT_KEY = re.compile(rf"^{ROOT}:t:([^:{{}}]+):")  # "gf:t:acme:..." before the hash tag (layout 1)


def legacy_to_tagged(key: str) -> str | None:
    """The hash-tagged name of a key written before layout 2 (``gf:t:acme:x`` -> ``gf:t:{acme}:x``)."""
    m = LEGACY_TENANT_KEY.match(key)
    return f"{tenant_prefix(m.group(1))}{key[m.end():]}" if m else None


def layout_key() -> str:  # the key layout version of this Redis ("2": hash-tagged tenants)
    return f"{ROOT}:layout"


# ---- the broker's keys (kombu's Redis transport names them; listed here so every key has one home)
BROKER_UNACKED = "unacked"  # hash: messages delivered to a worker and not acked yet (acks_late)
BROKER_UNACKED_INDEX = "unacked_index"  # zset: delivery tag -> delivery (or last lease renewal) time
_PRIORITY_SEP = "\x06\x16"  # kombu's priority sub-queues are "<queue>\x06\x16<n>"
_PRIORITY_STEPS = (3, 6, 9)  # graphfleet sends no priorities (n=0 is the bare name), kombu may still use these


def broker_queue_keys(queue: str) -> list[str]:
    """The lists holding ``queue``'s waiting messages: the queue itself, then its priority sub-queues."""
    return [queue, *(f"{queue}{_PRIORITY_SEP}{n}" for n in _PRIORITY_STEPS)]


def tenants_key() -> str:
    return f"{ROOT}:tenants"


def active_jobs_key() -> str:  # zset "tenant\x1fjob_id" -> created_at, for jobs not yet ended (ids only)
    return f"{ROOT}:active_jobs"


def ratelimit_prefix(model: str) -> str:  # the global LLM rate limiter's keys of one model (no tenant data)
    return f"{ROOT}:rl:{{{model}}}"  # hash tag: one script reads and writes all of a budget's keys


def ratelimit_keys(prefix: str) -> list[str]:  # a rate-limit budget's keys: window zset, its hash, sum, bucket
    return [f"{prefix}:z", f"{prefix}:h", f"{prefix}:sum", f"{prefix}:bucket"]


def ratelimit_sum_key(prefix: str) -> str:
    return ratelimit_keys(prefix)[2]


def ratelimit_cooldown_key(model: str) -> str:  # set after a provider 429: every worker backs off
    return f"{ratelimit_prefix(model)}:cooldown"


def api_keys_key() -> str:  # hash api-key digest -> tenant
    return f"{ROOT}:apikeys"


def recluster_due_key() -> str:  # zset tenant -> when a job took its graph past the clustering bound (ids only)
    return f"{ROOT}:recluster_due"


def watchdog_lock_key() -> str:
    return f"{ROOT}:watchdog:lock"


def watchdog_key() -> str:  # hash "tenant\x1fjob_id" -> json {fingerprint, since, idle}; plus :lock
    return f"{ROOT}:watchdog"


def index_updated_channel() -> str:  # pub/sub, not a key: a tenant id per message when its index changed (no data)
    return f"{ROOT}:index_updated"


def consumers_key(queue: str) -> str:  # zset worker hostname -> last heartbeat (Redis TIME) of a queue's consumers
    return f"{ROOT}:consumers:{queue}"


# ---- backups (graphfleet_cli/backup.py): every graphfleet key but the short-lived coordination ones
BACKUP_PATTERN = f"{ROOT}:*"  # SCAN MATCH; the broker's queues are not graphfleet state and are not backed up
# locks, rate-limit windows, consumer heartbeats, and the warm-up hints and acknowledgements (re-announced by a
# restore, probed again)
_TRANSIENT = re.compile(
    rf"^{ROOT}:(rl:|consumers:|watchdog:lock$|layout:lock$|index_updated_at$|embedder_lexical:"
    rf"|t:[^:]+:(lock:|rl:|quota:rate$|job:[^:]+:warmed$))")


def index_updated_key() -> str:  # zset tenant -> time of its last index update (ids only, no tenant data)
    return f"{ROOT}:index_updated_at"


def embedder_lexical_key(embedder: str) -> str:  # "1" when the embedder hashes words (probed once per deployment)
    return f"{ROOT}:embedder_lexical:{embedder}"


def is_transient_key(key: str) -> bool:  # locks, rate-limit windows, consumer heartbeats: never restored
    return bool(_TRANSIENT.match(key))


def tenant_of_key(key: str) -> str | None:  # the tenant of a "gf:t:{tenant}:..." key
    if not key.startswith(f"{ROOT}:t:{{") or key.count(":") < 3:
        return None
    tag = key.split(":", 3)[2]
    return tag[1:-1] if tag.endswith("}") else None
