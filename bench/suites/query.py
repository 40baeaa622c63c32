"""Per query mode: submit-to-result seconds (with and without the answer call), context tokens,
LLM calls and tokens, at each simulator latency.

    .venv/bin/python -m bench.suites.query [--latency 0 200] [--repeat 5] [--out bench/results/query.jsonl]
"""

from __future__ import annotations

from bench.harness.results import QUERIES, SAMPLE, emit, median, parser
from bench.harness.stacks import client_stack, simulator
from graphfleet_cli.query_client import run_query
from shared.domain.query.params import QueryParam


def main() -> None:
    args = parser(__doc__, latency=[0.0, 200.0], repeat=5).parse_args()
    for latency in args.latency:
        with simulator(latency_ms=latency) as llm, client_stack(llm, 24) as (_url, _st, client):
            view = client.wait("qb", client.ingest_files("qb", [SAMPLE])["job_id"], timeout=1800)
            assert view["status"] == "succeeded", view
            for mode, text in QUERIES.items():
                for only in (True, False):  # a distinct query per run so the LLM cache never answers
                    runs = [run_query(client, "qb", QueryParam(query=f"{text} (run {i})", mode=mode,
                                                               only_need_context=only), 300)
                            for i in range(args.repeat)]
                    last, usage = runs[-1], runs[-1]["total_usage"] or {}
                    emit({"bench": "query", "latency_ms": latency, "mode": mode, "only_need_context": only,
                          "runs": args.repeat,
                          "seconds_median": median([r["seconds"] for r in runs], 4),
                          "context_tokens": (last["budget"] or {}).get("total_tokens"),
                          **{k: usage.get(u) for k, u in (("llm_calls", "calls"), ("prompt_tokens", "prompt_tokens"),
                                                          ("completion_tokens", "completion_tokens"))},
                          "by_phase": {k: v.get("calls") for k, v in (last["usage"] or {}).items()},
                          "status": last["status"], "partial": last["partial"]}, args.out)


if __name__ == "__main__":
    main()
