"""Implementations of the CLI verbs."""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

from graphfleet_cli.local_client import LocalClient, collect_files, ingest_summary
from graphfleet_cli.output import emit
from graphfleet_cli.stack import Stack, resolve_redis_url
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

    client = HttpClient(url, os.environ.get(API_KEY_ENV, ""))
    tenant = client.tenant()
    if args.tenant and args.tenant != tenant:
        client.close()
        raise SystemExit(f"--tenant {args.tenant} does not match the API key's tenant {tenant!r} "
                         f"(with GRAPHFLEET_URL the tenant comes from {API_KEY_ENV})")
    return client, tenant


def cmd_up(args) -> int:
    settings, extra = get_settings(), {}
    gateway_port = _gateway_port(args.port)
    if gateway_port is not None and not settings.admin_key and settings.env == "development":
        extra["GRAPHFLEET_ADMIN_KEY"] = "adm-" + secrets.token_urlsafe(24)
    stack = Stack(worker_concurrency=args.concurrency, gateway_port=gateway_port, extra_env=extra)
    try:
        stack.start()
    except RuntimeError as exc:
        print(f"graphfleet up failed: {exc}", file=sys.stderr)
        return 1
    print(f"graphfleet stack up: redis {stack.redis_url}", flush=True)
    if stack.gateway_url:
        print(f"gateway: {stack.gateway_url} (API reference: docs/api.md)", flush=True)
        if extra:
            print(f"gateway admin key (development, generated): {extra['GRAPHFLEET_ADMIN_KEY']}", flush=True)
    print("Ctrl-C to stop", flush=True)
    try:
        while True:
            for name, proc in stack.procs:
                if proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping", file=sys.stderr)
                    return 1
            time.sleep(1)
    except KeyboardInterrupt:
        print("stopping...", flush=True)
    finally:
        stack.stop()
    return 0


def _gateway_port(port: int | None) -> int | None:
    try:
        import api_gateway.app  # noqa: F401
    except ImportError:
        return None
    return port


def cmd_ingest(args) -> int:
    client, tenant = _client(args)
    started = time.perf_counter()
    submitted = client.ingest_files(tenant, collect_files(args.paths))
    if not args.wait:
        emit({**submitted, "status": "queued"}, args.json)
        return 0
    view = client.wait(tenant, submitted["job_id"], progress=sys.stderr.isatty())
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


def cmd_demo(args) -> int:
    settings = get_settings()
    data_dir = Path(settings.data_dir) / "demo"
    print(f"LLM: {settings.llm_base_url or 'none configured (LLM-free extraction, extractive answers)'}",
          file=sys.stderr)
    with Stack(data_dir=data_dir) as stack:
        client = LocalClient(stack.redis_url)
        started = time.perf_counter()
        submitted = client.ingest_files(args.tenant, [SAMPLE])
        view = client.wait(args.tenant, submitted["job_id"], progress=sys.stderr.isatty())
        summary = ingest_summary(view, client.stats(args.tenant), time.perf_counter() - started)
        print("== ingestion ==")
        emit(summary, args.json)
        try:
            from graphfleet_cli.query_client import demo_queries
        except ImportError:
            return 0 if summary["status"] == "succeeded" else 1
        demo_queries(client, args.tenant, DEMO_QUERIES, args.json)
    return 0 if summary["status"] == "succeeded" else 1

