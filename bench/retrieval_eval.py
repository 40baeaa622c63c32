"""Retrieval quality under a token budget: the share of gold supporting passages present in the context.

    .venv/bin/python -m bench.retrieval_eval [--questions Q.json] [--corpus C.json] [--budget 4000]
        [--modes local global naive hybrid causal] [--latency-ms 0] [--no-llm] [--limit N]
        [--out bench/results/retrieval.jsonl]

No real LLM answers here, so the context itself is measured: for each question of a multi-hop QA set
(a JSON array or JSON lines; HotpotQA and 2WikiMultihopQA: ``question``, ``supporting_facts`` =
[[title, sentence index]], ``context`` = [[title, [sentences]]]; MuSiQue: ``question``, ``paragraphs`` =
[{title, paragraph_text, is_supporting}]), graphfleet builds its context with ``only_need_context`` under ``--budget``
tokens counted with cl100k (the query model is set to ``gpt-4``, a cl100k model), and a passage counts
as retrieved when its whole text appears in the context (as a sequence of lower-cased word tokens, so CSV
quoting and reflowed whitespace do not hide it). The baseline ranks the
passages with BM25 and packs them, best first, into the same budget.

The corpus is the pooled passages (``{title: [sentences]}``); without ``--corpus`` it is pooled from the
questions' own contexts. Each passage is ingested as one document ``"<title>\\n<text>"`` through the real
stack (Redis, Celery workers, the LLM simulator over HTTP, or ``--no-llm`` for the LLM-free extractor).
With ``--systems ... nano lightrag`` the same passages go to nano-graphrag and LightRAG (run by
``bench/peers/peer_run.py`` in the peers' own venv, against the same simulator), each asked with its own
budget knobs set to the same ``--budget`` (nano: its local shares 0.33/0.40/0.27 and the naive/global
limits; LightRAG: ``max_total_tokens`` with entity/relation shares as in its defaults). Every context is
counted with cl100k here and reported over budget when it exceeds ``--budget``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from bench.common import emit, machine, redis_server, sim_stats, simulator, stack
from bench.peers.peer_run import delta
from shared.retrieval.bm25 import BM25Index
from shared.tokens import count_tokens, count_tokens_batch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "hotpotqa_hipporag100"
BUDGET_MODEL = "gpt-4"  # cl100k_base
PEER_MODES = {"nano": ["local", "global", "naive"], "lightrag": ["local", "global", "hybrid", "naive", "mix"]}


def norm(text: str) -> str:
    """Lower-cased word tokens: contexts quote passages as CSV cells (``"`` doubled, commas quoted) or
    reflow whitespace, which must not hide a passage that is there."""
    return " ".join(re.findall(r"\w+", text.lower()))


def read_records(path: Path) -> list[dict] | dict:
    """A JSON document, or JSON lines (one question per line)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


class _Passages:
    """Passage keys: the title, or ``title [n]`` when another passage with that title has other text
    (MuSiQue repeats titles across paragraphs)."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.keys: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}

    def add(self, title: str, text: str) -> str:
        if (title, text) in self.keys:
            return self.keys[(title, text)]
        n = self._count.get(title, 0) + 1
        self._count[title] = n
        key = title if n == 1 else f"{title} [{n}]"
        self.keys[(title, text)], self.text[key] = key, text
        return key


def _question_passages(q: dict) -> list[tuple[str, str, bool]]:
    """(title, text, is gold) of a question's own passages. HotpotQA and 2WikiMultihopQA: ``context``
    [[title, [sentences]]] with ``supporting_facts`` [[title, i]]; MuSiQue: ``paragraphs`` [{title,
    paragraph_text, is_supporting}] (marked per paragraph: titles repeat)."""
    if "paragraphs" in q:
        return [(p["title"], p["paragraph_text"], bool(p.get("is_supporting"))) for p in q["paragraphs"]]
    gold = {title for title, _idx in q["supporting_facts"]}
    return [(title, sents if isinstance(sents, str) else "".join(sents), title in gold)
            for title, sents in q.get("context", [])]


def load_set(questions_path: Path, corpus_path: Path | None) -> tuple[list[dict], dict[str, str]]:
    """(questions, passages key -> text); each question gets ``gold``, the keys of its supporting passages.
    Without a corpus file the passages are pooled from the questions' own; a question's passage is its
    sentences joined with "" (HotpotQA's sentences carry their own spaces). With a corpus file (``{title:
    [sentences]}`` or ``[{title, text}]``) gold passages are matched by title and text, else by title."""
    passages = _Passages()
    if corpus_path is not None:
        raw = read_records(corpus_path)
        items = raw.items() if isinstance(raw, dict) else ((p["title"], p.get("sentences") or p["text"]) for p in raw)
        for title, sents in items:
            passages.add(title, sents if isinstance(sents, str) else "".join(sents))
    questions = []
    for q in read_records(questions_path):
        gold = set()
        for title, text, is_gold in _question_passages(q):
            key = passages.add(title, text) if corpus_path is None else passages.keys.get((title, text), title)
            if is_gold:
                gold.add(key)
        questions.append({**q, "gold": sorted(gold)})
    return questions, passages.text


def gold_titles(question: dict) -> list[str]:
    """Keys of the question's gold supporting passages (see ``load_set``)."""
    return question["gold"]


def recall(context: str, titles: list[str], passages: dict[str, str]) -> float:
    """Share of the gold passages whose whole (normalised) text is in ``context``."""
    if not titles:
        return 0.0
    ctx = norm(context)
    return sum(norm(passages[t]) in ctx for t in titles if t in passages) / len(titles)


def bm25_context(index: BM25Index, passages: dict[str, str], query: str, budget: int) -> tuple[str, int]:
    """Passages by BM25 score, best first, whole passages only, while they fit ``budget`` tokens."""
    ranked = [t for t, _score in index.query(query, top_k=50)]
    texts = [f"{t}\n{passages[t]}" for t in ranked]
    kept, used = [], 0
    for text, tokens in zip(texts, count_tokens_batch(texts, BUDGET_MODEL), strict=True):
        if used + tokens + 1 > budget:
            continue
        kept.append(text)
        used += tokens + 1
    return "\n".join(kept), used


def mode_line(system: str, mode: str, scores: list[float], tokens: list[int], seconds: list[float] | None,
              budget: int) -> dict:
    return {"bench": "retrieval_mode", "system": system, "mode": mode, "questions": len(scores),
            "recall_mean": round(statistics.mean(scores), 4),
            "all_gold_share": round(sum(s == 1.0 for s in scores) / len(scores), 4),
            "context_tokens_median": statistics.median(tokens), "over_budget": sum(t > budget for t in tokens),
            "seconds_median": round(statistics.median(seconds), 4) if seconds else None}


def parse_variant(spec: str) -> tuple[str, str, dict]:
    """``NAME:MODE:key=value,key=value`` -> (name, mode, QueryParam overrides); values are JSON when they
    parse (numbers, booleans, objects), else strings. E.g. ``fixed-caps:hybrid:max_entity_tokens=6000``."""
    parts = spec.split(":", 2)
    name, mode = (parts[0], parts[1]) if len(parts) >= 2 else (spec, "")
    assignments = parts[2] if len(parts) == 3 else ""
    if not name or not mode:
        raise argparse.ArgumentTypeError(f"variant {spec!r}: expected NAME:MODE:key=value[,key=value...]")
    fields: dict = {}
    for item in filter(None, (x.strip() for x in assignments.split(","))):
        key, sep, raw = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"variant {spec!r}: {item!r} is not key=value")
        try:
            fields[key.strip()] = json.loads(raw)
        except ValueError:
            fields[key.strip()] = raw
    from shared.query.params import QueryParam

    QueryParam(mode=mode, **fields)  # unknown fields or bad values fail here, before any ingestion
    return name, mode, fields


def _measure_modes(client, args, questions, passages, runs: list[tuple[str, str, dict]], scores: dict) -> None:
    """Each (label, mode, overrides): every question's context under the budget; one result line each."""
    from shared.query.params import QueryParam

    for label, mode, fields in runs:
        scores[label], tokens, seconds = [], [], []
        for q in questions:
            param = QueryParam(mode=mode, query=q["question"], only_need_context=True,
                               **{"max_total_tokens": args.budget, "model": BUDGET_MODEL, **fields})
            t0 = time.perf_counter()
            out = client.query("eval", param)
            seconds.append(time.perf_counter() - t0)
            context = (out.get("result") or {}).get("context") or ""
            scores[label].append(recall(context, gold_titles(q), passages))
            tokens.append(count_tokens(context, BUDGET_MODEL))
        line = mode_line("graphfleet", label, scores[label], tokens, seconds, args.budget)
        if fields:
            line["params"] = fields
        emit(line, args.out)


def run_graphfleet(args, questions, passages, llm) -> dict[str, list[float]]:
    from graphfleet_cli.local_client import LocalClient
    from shared.ingest_submit import DocumentInput

    scores: dict[str, list[float]] = {}
    with redis_server() as url, stack(url, llm, 16, args.processes):
        client = LocalClient(url)
        before = sim_stats(llm) if llm else None
        started = time.perf_counter()
        docs = [DocumentInput(text=f"{t}\n{p}", title=t) for t, p in passages.items()]
        job = _submit(client, "eval", docs)
        view = client.wait("eval", job["job_id"], timeout=3600)
        ingest_s = time.perf_counter() - started
        stats = client.stats("eval")
        usage = view["usage"]
        # chat calls and tokens from the simulator's counters, as for the peers (graphfleet's own ledger also
        # counts embedding calls and their input tokens; it is kept beside them)
        sim = delta(before, sim_stats(llm)) if llm else {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                          "embedding_calls": None}
        emit({"bench": "retrieval_ingest", "system": "graphfleet", "status": view["status"],
              "seconds": round(ingest_s, 2), "passages": len(passages), "llm": llm is not None,
              "llm_calls": sim["llm_calls"], "prompt_tokens": sim["prompt_tokens"],
              "completion_tokens": sim["completion_tokens"], "embedding_calls": sim["embedding_calls"],
              "ledger": {k: usage.get(k) for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")},
              **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level")}}, args.out)
        runs = [(mode, mode, {}) for mode in args.modes]
        runs += [(f"{mode} [{name}]", mode, fields) for name, mode, fields in args.variant]
        _measure_modes(client, args, questions, passages, runs, scores)
    return scores


def run_peer(args, system: str, questions, passages, llm) -> dict[str, list[float]]:
    """One peer process: ingest every passage, then each question in each of the peer's modes."""
    from bench.compare import run_peer_process

    by_id = {str(i): q for i, q in enumerate(questions)}
    modes = getattr(args, f"{system}_modes")
    limit = args.nano_global_limit if system == "nano" else 0
    queries = [{"id": f"{mode}:{i}", "mode": mode, "query": q["question"], "only_need_context": True}
               for mode in modes for i, q in enumerate(questions)
               if not (mode == "global" and limit and i >= limit)]
    lines, proc = run_peer_process(args.peers_python, system, llm, [f"{t}\n{p}" for t, p in passages.items()],
                                   queries, args.budget, 16)
    if proc.returncode != 0:
        emit({"bench": "retrieval_error", "system": system, "returncode": proc.returncode,
              "stderr": proc.stderr[-2000:]}, args.out)
    ingest = next((r for r in lines if r["phase"] == "ingest"), None)
    if ingest:
        emit({"bench": "retrieval_ingest", "system": system, "status": "succeeded", "seconds": ingest["seconds"],
              "passages": len(passages), "llm": True, "llm_calls": ingest["llm_calls"],
              "prompt_tokens": ingest["prompt_tokens"], "completion_tokens": ingest["completion_tokens"],
              "embedding_calls": ingest["embedding_calls"], "chunks": None, "entities": ingest["entities"],
              "relations": ingest["relations"], "communities_by_level": ingest.get("communities_by_level")},
             args.out)
    scores: dict[str, list[float]] = {}
    for mode in modes:
        rows = [r for r in lines if r["phase"] == "query" and r["mode"] == mode]
        if not rows:
            continue
        per_q = [(by_id[r["id"].split(":")[1]], r) for r in rows]
        scores[mode] = [recall(r["output"] or "", gold_titles(q), passages) for q, r in per_q]
        tokens = [count_tokens(r["output"] or "", BUDGET_MODEL) for _q, r in per_q]
        line = mode_line(system, mode, scores[mode], tokens, [r["seconds"] for _q, r in per_q], args.budget)
        line["failed"] = sum(bool(r["error"]) for _q, r in per_q)
        emit(line, args.out)
    return scores


def run(args) -> None:
    questions, passages = load_set(args.questions, args.corpus)
    questions = questions[: args.limit] if args.limit else questions
    emit({"bench": "machine", **machine(), "systems": args.systems, "budget": args.budget}, args.out)
    index = BM25Index.build((t, f"{t}\n{p}") for t, p in passages.items())
    bm25, bm25_tokens = [], []
    for q in questions:
        ctx, used = bm25_context(index, passages, q["question"], args.budget)
        bm25.append(recall(ctx, gold_titles(q), passages))
        bm25_tokens.append(used)
    recalls: dict[str, dict[str, float]] = {}
    llm_cm = simulator(latency_ms=args.latency_ms) if not args.no_llm else None
    llm = llm_cm.__enter__() if llm_cm else None
    try:
        for system in args.systems:
            if system == "graphfleet":
                scores = run_graphfleet(args, questions, passages, llm)
            elif llm is None:
                continue  # peers need an LLM: with --no-llm only graphfleet's LLM-free path runs
            else:
                scores = run_peer(args, system, questions, passages, llm)
            recalls[system] = {m: round(statistics.mean(v), 4) for m, v in scores.items()}
    finally:
        if llm_cm:
            llm_cm.__exit__(None, None, None)
    emit({**mode_line("bm25", "bm25 (baseline)", bm25, bm25_tokens, None, args.budget)}, args.out)
    emit({"bench": "retrieval_summary", "budget": args.budget, "budget_encoding": "cl100k_base",
          "questions": len(questions), "llm": not args.no_llm, "recall_mean": recalls,
          "bm25": round(statistics.mean(bm25), 4)}, args.out)


def _submit(client, tenant: str, docs: list) -> dict:
    from shared.ingest_submit import submit_ingestion

    return submit_ingestion(client.redis, client.celery, tenant, docs, client.settings)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=Path, default=DATA / "hotpotqa_train.json")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="pooled passages {title: [sentences]}; default: the set's corpus file if present, "
                         "else pooled from the questions' contexts")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--modes", nargs="+", default=["local", "global", "naive", "hybrid", "causal"])
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--no-llm", action="store_true", help="LLM-free extraction and no LLM at query time")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only")
    ap.add_argument("--systems", nargs="+", default=["graphfleet"], choices=["graphfleet", "nano", "lightrag"])
    ap.add_argument("--nano-modes", nargs="+", default=PEER_MODES["nano"],
                    help="nano's global runs its map phase even for only_need_context: at a 4,000-token budget "
                         "that is dozens of LLM calls per question")
    ap.add_argument("--nano-global-limit", type=int, default=10,
                    help="nano's global on the first N questions only (0 = all): ~37 s and 88 map calls each here")
    ap.add_argument("--variant", action="append", type=parse_variant, default=[], metavar="NAME:MODE:k=v,...",
                    help="graphfleet only: also measure MODE with these QueryParam overrides on the same index "
                         "(repeatable), reported as 'MODE [NAME]'")
    ap.add_argument("--lightrag-modes", nargs="+", default=PEER_MODES["lightrag"])
    ap.add_argument("--peers-python", default=str(ROOT / ".bench" / "peers-venv" / "bin" / "python"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.corpus is None:
        guess = args.questions.with_name(args.questions.stem + "_corpus.json")
        args.corpus = guess if guess.exists() else None
    run(args)


if __name__ == "__main__":
    main()
