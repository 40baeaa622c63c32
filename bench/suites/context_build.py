"""In-process context build: graphfleet vs nano-graphrag, local and naive, at ``max_total_tokens`` 12,000 (nano's
default) and 30,000, on the same corpus ingested with the LLM simulator at 0 ms.

    bash bench/harness/peers/setup.sh      # once: nano-graphrag's venv (.bench/peers-venv)
    .venv/bin/python -m bench.suites.context_build [--repeat 20] [--budgets 12000 30000] [--modes local naive]
        [--systems graphfleet nano] [--out bench/results/context_build.jsonl]
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.harness.results import PEERS_PYTHON, SAMPLE, carol_question, emit, machine, median, parser, percentile, timed
from bench.harness.stacks import redis_server, simulator, stack
from bench.harness.systems import EMBEDDING_DIM, MODEL, run_peer_process
from graphfleet_cli.local_client import LocalClient
from shared.config import reset_settings_cache
from shared.domain.query.engine import answer_query
from shared.domain.query.params import QueryParam
from shared.domain.tokens import count_tokens
from shared.infra.tenancy.usage import CallContext
from workers.runtime import runtime

MODES = ("local", "naive")


def _summary(seconds: list[float]) -> dict:
    return {"runs": len(seconds), "seconds_median": median(seconds, 5),
            "seconds_p95": round(percentile(seconds, 0.95), 5)}


def case_plan(modes: list[str], budgets: list[int], repeat: int) -> list[tuple[str, int, list[str]]]:
    """(mode, budget, questions) of every case in running order, the same for both systems: a warm-up question
    and ``repeat`` timed ones, none asked by an earlier case."""
    pairs = [(mode, budget) for mode in modes for budget in budgets]
    return [(mode, budget, [carol_question(k * (repeat + 1) + i) for i in range(repeat + 1)])
            for k, (mode, budget) in enumerate(pairs)]


def graphfleet_builds(llm: str, corpus: Path, plan: list[tuple[str, int, list[str]]]) -> list[dict]:
    with redis_server() as url:
        with stack(url, llm, 16):
            client = LocalClient(url)
            view = client.wait("ctx", client.ingest_files("ctx", [corpus])["job_id"], timeout=1800)
            assert view["status"] == "succeeded", view
        # the workers stopped, this process builds the contexts from the same Redis
        os.environ.update(GRAPHFLEET_REDIS_URL=url, GRAPHFLEET_LLM_BASE_URL=llm, GRAPHFLEET_LLM_API_KEY="sk-bench")
        reset_settings_cache()
        return [_graphfleet_case(mode, budget, questions) for mode, budget, questions in plan]


def _graphfleet_case(mode: str, budget: int, questions: list[str]) -> dict:
    rt = runtime()
    ctx = CallContext(tenant="ctx", stage="embed", job_id="bench-context")
    indexes = rt.indexes()

    def build(i: int):
        param = QueryParam(query=questions[i], mode=mode, only_need_context=True, model=MODEL,
                           max_total_tokens=budget)
        return answer_query(param, rt.store("ctx"), rt.vectors, lambda texts: rt.embedder.embed(texts, ctx), None,
                            indexes, walk_provider=indexes.walk, lexical_embedder=rt.lexical_embedder(ctx))

    build(0)  # warm: caches, code paths
    runs = [timed(build, i) for i in range(1, len(questions))]
    return {"bench": "context_build", "system": "graphfleet", "mode": mode, "max_total_tokens": budget,
            **_summary([s for _, s in runs]), "context_tokens": count_tokens(runs[-1][0].context or "", MODEL)}


def nano_builds(python: str, llm: str, corpus: Path, plan: list[tuple[str, int, list[str]]]) -> list[dict]:
    queries = [{"id": f"{mode}-{budget}-{i}", "mode": mode, "query": text, "only_need_context": True,
                "budget": budget} for mode, budget, questions in plan for i, text in enumerate(questions)]
    lines, proc = run_peer_process(python, "nano", llm, [corpus.read_text(encoding="utf-8")], queries, None, 16)
    cases: dict[tuple[str, int], list[dict]] = {}
    for rec in (r for r in lines if r["phase"] == "query"):  # in the order asked
        mode, budget, _i = rec["id"].rsplit("-", 2)
        cases.setdefault((mode, int(budget)), []).append(rec)
    out = []
    for (mode, budget), recs in cases.items():
        seconds = [r["seconds"] for r in recs[1:]]  # the first question warms, as graphfleet's does
        out.append({"bench": "context_build", "system": "nano", "mode": mode, "max_total_tokens": budget,
                    **_summary(seconds), "context_tokens": count_tokens(recs[-1]["output"] or "", MODEL),
                    "error": next((r["error"] for r in recs if r["error"]), None)})
    return out or [{"bench": "context_build_error", "system": "nano", "returncode": proc.returncode,
                    "stderr": proc.stderr[-2000:]}]


def main() -> None:
    ap = parser(__doc__, repeat=20, corpus=SAMPLE, peers_python=PEERS_PYTHON)
    ap.add_argument("--budgets", type=int, nargs="+", default=[12000, 30000])
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--systems", nargs="+", default=["graphfleet", "nano"], choices=["graphfleet", "nano"])
    args = ap.parse_args()
    emit({"bench": "context_build_machine", **machine(), "corpus": args.corpus.name, "repeat": args.repeat,
          "model": MODEL, "embedding_dim": EMBEDDING_DIM}, args.out)
    plan = case_plan(args.modes, args.budgets, args.repeat)
    rows: list[dict] = []
    with simulator(latency_ms=0) as llm:
        if "graphfleet" in args.systems:
            rows += graphfleet_builds(llm, args.corpus, plan)
        if "nano" in args.systems:
            rows += nano_builds(args.peers_python, llm, args.corpus, plan)
    emit(rows, args.out)


if __name__ == "__main__":
    main()
