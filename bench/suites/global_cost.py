"""Global search cost and coverage per question: graphfleet's default selection vs its full scan vs nano-graphrag.

    .venv/bin/python -m bench.suites.global_cost [--corpora carol musique] [--questions 10] [--shares 0.05 0.1]
        [--systems graphfleet nano] [--peers-python PATH] [--out FILE]
"""

from __future__ import annotations

from pathlib import Path

from bench.harness.datasets import load_named_set
from bench.harness.peers.peer_run import delta, sim_stats
from bench.harness.results import PEERS_PYTHON, SAMPLE, emit, parser, timed
from bench.harness.stacks import client_stack, ingest_docs, simulator
from bench.harness.systems import run_peer_process
from shared.domain.query.params import QueryParam

CAROL_QUESTIONS = [
    "What are the main themes of the story?", "Who is Ebenezer Scrooge and how does he change?",
    "What role do the spirits play?", "How does Bob Cratchit's family celebrate Christmas?",
    "What does Marley's ghost warn Scrooge about?", "How is Christmas described across the story?",
    "What do the poor and the rich characters have in common?", "What happens to Tiny Tim?",
    "Which places does Scrooge visit with the ghosts?", "What lessons does the story teach about money and generosity?",
]
POOL_PASSAGES = 2000  # a dev set corpus: the first this many passages of its pool (MuSiQue: the table's)
CORPORA = ("carol", "musique", "2wiki", "hotpotqa")


def corpus_docs(name: str, questions: int) -> tuple[list[tuple[str, str]], list[str]]:
    """((title, text) documents to ingest, questions) of a corpus."""
    if name == "carol":
        return [(SAMPLE.name, SAMPLE.read_text(encoding="utf-8"))], CAROL_QUESTIONS[:questions]
    ds = load_named_set(name)
    return [(ds.titles.get(k, k), doc) for k, doc in list(ds.docs.items())[:POOL_PASSAGES]], \
        [q["question"] for q in ds.questions[:questions]]


def _tokens(before: dict, after: dict) -> dict:
    """The simulator's counters of one query (``peer_run.delta``), with calls by prompt type as counts."""
    d = delta(before, after)
    return {"calls": d["llm_calls"], "prompt_tokens": d["prompt_tokens"], "completion_tokens": d["completion_tokens"],
            "tokens": d["prompt_tokens"] + d["completion_tokens"],
            "calls_by_type": {kind: v["calls"] for kind, v in d["calls_by_type"].items()}}


def point_reports(points: list) -> dict[str, float]:
    """Report id -> best score over the positive points citing it (a point may cite several reports)."""
    out: dict[str, float] = {}
    for cid, score in points or []:
        for rid in (r.strip() for r in str(cid).split(",")):
            if rid and score > 0:
                out[rid] = max(out.get(rid, 0.0), float(score))
    return out


def coverage(full: dict[str, float], selected: dict[str, float]) -> float:
    """The share of the full scan's reports the selection found; 1.0 when the full scan found nothing."""
    return sum(r in selected for r in full) / len(full) if full else 1.0


def global_run(client, llm: str, question: str, extra: dict) -> dict:
    """One global query: its LLM usage, details and the reports its map points cite. A direct answer (the
    selected reports fit one call) has no map points: the same question and selection, mapped
    (``global_direct_answer=False``), gives the points its reports hold."""
    before = sim_stats(llm)
    res = client.query("gc", QueryParam(query=question, mode="global", **extra), timeout=900)
    details = res["result"].get("details", {})
    run = {"usage": _tokens(before, sim_stats(llm)), "details": details, "status": res["status"],
           "error": res.get("error"), "points": point_reports(details.get("points"))}
    if details.get("answer_path") == "direct":
        res = client.query("gc", QueryParam(query=question, mode="global", global_direct_answer=False, **extra),
                           timeout=900)
        mapped = res["result"].get("details", {})
        if mapped.get("selection") != details.get("selection"):
            raise RuntimeError(f"the mapped run selected other reports than the direct answer: {question!r}")
        run["points"] = point_reports(mapped.get("points"))
    return run


def graphfleet_run(name: str, docs: list, questions: list[str], out: Path | None, shares: tuple = ()) -> None:
    with simulator(0.0) as llm, client_stack(llm, 16, 1, GRAPHFLEET_LLM__CACHE_ENABLED="false") as (_u, _s, client):
        (_job, view), seconds = timed(ingest_docs, client, "gc", docs, 7200)
        stats = client.stats("gc")
        emit({"bench": "global_cost_ingest", "corpus": name, "system": "graphfleet", "status": view["status"],
              "seconds": round(seconds, 2), "documents": len(docs), "chunks": stats["chunks"],
              "reports": stats.get("reports"), "communities_by_level": stats["communities_by_level"]}, out)
        variants = [("graphfleet", {}), ("graphfleet-full", {"global_selection": "all"})]
        variants += [(f"graphfleet@{share:g}", {"global_selection_share": share}) for share in shares]
        for i, q in enumerate(questions):
            runs = {system: global_run(client, llm, q, extra) for system, extra in variants}
            full = runs["graphfleet-full"]["points"]
            for system, run in runs.items():
                usage = run["usage"]
                emit({"bench": "global_cost", "corpus": name, "question_index": i, "question": q, "system": system,
                      "status": run["status"], "error": run.get("error"), **usage,
                      "map_calls": usage["calls_by_type"].get("global_map", 0),
                      "reduce_calls": usage["calls_by_type"].get("global_reduce", 0),
                      "answer_path": run["details"].get("answer_path", "map"),
                      "coverage": round(coverage(full, run["points"]), 4)}, out)


def nano_run(name: str, docs: list, questions: list[str], peers_python: str, out: Path | None) -> None:
    queries = [{"id": str(i), "mode": "global", "query": q, "only_need_context": False}
               for i, q in enumerate(questions)]
    with simulator(0.0) as llm:
        lines, proc = run_peer_process(peers_python, "nano", llm, [text for _, text in docs], queries, None, 16)
    if proc.returncode != 0:
        emit({"bench": "global_cost_error", "corpus": name, "system": "nano", "stderr": proc.stderr[-2000:]}, out)
    for rec in lines:
        if rec.get("phase") == "ingest":
            emit({"bench": "global_cost_ingest", "corpus": name, "system": "nano", "seconds": rec.get("seconds"),
                  "documents": len(docs), "communities_by_level": rec.get("communities_by_level")}, out)
        if rec.get("phase") != "query":
            continue
        i = int(rec["id"])
        emit({"bench": "global_cost", "corpus": name, "question_index": i, "question": questions[i], "system": "nano",
              "status": "failed" if rec.get("error") else "succeeded", "calls": rec.get("llm_calls"),
              "prompt_tokens": rec.get("prompt_tokens"), "completion_tokens": rec.get("completion_tokens"),
              "tokens": (rec.get("prompt_tokens") or 0) + (rec.get("completion_tokens") or 0)}, out)


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__, peers_python=PEERS_PYTHON)
    ap.add_argument("--corpora", nargs="+", default=["carol", "musique"], choices=CORPORA,
                    help="the Carol and the first 2,000 pooled passages of a public dev set (musique is the table's)")
    ap.add_argument("--questions", type=int, default=10, help="questions per corpus")
    ap.add_argument("--systems", nargs="+", default=["graphfleet", "nano"], choices=["graphfleet", "nano"])
    ap.add_argument("--shares", type=float, nargs="*", default=[],
                    help="also run the selection with these global_selection_share values (the cost/coverage curve)")
    args = ap.parse_args(argv)
    for name in args.corpora:
        docs, questions = corpus_docs(name, args.questions)
        if "graphfleet" in args.systems:
            graphfleet_run(name, docs, questions, args.out, tuple(args.shares))
        if "nano" in args.systems:
            nano_run(name, docs, questions, args.peers_python, args.out)


if __name__ == "__main__":
    main()
