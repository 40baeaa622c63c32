"""``graphfleet query`` and the demo's queries: submit through the queues, wait, print."""

from __future__ import annotations

import json
import sys
import time

from pydantic import ValidationError

from graphfleet_cli.output import print_json
from shared.domain.query.params import QueryParam

NOT_FOUND = 3  # graphfleet_cli/main.py EXIT_NOT_FOUND
_FLAG_FIELDS = ("max_total_tokens", "max_entity_tokens", "max_relation_tokens", "top_k", "chunk_top_k", "preset",
                "level")


def param_from_args(args) -> QueryParam:
    fields: dict = {"query": args.text, "mode": args.mode, "response_type": args.response_type,
                    "only_need_context": args.only_context}
    for name in _FLAG_FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    for item in args.param:
        key, _, raw = item.partition("=")
        try:
            fields[key.strip().replace("-", "_")] = json.loads(raw)
        except ValueError:
            fields[key.strip().replace("-", "_")] = raw
    return QueryParam.model_validate(fields)


def run_query(client, tenant: str, param: QueryParam, timeout: float = 300.0, on_token=None) -> dict:
    """Submit through ``client`` (local queues or the gateway) and shape the result for printing/--json;
    ``on_token(text)`` sees the answer's tokens as they arrive (gateways that stream query events)."""
    started = time.perf_counter()
    done = client.query(tenant, param, timeout, **({"on_token": on_token} if on_token else {}))
    result = done["result"] or {}
    return {
        "query_id": done["query_id"], "status": done["status"], "mode": param.mode, "error": done["error"],
        "answer": result.get("answer", ""), "answer_kind": result.get("answer_kind", "none"),
        "context": result.get("context"), "budget": result.get("budget"), "usage": result.get("usage", {}),
        "total_usage": result.get("total_usage"), "sources": result.get("sources"),
        "citations": result.get("citations"), "quality": result.get("quality"),
        "format_check": result.get("format_check"), "partial": result.get("partial", False),
        "partial_reason": result.get("partial_reason"), "details": result.get("details"),
        "seconds": round(time.perf_counter() - started, 4),
    }


def run_query_command(args, client, tenant: str) -> int:
    try:
        param = param_from_args(args)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'query'}: {e['msg']}" for e in exc.errors())
        print(f"graphfleet: invalid_argument: invalid query parameters: {detail}", file=sys.stderr)
        return 2
    if not client.stats(tenant).get("documents"):
        print(f"graphfleet: no_documents: no documents ingested for tenant {tenant!r} (graphfleet ingest PATH... "
              "first)", file=sys.stderr)
        return NOT_FOUND
    streamed: list[str] = []
    stream = not args.json and sys.stdout.isatty() and getattr(client, "streams", False)
    out = run_query(client, tenant, param, args.timeout, on_token=_printer(streamed) if stream else None)
    if args.json:
        print_json(out)
    else:
        print_human(out, answer_shown=bool(streamed))
    return 0 if out["status"] == "succeeded" else 1


def _printer(streamed: list[str]):
    def on_token(text: str) -> None:
        streamed.append(text)
        sys.stdout.write(text)
        sys.stdout.flush()

    return on_token


def budget_lines(budget: dict | None) -> list[str]:
    if not budget:
        return []
    lines = [f"  total {budget.get('total_tokens')} / {budget.get('total_allowed')} tokens "
             f"(model limit {budget.get('model_limit')})"]
    for sec in budget.get("sections", []):
        lines.append(f"  - {sec.get('name')}: {sec.get('candidates')} found, {sec.get('kept')} kept, "
                     f"{sec.get('tokens_used')}/{sec.get('tokens_allowed')} tokens"
                     f"{' (truncated)' if sec.get('truncated') else ''}")
    return lines


def print_human(out: dict, answer_shown: bool = False) -> None:
    """``answer_shown``: the answer's tokens were already printed as they arrived."""
    label = {"llm": "answer", "extractive": "extractive answer (no LLM configured: top-ranked facts with sources)",
             "none": "no answer"}.get(out["answer_kind"], "answer")
    if answer_shown:
        print()
    else:
        print(f"[{out['mode']}] {label}:")
        print(out["answer"] or "(empty)")
    if out.get("partial"):
        print(f"PARTIAL: {out['partial_reason']}")
    print("budget:")
    print("\n".join(budget_lines(out["budget"])))
    tu = out.get("total_usage") or {}
    embeds = ((out.get("usage") or {}).get("embed") or {}).get("calls", 0)  # the question's embedding
    print(f"usage: {tu.get('calls', 0) - embeds} LLM calls, {embeds} embedding calls, {tu.get('prompt_tokens', 0)} "
          f"prompt + {tu.get('completion_tokens', 0)} completion tokens, ${tu.get('cost_usd', 0):.6f}; "
          f"{out['seconds']} s")


def demo_queries(client, tenant: str, queries: list[tuple[str, str]], as_json: bool) -> None:
    for mode, text in queries:
        out = run_query(client, tenant, QueryParam(query=text, mode=mode, response_type="bullet_points"))
        if as_json:
            print_json(out)
        else:
            print(f"\n== {mode}: {text}")
            print_human(out)
