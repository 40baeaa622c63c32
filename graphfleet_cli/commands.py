"""Implementations of the CLI verbs."""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path

from graphfleet_cli.errors import tenant_mismatch
from graphfleet_cli.local_client import LocalClient, collect_files, ingest_summary
from graphfleet_cli.output import emit
from graphfleet_cli.query_client import demo_queries
from graphfleet_cli.stack import Stack, parse_processes, resolve_redis_url
from graphfleet_cli.stack_guard import StackStartRefused
from shared.config import get_settings

SAMPLE = Path(__file__).parent / "sample" / "christmas_carol.txt"
DEMO_QUERIES = [
    ("local", "Who is Ebenezer Scrooge and how does he change?"),
    ("global", "What are the main themes of the story?"),
    ("naive", "What happens on Christmas morning?"),
    ("hybrid", "How is Bob Cratchit related to Scrooge?"),
    ("causal", "Why does Scrooge change his ways?"),
]


def _tenant(args) -> str:
    return args.tenant or get_settings().default_tenant


def _client(args):
    """(client, tenant): the gateway when ``GRAPHFLEET_URL`` is set (tenant = the API key's), else the
    local stack through Redis and the queues."""
    url = get_settings().url
    if not url:
        return LocalClient(resolve_redis_url()), _tenant(args)
    from graphfleet_cli.http_client import API_KEY_ENV, HttpClient

    client = HttpClient(url, get_settings().api_key or "")
    tenant = client.tenant()
    if args.tenant and args.tenant != tenant:
        client.close()
        raise tenant_mismatch(args.tenant, tenant, API_KEY_ENV)
    return client, tenant


def cmd_up(args) -> int:
    settings, extra = get_settings(), {}
    gateway_port = _gateway_port(args.port)
    if gateway_port is not None and not settings.admin_key and settings.env == "development":
        extra["GRAPHFLEET_ADMIN_KEY"] = "adm-" + secrets.token_urlsafe(24)
    try:
        processes = parse_processes(getattr(args, "processes", None) or settings.workers.processes)
    except ValueError as exc:
        print(f"graphfleet: usage: {exc}", file=sys.stderr)
        return 2
    stack = Stack(worker_concurrency=args.concurrency, gateway_port=gateway_port, extra_env=extra,
                  processes=processes)
    try:
        stack.start()
    except StackStartRefused as exc:  # another stack on this data directory, or the port taken: nothing started
        print(f"graphfleet: {exc.code}: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"graphfleet: start_failed: {exc}", file=sys.stderr)
        return 1
    try:  # a signal right after the banner still stops the stack
        print_stack_urls(stack, extra.get("GRAPHFLEET_ADMIN_KEY"))
        print("Ctrl-C to stop", flush=True)
        while stack.failure is None:  # the stack's supervisor restarts exited processes (graphfleet_cli/stack.py)
            time.sleep(1)
        print(f"{stack.failure}; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping...", flush=True)
    finally:
        stack.stop()
    print(f"stopped; data kept in {stack.data_dir}", flush=True)
    return 0


def print_stack_urls(stack: Stack, admin_key: str | None = None) -> None:
    """Where everything of a running stack is: Redis, the gateway, its docs and metrics, the data directory."""
    lines = ["graphfleet stack up",
             f"  redis:      {redact_url(stack.redis_url)}"
             + (f" (embedded; data in {stack.redis.data_dir})" if stack.redis else " (GRAPHFLEET_REDIS_URL)")]
    if stack.gateway_url:
        lines += [f"  gateway:    {stack.gateway_url}",
                  f"  API docs:   {stack.gateway_url}/docs (OpenAPI: {stack.gateway_url}/openapi.json)",
                  f"  metrics:    {stack.gateway_url}/metrics",
                  f"  health:     {stack.gateway_url}/healthz, {stack.gateway_url}/readyz"]
        if admin_key:
            lines.append(f"  admin key:  {admin_key} (development, generated; set GRAPHFLEET_ADMIN_KEY to choose it)")
    lines.append(f"  LLM:        {llm_line(stack.settings)}")
    workers = ", ".join(f"{name} {p.processes}x{p.concurrency}" for name, p in stack.plan.items())
    lines += [f"  workers:    {workers} (processes x slots; --processes auto|N)",
              f"  data dir:   {stack.data_dir}", f"  logs:       {stack.log_dir}"]
    print("\n".join(lines), flush=True)


def llm_line(settings) -> str:
    """Which LLM the stack's workers call, or that they run without an LLM, and which embedder they use."""
    from shared.infra.llm.embedding import embedder_summary

    embeddings = f"embeddings: {embedder_summary(settings)}"
    if not settings.llm_enabled:
        return (f"none: LLM-free (rule-based extraction, extractive answers); {embeddings}; "
                "set GRAPHFLEET_LLM_BASE_URL to use an LLM")
    return f"{redact_url(settings.llm_base_url)} (model {settings.llm_model}); {embeddings}"


def redact_url(url: str | None) -> str:
    """A URL without its password (``redis://:secret@host`` -> ``redis://:***@host``)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url or "")
    if not parts.password:
        return url or ""
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _gateway_port(port: int | None) -> int | None:
    try:
        import api_gateway.app  # noqa: F401
    except ImportError:
        return None
    return port


def cmd_ingest(args) -> int:
    files = collect_files(args.paths)
    client, tenant = _client(args)
    started = time.perf_counter()
    submitted = client.ingest_files(tenant, files, atomic=args.atomic)
    for refused in submitted.get("refused") or []:
        print(f"graphfleet: refused: {refused['cause']}", file=sys.stderr)
    if not args.wait:
        emit({**submitted, "status": "queued"}, args.json)
        return 0
    job_id = submitted["job_id"]  # said before the wait, so an interrupted wait can be picked up again
    print(f"job {job_id} queued; waiting (graphfleet jobs show {job_id} to look at it later)", file=sys.stderr,
          flush=True)
    view = client.wait(tenant, job_id, progress=sys.stderr.isatty())
    summary = ingest_summary(view, client.stats(tenant), time.perf_counter() - started)
    emit(summary, args.json)
    return 0 if summary["status"] == "succeeded" else 1


def cmd_stats(args) -> int:
    client, tenant = _client(args)
    emit(client.stats(tenant), args.json)
    return 0


def cmd_export(args) -> int:
    client, tenant = _client(args)
    data = client.export_graphml(tenant)
    Path(args.graphml).write_bytes(data)
    print(f"wrote {len(data)} bytes to {args.graphml}")
    return 0


def cmd_query(args) -> int:
    from graphfleet_cli.query_client import run_query_command

    client, tenant = _client(args)
    return run_query_command(args, client, tenant)


def _say(message: str) -> None:
    """A progress line of the demo, on stderr (stdout stays the results, one JSON object a line with --json)."""
    print(f"graphfleet demo: {message}", file=sys.stderr, flush=True)


def cmd_demo(args) -> int:
    settings = get_settings()
    data_dir = Path(settings.data_dir) / "demo"
    _say(f"LLM: {llm_line(settings)}")
    _say(f"data directory: {data_dir} (Redis data and logs; kept after the demo, delete it to start afresh)")
    _say("starting the stack (Redis and one worker process per queue group)...")
    try:
        stack = Stack(data_dir=data_dir).start()
    except StackStartRefused as exc:  # a demo already running on this data directory
        print(f"graphfleet: {exc.code}: {exc}", file=sys.stderr)
        return 1
    try:
        _say(f"stack up: redis {redact_url(stack.redis_url)}, logs in {stack.log_dir}")
        client = LocalClient(stack.redis_url)
        started = time.perf_counter()
        _say(f"ingesting {SAMPLE.name} as tenant {args.tenant!r}...")
        submitted = client.ingest_files(args.tenant, [SAMPLE])
        view = client.wait(args.tenant, submitted["job_id"], progress=sys.stderr.isatty())
        summary = ingest_summary(view, client.stats(args.tenant), time.perf_counter() - started)
        _say(f"ingestion {summary['status']} in {summary['seconds']} s")
        if not args.json:  # --json: stdout is one JSON object a line
            print("== ingestion ==")
        emit(summary, args.json)
        _say(f"querying ({', '.join(mode for mode, _ in DEMO_QUERIES)})...")
        demo_queries(client, args.tenant, DEMO_QUERIES, args.json)
        client.close()
    finally:
        _say("stopping the stack...")
        stack.stop()
    _say(f"stopped; data kept in {data_dir}")
    return 0 if summary["status"] == "succeeded" else 1



def _redis_for_admin():
    from shared.infra.redis.conn import connect

    url = resolve_redis_url()
    return connect(url), url


def cmd_backup(args) -> int:
    from graphfleet_cli.backup import backup

    redis, url = _redis_for_admin()
    result = backup(redis, Path(args.out), redact_url(url))
    if result["active_jobs"]:
        print(f"graphfleet backup: warning: {result['active_jobs']} job(s) were running; their tenants' keys "
              "were copied one at a time, not as one snapshot (back up while no job runs)", file=sys.stderr)
    summary = {k: result[k] for k in ("file", "keys", "payload_bytes", "redis_version", "source", "active_jobs")}
    if args.out == "-":  # stdout is the backup itself
        print(json.dumps(summary), file=sys.stderr)
    else:
        emit(summary, args.json)
    return 0


def cmd_restore(args) -> int:
    from graphfleet_cli.backup import restore

    redis, _url = _redis_for_admin()
    emit(restore(redis, Path(args.file), wipe_first=args.wipe), args.json)
    return 0
