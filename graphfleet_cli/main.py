"""``graphfleet`` command line: up, ingest, query, stats, export, demo, backup, restore, llm-simulator."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from graphfleet_cli import commands


def _add_tenant(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tenant", default=None, help="tenant id (default: GRAPHFLEET_DEFAULT_TENANT or 'default')")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphfleet", description="GraphRAG on a fleet of Celery workers.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the embedded stack in the foreground")
    up.add_argument("--port", type=int, default=8080, help="gateway port")
    up.add_argument("--concurrency", type=int, default=None, help="threads per LLM-bound worker")

    ingest = sub.add_parser("ingest", help="ingest .txt/.md files or directories")
    ingest.add_argument("paths", nargs="+")
    _add_tenant(ingest)
    ingest.add_argument("--wait", action="store_true", help="wait for the job to finish")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    if args.command == "llm-simulator":
        from llm_simulator.cli import main as sim_main

        return sim_main(args) or 0
    handler = getattr(commands, "cmd_" + args.command.replace("-", "_"))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    import httpx
    from redis.exceptions import RedisError

    from graphfleet_cli.backup import BackupError
    from graphfleet_cli.http_client import GatewayError

    try:
        return handler(args) or 0
    except KeyboardInterrupt:
        return 130
    except GatewayError as exc:
        print(f"graphfleet: {exc}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"graphfleet: cannot reach the gateway: {exc}", file=sys.stderr)
        return 1
    except (BackupError, RedisError, OSError) as exc:
        print(f"graphfleet {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
