"""Deterministic answers for the summary, report, map/reduce, answer and keyword prompts."""

from __future__ import annotations

import json
import math
import re

from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP
from shared.domain.tokens import count_tokens, truncate_text

from .extraction import name_runs
from .formatting import format_answer
from .tables import find_table, parse_rows, pick, row_text, split_sections, tables
from .textutil import clean, content_words, digest, overlap, section, sentences, trim_words

DONT_KNOW = "I do not know: the provided data does not contain information that answers the question."
_LABELS = (("entit", "Entities"), ("relation", "Relationships"), ("report", "Reports"), ("", "Sources"))


def summarize(prompt: str, model: str | None) -> str:
    m = re.search(r"under (\d+) tokens", prompt)
    max_tokens = int(m.group(1)) if m else 500
    m = re.search(r"^Entity:\s*(.+)$", prompt, re.MULTILINE)
    name = m.group(1).strip() if m else ""
    body = section(prompt, "Description fragments:", ("\nOutput:",))
    fragments: list[str] = []
    if body.startswith("["):
        try:
            fragments = [str(x) for x in json.loads(body)]
        except ValueError:
            fragments = []
    if not fragments:
        fragments = [f.strip().lstrip("-*• ").strip() for f in re.split(re.escape(GRAPH_FIELD_SEP) + r"|\n", body)]
    fragments = [f for f in fragments if f]
    firsts = [s for f in fragments for s in sentences(f)[:1]]
    rest = [s for f in fragments for s in sentences(f)[1:]]
    seen: set[str] = set()
    ordered = [s for s in firsts + rest if not (s.lower() in seen or seen.add(s.lower()))]
    text = " ".join(ordered) or f"No description is available for {name or 'this item'}."
    if name and name.lower() not in text.lower():
        text = f"{name}: {text}"
    kept: list[str] = []
    for sent in sentences(text):
        if count_tokens(" ".join(kept + [sent]), model) > max_tokens:
            break
        kept.append(sent)
    return " ".join(kept) if kept else truncate_text(text, max_tokens, model)


def _entities_and_relations(data: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    parsed = tables(data)
    ents = [
        (pick(r, "entity", "name", "entity_name", "title"), pick(r, "description", "content", "summary"))
        for r in find_table(parsed, "entit")
    ]
    rels = [
        (pick(r, "source", "src", "source_entity"), pick(r, "target", "tgt", "target_entity"), pick(r, "description"))
        for r in find_table(parsed, "relation")
    ]
    ents = [(n, d) for n, d in ents if n]
    if not ents:  # no entity table: fall back to the capitalised names of the text
        names: list[str] = []
        for sent in sentences(data):
            names += [" ".join(ws) for ws, _ in name_runs(sent) if " ".join(ws) not in names]
        ents = [(n, next((s for s in sentences(data) if n in s), n)) for n in names[:10]]
    return ents, [(s, t, d) for s, t, d in rels if s and t]


def community_report(prompt: str) -> str:
    data = section(prompt, "-Data-", ("\nOutput:",))
    ents, rels = _entities_and_relations(data)
    names = [n for n, _ in ents] or ["Unnamed entities"]
    title = " and ".join(names[:2]) + (" community" if len(names) > 2 else "")
    lead = clean(sentences(ents[0][1])[0] if ents and ents[0][1] else "", 240)
    summary = (
        f"The community centres on {', '.join(names[:3])}, with {len(ents)} entities and "
        f"{len(rels)} relationships. {lead}"
    ).strip()
    rating = min(10.0, 1.0 + 1.5 * math.log2(1 + len(ents) + len(rels)) + (digest(data) % 10) / 10)
    findings = [
        {"summary": f"{clean(n, 80)} in the community", "explanation": clean(d or n, 400)} for n, d in ents[:5]
    ]
    findings += [
        {"summary": f"{clean(s, 60)} and {clean(t, 60)}", "explanation": clean(d or f"{s} relates to {t}.", 400)}
        for s, t, d in rels[:3]
    ]
    while len(findings) < 3:
        findings.append(
            {
                "summary": f"Structure of {title}",
                "explanation": f"The community has {len(ents)} entities and {len(rels)} relationships.",
            }
        )
    report = {
        "title": clean(title, 120),
        "summary": summary,
        "rating": round(rating, 1),
        "rating_explanation": f"The rating reflects the size and connectedness of the community ({len(ents)} "
        f"entities, {len(rels)} relationships).",
        "findings": findings[:8],
    }
    return json.dumps(report, ensure_ascii=False)


def _data_rows(data: str) -> list[tuple[str, dict[str, str]]]:
    """(section name, row) for every table row in the data; plain lines when there are no tables."""
    parts = split_sections(data) or {"": data}
    return [(name, row) for name, body in parts.items() for row in parse_rows(body)]


def global_map(system: str, question: str) -> str:
    data = section(system, "-Data-")
    q = set(content_words(question))
    points = []
    for i, (_name, row) in enumerate(_data_rows(data)):
        rid = pick(row, "id", "community", "community_id", "report_id") or str(i)
        text = pick(row, "content", "full_content", "summary") or row_text(row)
        hits = overlap(q, text)
        if not q or not hits:
            continue
        best = max(sentences(text) or [text], key=lambda s: (overlap(q, s), -len(s)))
        title = pick(row, "title")
        desc = f"{title}: {trim_words(best, 50)}" if title else trim_words(best, 60)
        score = min(100, round(100 * hits / len(q)))
        points.append({"description": f"{desc} [Data: Reports ({rid})]", "score": score})
    points.sort(key=lambda p: -p["score"])
    if not points:
        points = [{"description": "The reports do not contain information relevant to the question.", "score": 0}]
    return json.dumps({"points": points[:5]}, ensure_ascii=False)


_DATA_HEADERS = {
    "rag_answer": "-Data tables-",
    "naive_answer": "-Excerpts-",
    "global_reduce": "-Analyst reports-",
    "global_direct": "-Community reports-",
    "causal_analysis": "-Network data-",
    "causal_summary": "-Causal analysis-",
    "map_summarize": "-Excerpts-",
}


def _row_sentence(row: dict[str, str], kind: str) -> str:
    name = pick(row, "entity", "name", "entity_name")
    desc = pick(row, "description", "content", "text", "summary")
    src, tgt = pick(row, "source", "src", "source_entity"), pick(row, "target", "tgt", "target_entity")
    if src and tgt:
        return f"{src} {'->' if kind.startswith('causal') else 'and'} {tgt}: {desc or 'related'}"
    if name and desc:
        return f"{name}: {desc}"
    return desc or row_text(row)


def _candidates(kind: str, data: str) -> list[str]:
    out = []
    for name, row in _data_rows(data):
        label = next(lbl for key, lbl in _LABELS if key in name)
        rid = pick(row, "id", "chunk_id", "source_id")
        text = _row_sentence(row, kind)
        for sent in sentences(text):
            sent = trim_words(sent, 60)
            if rid and "[Data:" not in sent and "[Sources" not in sent and kind != "causal_summary":
                plain = kind in ("naive_answer", "map_summarize")
                sent += f" [Sources ({rid})]" if plain else f" [Data: {label} ({rid})]"
            out.append(sent)
    return out


def answer(kind: str, system: str, question: str) -> str:
    data = section(system, _DATA_HEADERS.get(kind, "-Data-"))
    response_type = section(system, "-Target response format-", ("\n-",)) or "multiple paragraphs"
    q = set(content_words(question))
    cands = _candidates(kind, data)
    scored = sorted(((overlap(q, c), i, c) for i, c in enumerate(cands)), key=lambda t: (-t[0], t[1]))
    keep_all = kind in ("causal_analysis", "causal_summary")
    picked: list[str] = []
    words = 0
    for score, _i, cand in scored:
        if (score == 0 and not keep_all) or len(picked) >= 10 or words >= 200 or cand in picked:
            continue
        picked.append(cand)
        words += len(cand.split())
    if not picked:
        return format_answer([DONT_KNOW], response_type)
    if kind == "causal_analysis":
        lines = [f"Chain {i}: {s}" for i, s in enumerate(picked, 1)]
        return "## Causal chains\n\n" + "\n".join(f"- {ln}" for ln in lines)
    return format_answer(picked, response_type, "Causal answer" if kind == "causal_summary" else "Answer")


def keywords(prompt: str) -> str:
    question = section(prompt, "Question:", ("\nOutput:",))
    low: list[str] = re.findall(r"[\"“]([^\"”]{2,60})[\"”]", question)
    for ws, initial in name_runs(question):
        phrase = " ".join(ws)
        if not (initial and len(ws) == 1) and phrase not in low:
            low.append(phrase)
    low_words = {w.lower() for p in low for w in p.split()}
    terms = [w for w in content_words(question) if w not in low_words and len(w) >= 4]
    high = list(dict.fromkeys(terms))[:5]
    if not low:
        low = sorted(dict.fromkeys(content_words(question)), key=lambda w: (-len(w), w))[:3]
    return json.dumps({"high_level_keywords": high, "low_level_keywords": low}, ensure_ascii=False)


def unknown(question: str, json_mode: bool) -> str:
    text = f"This is a simulated answer to: {trim_words(clean(question, 300), 30)}"
    return json.dumps({"answer": text}) if json_mode else text
