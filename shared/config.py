"""Typed settings, built by :func:`get_settings` (never at import time).

Flat contract names (``GRAPHFLEET_LLM_BASE_URL`` ...) are top-level fields; per-stage
sections are nested models set with a double underscore, e.g.
``GRAPHFLEET_CHUNKING__SIZE_TOKENS=1024``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.domain.retrieval.synonyms import SynonymPolicy


class ChunkingSettings(BaseModel):
    size_tokens: int = Field(1200, ge=16)
    overlap_tokens: int = Field(100, ge=0)
    by_separators: bool = False
    separators: list[str] = ["\n\n", "\n", ". ", " "]
    max_document_bytes: int = 20_000_000
    max_original_bytes: int = Field(50_000_000, ge=1)  # an uploaded PDF / HTML / DOCX file, kept with its document


class ExtractionSettings(BaseModel):
    strategy: str = Field("auto", pattern="^(auto|llm|fast)$")
    max_gleaning: int = Field(1, ge=0, le=5)
    entity_types: list[str] = ["organization", "person", "geo", "event", "concept"]
    # cap on each extraction and gleaning answer (the calls' max_tokens): a runaway answer stops there, its cut
    # last record is dropped with a warning and gleaning asks for what was missed; 0: no cap (the model's own
    # limit; the rate limiter then reserves its running estimate of an answer instead of the cap)
    max_tokens: int = Field(0, ge=0)
    fast_max_phrase_words: int = 4
    fast_min_mentions: int = 2


class MergeSettings(BaseModel):
    """A key's description is summarised by the LLM once it holds ``force_llm_summary_on_merge`` parts or more than
    ``summary_trigger_tokens`` tokens; the summary is asked for in ``summary_length_recommended`` tokens (LightRAG's
    600 of 1200), so a summarised row takes new parts until they add about as much again before it is summarised
    anew, instead of once per batch that names it. ``summary_max_tokens`` caps a description kept without an LLM.
    ``summary_trigger_spread`` moves each row's part count by up to that fraction of ``force_llm_summary_on_merge``
    either way (8 parts: 6 to 10), the same for the same row and parts: rows that gain parts in step (a tenant
    ingesting revisions or copies of the same documents) no longer all cross it in one batch."""

    force_llm_summary_on_merge: int = 8
    summary_trigger_spread: float = Field(0.25, ge=0.0, lt=1.0)
    summary_max_tokens: int = 1200
    summary_context_size: int = 12000
    summary_trigger_tokens: int = 1200
    summary_length_recommended: int = Field(600, ge=16)
    # few, large batches: the batches holding LLM summaries run side by side, not queued behind each other
    entities_per_task: int = 1000
    summary_concurrency: int = 16  # summaries of one merge batch in flight at once


class ClusterSettings(BaseModel):
    """Leiden communities. ``incremental_max_growth`` bounds how stale they may get: a job whose new and changed
    entities and relations, added to those of the jobs clustered incrementally since the last whole-graph Leiden,
    stay within this fraction of the graph's size (entities + relations) at that Leiden is clustered incrementally
    (``shared.domain.incremental_clustering``: new entities join their strongest-linked clustered neighbour's
    communities, the rest are clustered among themselves; only the communities touched are rewritten and
    reported); past it, or when the job removed an entity or a relation, the whole graph is clustered again.
    So every community structure in use comes from a whole-graph Leiden of at least ``1 / (1 + growth)`` of the
    graph, and a tenant's full re-clusterings come at geometrically spaced sizes. 0 always clusters the whole
    graph.

    A job that takes the graph past that bound does not wait for the whole-graph Leiden and the reports it moves:
    with ``recluster_quiet_s`` > 0 it is clustered incrementally like the others and the tenant is marked due; a
    ``recluster`` job (``shared.pipeline.recluster``) clusters the whole graph once the tenant has had no ingestion
    running for ``recluster_quiet_s``, or, with none running, ``recluster_max_delay_s`` after it was marked; a tenant
    still ingesting then is clustered whole by the next cluster stage of its own jobs (a recluster job never runs
    beside an ingestion of its tenant). So the communities may be staler than the bound for at most
    ``recluster_max_delay_s`` (and one job's run). A removal still clusters the whole graph in its own job.
    ``recluster_quiet_s`` 0: the job that crosses the bound clusters the whole graph itself."""

    max_cluster_size: int = Field(10, ge=2)
    seed: int = 0xDEADBEEF
    max_levels: int = 6
    incremental_max_growth: float = Field(0.5, ge=0.0)
    recluster_quiet_s: float = Field(30.0, ge=0.0)
    recluster_max_delay_s: float = Field(900.0, ge=0.0)


class ReportSettings(BaseModel):
    max_input_tokens: int = 12000
    max_output_tokens: int = Field(0, ge=0)  # cap on each LLM report answer (the call's max_tokens); 0: no cap
    # LLM reports per task, asked side by side: a task has a fixed CPU cost of its own (delivery, bookkeeping,
    # reads and writes), paid once for all of them; a task that is killed asks its reports again
    communities_per_task: int = 8
    extractive_per_task: int = 64  # communities reported without an LLM call, per task
    # communities smaller than this get an extractive report (no LLM call); 1 = LLM for every community
    min_llm_members: int = 3
    # a report stands for its community while the community's members and links overlap those it was written from
    # by at least 1 - reuse_max_drift (Jaccard) and their descriptions grew by at most reuse_max_text_growth; a
    # clustering after a removal (a deleted document, a re-ingested one) reuses only identical inputs' reports.
    # 0 drift: a report is written again whenever its input changed at all
    reuse_max_drift: float = Field(0.1, ge=0.0, le=0.5)
    reuse_max_text_growth: float = Field(0.25, ge=0.0)


class EmbeddingSettings(BaseModel):
    # which embedder (GRAPHFLEET_EMBEDDING__PROVIDER, a contract): "openai" (the OpenAI-compatible endpoint at
    # GRAPHFLEET_LLM_BASE_URL, model GRAPHFLEET_EMBEDDING_MODEL), "local" (wordllama's 256-dimension model,
    # shipped in its wheel: knows meaning, no network, no key) or "hashing" (hashed words, lexical only);
    # unset: "openai" when an endpoint is configured, else "local"
    provider: Literal["local", "openai", "hashing"] | None = None
    dim: int = 256  # the hashing embedder's dimensions (the local model has its own: 256)
    batch_size: int = 64
    # synonym edges for the graph walk (HippoRAG 2's synonymy edges): entities whose name vectors reach this cosine
    # are linked, at most ``synonym_neighbours`` per entity. None: off (the default, chosen on the public dev sets
    # with the local model, where near names are as often different entities as variants: docs/benchmarks.md).
    # On, the index stage also embeds each entity's name; off again, the next ingestion forgets the edges.
    synonym_threshold: float | None = Field(None, gt=0.0, le=1.0)
    synonym_neighbours: int = Field(5, ge=1, le=100)

    def synonym_policy(self) -> SynonymPolicy | None:
        if self.synonym_threshold is None:
            return None
        return SynonymPolicy(self.synonym_threshold, self.synonym_neighbours)


class WorkerSettings(BaseModel):
    llm_concurrency: int = 64  # threads per LLM-bound worker process: its tasks mostly wait on the LLM
    cpu_concurrency: int = 2
    # worker processes per queue group that ``graphfleet up`` starts: "auto" (from the cores; see
    # graphfleet_cli.stack.plan_workers) or a count per group; ``graphfleet up --processes`` overrides it
    processes: str = "auto"
    # workers/lease.py: a live worker renews the lease of each message it holds several times per
    # lease_renew_interval_s (a long task is not redelivered) and puts back the messages whose lease is two
    # intervals + 2 s old (a dead worker's, ~32 s); the visibility timeout is the last resort, no worker alive
    visibility_timeout_s: int = 120
    lease_renew_interval_s: float = 15.0
    # SIGTERM (REMAP_SIGTERM=SIGQUIT): running tasks get this long to finish, then are requeued at once
    # (Celery's worker_soft_shutdown_timeout); keep below the stop grace period (docs/deployment.md)
    soft_shutdown_timeout_s: float = 30.0
    task_soft_time_limit_s: int = 900
    task_time_limit_s: int = 1200
    max_redeliveries: int = 5
    # job watchdog (shared/pipeline/watchdog.py): how often one worker sweeps the active jobs, and how
    # long a job must make no progress, with none of its messages queued or in flight, before its
    # pending steps are enqueued again; on a Redis broker, where the sweep sees every queued and unacked
    # message, lost_timeout_s instead when shorter (a message lost in the broker's hands: see the watchdog)
    watchdog_interval_s: float = 10.0
    stall_timeout_s: float = 120.0
    lost_timeout_s: float = 20.0
    # consumer heartbeats (workers/heartbeat.py -> graphfleet_queue_consumers): how often each worker
    # publishes the queues it consumes
    heartbeat_interval_s: float = 10.0
    # an ingestion job ends once the query workers that heard its final index update warmed it, or after this
    # long (shared/infra/warmup.await_warm_ups); 0 ends it at once and its first query may meet the warm-up
    warm_wait_s: float = Field(2.0, ge=0)


class QuerySettings(BaseModel):
    # model -> context window, merged over shared.domain.query.budget.MODEL_CONTEXT_LIMITS
    context_limits: dict[str, int] = {}
    # tenant -> preset name ("balanced", "low_memory", "default")
    tenant_presets: dict[str, str] = {}
    # per query worker process: the BM25 indexes and walk graphs it keeps, by their size (least recently
    # used tenants go first; shared.infra.store.bm25_cache)
    index_cache_mb: int = Field(1024, gt=0)
    # the largest snapshot of one of those indexes stored in Redis for cold processes to load instead of building
    # it (one per tenant and index; 0: none stored or read; shared.infra.store.index_snapshots)
    index_snapshot_mb: int = Field(1024, ge=0)
    # a user's query that finds a tenant's index being rebuilt for a newer version (after a batch, on a large
    # tenant: seconds) waits this long in all, then is served the indexes of the version before while the rebuilds
    # go on (shared.infra.store.stale_reads); null: it waits for the rebuilds (every query reads its own writes)
    stale_index_after_s: float | None = Field(1.0, ge=0)
    # memory a query worker process touches before it consumes and reads cold tenants' indexes into (0: none;
    # for hosts that back a VM's memory only when first touched; shared.infra.pretouched)
    pretouch_mb: int = Field(0, ge=0)


class LLMSettings(BaseModel):
    timeout_s: float = 120.0
    max_retries: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    temperature: float = 0.0
    cache_enabled: bool = True
    cache_ttl_s: int = Field(default=7 * 24 * 3600, gt=0)  # LLM answer cache entries expire (bounds Redis memory)
    max_concurrency: int = 32
    # an LLM endpoint that stays unreachable (connection errors, timeouts, 5xx, 429) once a call's retries are spent:
    # the job's step is enqueued again every ``outage_recheck_s`` and the job waits, at most ``outage_wait_s`` in a
    # row, before it fails with the cause; 0 turns the waiting off (the step fails as soon as its retries are spent)
    outage_wait_s: float = Field(default=900.0, ge=0)
    outage_recheck_s: float = Field(default=10.0, gt=0)
    # an idle connection to the API is kept this long (httpx's default 5 s would drop the one the query warm-up
    # opened, and make a query after a quiet spell pay TCP and TLS again); a server closing it first is noticed
    keepalive_s: float = Field(default=60.0, ge=0)
    # USD per 1M tokens: model -> (input, output)
    prices: dict[str, tuple[float, float]] = {}


class JobSettings(BaseModel):
    # An ended ingestion's or deletion's per-chunk bookkeeping (chunk and document sets, planned batches, stage
    # claims: what a resume or the watchdog reads) expires this long after the end; its status view, usage and
    # failures stay (``JobStore``). A late redelivery of its last step still finds it within this time.
    bookkeeping_ttl_s: int = Field(default=24 * 3600, gt=0)


class RateLimitSettings(BaseModel):
    """The global LLM budget shared by every worker on every host (``shared.infra.llm.ratelimit``).

    ``tpm``/``rpm`` map a model to tokens / requests per window; a model without an entry (or 0) is
    not limited. ``tenant_tpm``/``tenant_rpm`` map a tenant to its own budget for each model it
    uses, on top of the model budget. Env: ``GRAPHFLEET_RATELIMIT__TPM='{"gpt-4o-mini": 200000}'``.
    """

    enabled: bool = False
    tpm: dict[str, int] = {}
    rpm: dict[str, int] = {}
    tenant_tpm: dict[str, int] = {}
    tenant_rpm: dict[str, int] = {}
    window_s: float = Field(60.0, gt=0)
    # token bucket: the most a budget admits at once, in seconds of its rate (window_s = no pacing)
    burst_s: float = Field(5.0, gt=0)
    # longest a call waits for budget before failing with cause "rate_limit_wait" (below the soft limit)
    max_wait_s: float = Field(600.0, gt=0)


class LLMModeError(RuntimeError):
    """Outside development with no LLM configured and the LLM-free mode not chosen (``Settings.check_llm_mode``)."""


class Settings(BaseSettings):
    # "null" sets an optional setting to None (``GRAPHFLEET_QUERY__STALE_INDEX_AFTER_S=null``)
    model_config = SettingsConfigDict(
        env_prefix="GRAPHFLEET_", env_nested_delimiter="__", extra="ignore", case_sensitive=False,
        env_parse_none_str="null",
    )

    # Contract names (used by outside scripts; keep them).
    llm_base_url: str | None = None
    llm_api_key: str = "sk-not-set"
    llm_model: str = "gpt-4o-mini"
    summary_model: str | None = None
    embedding_model: str = "text-embedding-3-small"
    redis_url: str | None = None  # the Redis holding graphfleet's state, and Celery's broker unless set apart
    # state apart from the broker (docs/scaling.md): a Redis Cluster is ``redis+cluster://host:port`` (or
    # ``rediss+cluster://``); when set it replaces ``redis_url`` for state, and ``redis_url`` stays the broker
    state_redis_url: str | None = None
    # Celery's broker when not ``redis_url``: ``redis://``/``rediss://``, ``sentinel://`` (Redis Sentinel,
    # master name in ``GRAPHFLEET_BROKER_SENTINEL_MASTER``) or ``amqp://`` (RabbitMQ, quorum queues)
    broker_url: str | None = None
    broker_sentinel_master: str = "graphfleet"
    # TLS for rediss:// URLs (shared.infra.redis.conn.tls_options): CA bundle, and whether the certificate
    # must verify ("required", the default), may ("optional") or is not checked ("none")
    redis_tls_ca_file: str | None = None
    redis_tls_cert_reqs: str = Field("required", pattern="^(required|optional|none)$")
    data_dir: Path = Path.home() / ".graphfleet"
    url: str | None = None
    vector_backend: str = Field("redis", pattern="^(redis|weaviate)$")
    weaviate_url: str | None = None
    weaviate_grpc_port: int = 50051
    weaviate_api_key: str | None = None

    env: str = "development"
    admin_key: str | None = None
    # the server-side secret mixed into every stored API-key hash (HMAC-SHA256), the same on every gateway;
    # outside development the gateway refuses to start without it (api_gateway.state.resolve_api_key_pepper)
    api_key_pepper: str = Field("", repr=False)
    # the tenant API key the CLI sends to the gateway at GRAPHFLEET_URL (the gateway itself never reads it)
    api_key: str | None = Field(None, repr=False)
    default_tenant: str = "default"
    gateway_max_body_bytes: int = 64 * 1024 * 1024  # request body limit (413 before the body is read)
    metrics_tenant_label: bool = False
    # tenants allowed as a metric label (comma-separated in GRAPHFLEET_METRICS_TENANT_ALLOWLIST); others are "other"
    metrics_tenant_allowlist: Annotated[frozenset[str], NoDecode] = frozenset()
    metrics_port: int | None = None  # worker-only hosts: the first worker to bind it serves the host's /metrics
    worker_log_level: str = "WARNING"  # the ``-l`` of the worker processes ``graphfleet up`` starts
    # logs: "text" (default) or "json" (one object per line; observability/log_setup.py); level of the gateway
    log_format: str = Field("text", pattern="^(text|json)$")
    log_level: str = Field("INFO", pattern="^(?i)(debug|info|warning|error|critical)$")
    # OpenTelemetry traces (shared/infra/observability/tracing.py; needs the `otel` extra and the standard OTEL_* env)
    otel_enabled: bool = False
    otel_file: str | None = None  # write spans as JSON lines to this file instead of OTEL_TRACES_EXPORTER
    # when set, GET /metrics on the gateway requires `Authorization: Bearer <token>`
    metrics_token: str | None = None
    # the gateway's ?wait re-reads the status this often in case a completion message was lost (a Redis restart)
    wait_recheck_s: float = Field(1.0, gt=0)
    # outside development, running without an LLM (fast extractor, extractive reports and answers) must be chosen
    # explicitly with GRAPHFLEET_LLM_FREE=true (check_llm_mode)
    llm_free: bool = False

    chunking: ChunkingSettings = ChunkingSettings()
    extraction: ExtractionSettings = ExtractionSettings()
    merge: MergeSettings = MergeSettings()
    cluster: ClusterSettings = ClusterSettings()
    report: ReportSettings = ReportSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    workers: WorkerSettings = WorkerSettings()
    llm: LLMSettings = LLMSettings()
    query: QuerySettings = QuerySettings()
    ratelimit: RateLimitSettings = RateLimitSettings()
    jobs: JobSettings = JobSettings()

    @field_validator("gateway_max_body_bytes", "metrics_port", mode="before")
    @classmethod
    def _unset_when_empty(cls, value, info):
        """An empty variable (``VAR=`` in an env file) means unset: the field's default."""
        return cls.model_fields[info.field_name].default if value == "" else value

    @field_validator("metrics_tenant_allowlist", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        if isinstance(value, str):
            return frozenset(t.strip() for t in value.split(",") if t.strip())
        return value

    @model_validator(mode="after")
    def _state_apart(self) -> Settings:
        """``GRAPHFLEET_STATE_REDIS_URL`` moves the state; the Redis it replaces stays the broker."""
        if self.state_redis_url:
            self.broker_url = self.broker_url or self.redis_url
            self.redis_url = self.state_redis_url
            self.state_redis_url = None  # applied once (model_copy keeps the normalised fields)
        return self

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url)

    def check_llm_mode(self) -> None:
        """Refuse the silent LLM-free fallback outside development: no ``GRAPHFLEET_LLM_BASE_URL`` and no
        ``GRAPHFLEET_LLM_FREE=true`` raises :class:`LLMModeError` (the worker and the gateway exit on it)."""
        if self.env != "development" and not self.llm_enabled and not self.llm_free:
            embeddings = {"local": "the local model, no network", "hashing": "hashed words"}.get(
                self.embedding_provider, self.embedding_provider)
            raise LLMModeError(
                f"GRAPHFLEET_ENV={self.env} and no LLM configured: set GRAPHFLEET_LLM_BASE_URL (and "
                "GRAPHFLEET_LLM_API_KEY), or set GRAPHFLEET_LLM_FREE=true to run without an LLM on purpose "
                "(rule-based extraction, extractive reports and answers: much weaker graphs; embeddings: "
                f"{embeddings}, GRAPHFLEET_EMBEDDING__PROVIDER={self.embedding_provider})")

    @property
    def embedding_provider(self) -> str:
        """The embedder in use: ``embedding.provider`` when set, else "openai" with an endpoint, else "local"."""
        return self.embedding.provider or ("openai" if self.llm_enabled else "local")

    @property
    def effective_summary_model(self) -> str:
        return self.summary_model or self.llm_model

    def answer_cap(self, stage: str) -> int:
        """The ``max_tokens`` of a stage's LLM calls: ``extraction.max_tokens`` for extraction and its gleaning
        (bound as stage ``"extract"``), ``report.max_output_tokens`` for reports; 0 (no cap) otherwise."""
        return {"extract": self.extraction.max_tokens, "report": self.report.max_output_tokens}.get(stage, 0)

    @property
    def extraction_strategy(self) -> str:
        if self.extraction.strategy != "auto":
            return self.extraction.strategy
        return "llm" if self.llm_enabled else "fast"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Build settings from the environment once per process."""
    return Settings()


def reset_settings_cache() -> None:
    get_settings.cache_clear()
