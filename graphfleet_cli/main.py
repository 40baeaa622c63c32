# PYTHON_ARGCOMPLETE_OK
"""``graphfleet`` command line: up, ingest, query, stats, export, demo, backup, restore, llm-simulator, and the
management verbs tenants, keys, jobs, documents, usage (graphfleet_cli/manage_cli.py); completion.

Exit codes (docs/client.md#exit-codes): 0 success; 1 failure (an API or Redis error, the gateway unreachable, a job
or query that failed); 2 invalid command line; 3 not found (no such tenant, key, job, document, or a tenant with no
documents for ``query``); 130 interrupted. Every error is one ``graphfleet: CODE: message`` line on stderr; an
unexpected one is ``graphfleet: internal: ...`` (``--debug`` shows its traceback)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from importlib.metadata import PackageNotFoundError, version

from graphfleet_cli import commands, manage_cli
from graphfleet_cli.errors import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_USAGE, CliError

EXIT_INTERRUPTED = 130
INGEST_HELP = "ingest text (.txt, .md), PDF, HTML and DOCX files, or directories of them"


class Parser(argparse.ArgumentParser):
    """An invalid command line is one ``graphfleet: usage: ...`` line (and exit 2), as every other error."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"graphfleet: usage: {self.prog}: {message} (see {self.prog} --help)\n")


def _version() -> str:
    try:
        return version("graphfleet")
    except PackageNotFoundError:
        return "unknown"


def _add_tenant(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tenant", default=None, help="tenant id (default: GRAPHFLEET_DEFAULT_TENANT or 'default')")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="graphfleet", description="GraphRAG on a fleet of Celery workers.")
    parser.add_argument("--version", action="version", version=f"graphfleet {_version()}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the embedded stack in the foreground")
    up.add_argument("--port", type=int, default=8080, help="gateway port")
    up.add_argument("--concurrency", type=int, default=None, help="threads per LLM-bound worker")
    up.add_argument("--processes", default=None, metavar="auto|N",
                    help="worker processes per queue group: auto (from the machine's cores, the default; "
                         "GRAPHFLEET_WORKERS__PROCESSES) or N of every group")

    ingest = sub.add_parser("ingest", help=INGEST_HELP, description=INGEST_HELP + ". An invalid file (empty, not "
                            "UTF-8, of another type) is refused and named; the others are ingested.")
    ingest.add_argument("paths", nargs="+")
    _add_tenant(ingest)
    ingest.add_argument("--atomic", action="store_true",
                        help="ingest nothing when one file is invalid (by default the valid files are ingested)")
    ingest.add_argument("--wait", action="store_true", help="wait for the job to finish (its id is printed first)")
    ingest.add_argument("--json", action="store_true", help="print one JSON object")

    query = sub.add_parser("query", help="ask a question")
    query.add_argument("text")
    _add_tenant(query)
    query.add_argument("--mode", default="local", choices=["local", "global", "naive", "hybrid", "causal", "graph"])
    query.add_argument("--response-type", default="multiple_paragraphs")
    query.add_argument("--only-context", action="store_true")
    query.add_argument("--max-total-tokens", type=int)
    query.add_argument("--max-entity-tokens", type=int)
    query.add_argument("--max-relation-tokens", type=int)
    query.add_argument("--top-k", type=int)
    query.add_argument("--chunk-top-k", type=int)
    query.add_argument("--preset", choices=["default", "balanced", "low_memory"])
    query.add_argument("--level", type=int)
    query.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="any other query parameter (repeatable)")
    query.add_argument("--timeout", type=float, default=300.0)
    query.add_argument("--json", action="store_true")

    stats = sub.add_parser("stats", help="graph counts of a tenant")
    _add_tenant(stats)
    stats.add_argument("--json", action="store_true")

    export = sub.add_parser("export", help="export a tenant's graph")
    _add_tenant(export)
    export.add_argument("--graphml", required=True, metavar="FILE")

    demo = sub.add_parser("demo", help="start the stack, ingest the bundled sample, query every mode, stop")
    demo.add_argument("--tenant", default="demo")
    demo.add_argument("--json", action="store_true")

    backup = sub.add_parser("backup", help="copy every graphfleet key of the configured Redis into a file")
    backup.add_argument("--out", required=True, metavar="FILE",
                        help="the backup file to write (gzip stream; - for standard output)")
    backup.add_argument("--json", action="store_true")

    restore = sub.add_parser("restore", help="restore a backup file into the configured Redis")
    restore.add_argument("file", metavar="FILE", help="a file written by graphfleet backup (- for standard input)")
    restore.add_argument("--wipe", action="store_true",
                         help="first delete every graphfleet key, so Redis holds exactly what the backup holds")
    restore.add_argument("--json", action="store_true")

    sim = sub.add_parser("llm-simulator", help="run the OpenAI-compatible LLM simulator (tests/benchmarks)")
    from llm_simulator.cli import add_arguments

    add_arguments(sim)
    manage_cli.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asking for completions (graphfleet completion)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    if args.command == "llm-simulator":
        from llm_simulator.cli import main as sim_main

        return sim_main(args) or 0
    handler = getattr(args, "handler", None) or getattr(commands, "cmd_" + args.command.replace("-", "_"))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    return run(handler, args)


def run(handler, args) -> int:
    """Run a verb; errors become one ``graphfleet: CODE: message`` line on stderr and an exit code."""
    try:
        return handler(args) or 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001  (every error is one line; --debug adds the traceback)
        code, message, exit_code = describe(exc)
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"graphfleet: {code}: {message}", file=sys.stderr)
        return exit_code


def describe(exc: Exception) -> tuple[str, str, int]:
    """(code, message, exit code) of an error a verb raised."""
    import httpx
    from redis.exceptions import RedisError

    from graphfleet.errors import ApiError, NotFoundError, TransportError
    from graphfleet_cli.backup import BackupError
    from shared.infra.jobs.ingest_submit import InvalidDocument

    if isinstance(exc, CliError):
        return exc.code, exc.message, exc.exit_code
    if isinstance(exc, ApiError):
        return exc.code, f"{exc.message} (HTTP {exc.status})", EXIT_NOT_FOUND if isinstance(exc, NotFoundError) \
            else EXIT_FAILURE
    if isinstance(exc, InvalidDocument):
        return exc.code, str(exc), EXIT_FAILURE
    if isinstance(exc, TransportError | httpx.HTTPError):
        return "unreachable", f"cannot reach the gateway: {exc}", EXIT_FAILURE
    if isinstance(exc, FileNotFoundError | LookupError):
        return "not_found", str(exc), EXIT_NOT_FOUND
    if isinstance(exc, TimeoutError):
        return "timeout", str(exc), EXIT_FAILURE
    if isinstance(exc, RedisError):
        return "redis_error", str(exc), EXIT_FAILURE
    if isinstance(exc, BackupError | OSError):
        return "failed", str(exc), EXIT_FAILURE
    return "internal", f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
