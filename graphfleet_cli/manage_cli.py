"""The management verbs: ``tenants``, ``keys``, ``jobs``, ``documents``, ``usage`` (and ``completion``).

Each prints one JSON object with ``--json`` (lists: ``{"items": [...], ...}``), else ``key: value`` lines or one
line per item. Exit codes: docs/client.md#exit-codes.
"""

from __future__ import annotations

import argparse
import json

from graphfleet_cli.errors import EXIT_USAGE, CliError
from graphfleet_cli.manage import backend
from graphfleet_cli.output import emit, print_json

TENANT_HELP = "tenant id (local stack only; with GRAPHFLEET_URL the tenant is the API key's)"
JOB_STATUSES = ["queued", "running", "succeeded", "failed", "canceled"]
DOC_STATUSES = ["pending", "processing", "processed", "failed"]


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _page_flags(p: argparse.ArgumentParser, statuses: list[str]) -> None:
    p.add_argument("--status", choices=statuses, help="only items in this status")
    p.add_argument("--offset", type=_count(0, 2**31 - 1), default=0)
    p.add_argument("--limit", type=_count(1, 500), default=50, help="items a page (1 to 500)")


def _count(low: int, high: int):
    """An argparse type: a whole number in [low, high] (else exit 2, an invalid command line)."""
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {raw!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    parse.__name__ = "number"
    return parse


def _verb(sub, name: str, handler, help_text: str, tenant: bool = False) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(handler=handler)
    if tenant:
        p.add_argument("--tenant", default=None, help=TENANT_HELP)
    _json_flag(p)
    return p


def add_parsers(sub) -> None:
    tenants = sub.add_parser("tenants", help="create, list and show tenants (admin)").add_subparsers(
        dest="action", required=True, metavar="{create,list,show}")
    create = _verb(tenants, "create", cmd_tenants_create, "create a tenant")
    create.add_argument("id", nargs="?", help="tenant id (generated when omitted)")
    create.add_argument("--name", default="")
    create.add_argument("--tier", default=None)
    create.add_argument("--preset", choices=["default", "balanced", "low_memory"], default=None)
    create.add_argument("--limit", action="append", default=[], metavar="KEY=VALUE",
                        help="a quota, e.g. requests_per_minute=120 (repeatable)")
    _verb(tenants, "list", cmd_tenants_list, "list tenants")
    _verb(tenants, "show", cmd_tenants_show, "one tenant").add_argument("tenant_id")

    keys = sub.add_parser("keys", help="issue and revoke a tenant's API keys (admin)").add_subparsers(
        dest="action", required=True, metavar="{create,revoke}")
    kc = _verb(keys, "create", cmd_keys_create, "issue an API key (printed once)")
    kc.add_argument("tenant_id")
    kc.add_argument("--name", default="")
    kr = _verb(keys, "revoke", cmd_keys_revoke, "revoke an API key")
    kr.add_argument("tenant_id")
    kr.add_argument("key_id")

    jobs = sub.add_parser("jobs", help="list, show and cancel jobs").add_subparsers(
        dest="action", required=True, metavar="{list,show,cancel}")
    jl = _verb(jobs, "list", cmd_jobs_list, "a tenant's jobs, newest first", tenant=True)
    _page_flags(jl, JOB_STATUSES)
    jl.add_argument("--kind", choices=["ingest", "delete", "recluster", "query"])
    _verb(jobs, "show", cmd_jobs_show, "one job: status, progress, failures, usage", tenant=True).add_argument("job_id")
    _verb(jobs, "cancel", cmd_jobs_cancel, "cancel a job (finished work is kept)", tenant=True).add_argument("job_id")

    docs = sub.add_parser("documents", help="list, show and delete documents").add_subparsers(
        dest="action", required=True, metavar="{list,show,delete}")
    _page_flags(_verb(docs, "list", cmd_documents_list, "a tenant's documents, oldest first", tenant=True),
                DOC_STATUSES)
    _verb(docs, "show", cmd_documents_show, "one document", tenant=True).add_argument("doc_id")
    dd = _verb(docs, "delete", cmd_documents_delete, "delete a document and what it contributed", tenant=True)
    dd.add_argument("doc_id")
    dd.add_argument("--wait", action="store_true", help="wait for the deletion job to finish")

    usage = _verb(sub, "usage", cmd_usage, "a tenant's LLM usage (calls, tokens, cost)", tenant=True)
    usage.add_argument("--from", dest="start", metavar="WHEN", help="ISO date/datetime (UTC) or unix seconds")
    usage.add_argument("--to", dest="end", metavar="WHEN", help="inclusive; a date covers that whole day")
    usage.add_argument("--group-by", choices=["day", "model", "stage"])

    comp = sub.add_parser("completion", help="print the shell completion script (eval it in your shell rc)")
    comp.add_argument("shell", choices=["bash", "zsh", "fish", "tcsh"], nargs="?", default="bash")
    comp.set_defaults(handler=cmd_completion)


# ------------------------------------------------------------------ output
def _rows(items: list[dict], columns: list[str]) -> None:
    if not items:
        print("(none)")
        return
    for item in items:
        print("  ".join(f"{c}={_cell(item.get(c))}" for c in columns))


def _cell(value) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)


def _page(page: dict, columns: list[str], as_json: bool) -> None:
    if as_json:
        print_json(page)
        return
    _rows(page["items"], columns)
    shown = len(page["items"])
    print(f"{shown} of {page.get('total', shown)} (offset {page.get('offset', 0)})")


def _run(args, admin: bool, fn) -> int:
    be = backend(admin)
    try:
        return fn(be) or 0
    finally:
        be.close()


# ------------------------------------------------------------------ tenants and keys
def cmd_tenants_create(args) -> int:
    limits = {}
    for item in args.limit:
        key, _, raw = item.partition("=")
        try:
            limits[key.strip()] = json.loads(raw)
        except ValueError:
            raise CliError("invalid_argument", f"--limit {item}: expected KEY=NUMBER", EXIT_USAGE) from None
    fields = {"id": args.id, "name": args.name, "tier": args.tier, "preset": args.preset, "limits": limits or None}
    return _run(args, True, lambda be: emit(be.create_tenant(**fields), args.json))


def cmd_tenants_list(args) -> int:
    def show(be):
        items = be.list_tenants()
        _page({"items": items, "total": len(items), "offset": 0}, ["id", "name", "tier", "preset"], args.json)

    return _run(args, True, show)


def cmd_tenants_show(args) -> int:
    return _run(args, True, lambda be: emit(be.get_tenant(args.tenant_id), args.json))


def cmd_keys_create(args) -> int:
    return _run(args, True, lambda be: emit(be.create_key(args.tenant_id, args.name), args.json))


def cmd_keys_revoke(args) -> int:
    return _run(args, True, lambda be: emit(be.revoke_key(args.tenant_id, args.key_id), args.json))


# ------------------------------------------------------------------ jobs, documents, usage
def cmd_jobs_list(args) -> int:
    return _run(args, False, lambda be: _page(
        be.list_jobs(be.tenant(args.tenant), args.offset, args.limit, args.status, args.kind),
        ["job_id", "kind", "status", "stage"], args.json))


def cmd_jobs_show(args) -> int:
    return _run(args, False, lambda be: emit(be.get_job(be.tenant(args.tenant), args.job_id), args.json))


def cmd_jobs_cancel(args) -> int:
    return _run(args, False, lambda be: emit(be.cancel_job(be.tenant(args.tenant), args.job_id), args.json))


def cmd_documents_list(args) -> int:
    return _run(args, False, lambda be: _page(
        be.list_documents(be.tenant(args.tenant), args.offset, args.limit, args.status),
        ["id", "status", "chunks", "title"], args.json))


def cmd_documents_show(args) -> int:
    return _run(args, False, lambda be: emit(be.get_document(be.tenant(args.tenant), args.doc_id), args.json))


def cmd_documents_delete(args) -> int:
    def delete(be) -> int:
        tenant = be.tenant(args.tenant)
        out = be.delete_document(tenant, args.doc_id)
        if not args.wait:
            emit(out, args.json)
            return 0
        job = be.wait_job(tenant, out["job_id"])
        emit(job, args.json)
        return 0 if job["status"] == "succeeded" else 1

    return _run(args, False, delete)


def cmd_usage(args) -> int:
    return _run(args, False, lambda be: emit(be.usage(be.tenant(args.tenant), args.start, args.end,
                                                      args.group_by), args.json))


def cmd_completion(args) -> int:
    import argcomplete

    print(argcomplete.shellcode(["graphfleet"], shell=args.shell))
    return 0
