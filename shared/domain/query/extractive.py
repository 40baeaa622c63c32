"""The extractive answer, written when no LLM is configured: whole sentences of the kept context, ranked by
their similarity to the question, each with the citation of the context item it was quoted from.

Candidates are the sentences of the passages and of the entity and relation descriptions
(``shared.domain.query.sentences``: hard line breaks rejoined, pieces that are not whole sentences left out);
a community report's sentences only when the context holds nothing else (global mode), as the passages say in
the author's words what a report summarises.

Ranking: BM25 of each sentence against the question (the sentences as the corpus). With an embedder, the
question and a bounded pool of candidates (the best by BM25, then the rest in the context's own rank order, so
a sentence that means what the question asks in other words is among them) are embedded in one call and
ranked by the cosine of each sentence to the question, blended with BM25's share. The answer takes the best
sentences in turn, skipping near-copies of one already taken and any sentence longer than the room left (a
sentence is never cut), up to a few sentences.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from difflib import SequenceMatcher

import numpy as np
from pydantic import BaseModel

from shared.domain.models import Document
from shared.domain.query.context_common import Evidence, Sources
from shared.domain.query.params import EXTRACTIVE_CANDIDATES, EXTRACTIVE_LEXICAL_SHARE, EXTRACTIVE_SENTENCES
from shared.domain.query.sentences import sentences
from shared.domain.query.truncation import lexical_scores

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
NEAR_COPY = 0.9  # similarity of two sentences' letters (difflib's ratio) from which they are the same sentence
_HEADER = "Extractive answer (no LLM configured): the most relevant facts from the retrieved context."
_LABEL_OF_KIND = {"entity": "Entities", "relation": "Relationships", "report": "Reports", "chunk": "Sources"}
_KIND_ORDER = {"chunk": 0, "entity": 1, "relation": 1}  # passages first where the pool is filled in rank order
_WORDS = re.compile(r"\w+")
# an entity's name as a label inside a report's summary (the index writes names in capitals): "GHOST: ..."
_LABEL = re.compile(r"(?<!\S)[A-Z][A-Z0-9'&.\-]+(?: [A-Z0-9][A-Z0-9'&.\-]*)*: ")


class Fact(BaseModel):
    """One sentence an extractive answer quotes: its text (line breaks made spaces), the evidence it came from,
    and its span in that evidence's text (``offset`` to ``end``, line breaks included)."""

    text: str
    evidence: Evidence
    offset: int
    end: int
    score: float = 0.0


def extractive_facts(query: str, sources: Sources, max_facts: int = EXTRACTIVE_SENTENCES, *,
                     embed: Embed | None = None, room_words: int | None = None,
                     docs: Mapping[str, Document] | None = None) -> list[Fact]:
    """The best sentences of the kept context, best first, each once, at most ``max_facts`` and together at
    most ``room_words`` words (None: no bound). ``embed`` (texts -> vectors): rank by meaning as well as by
    words; if it fails, words alone rank. ``docs``: the passages' documents, which tell whether a passage is cut
    out of the middle of its document (its edge pieces may then be parts of sentences)."""
    facts = _candidates(sources, docs or {})
    if not facts:
        return []
    lexical = np.asarray(lexical_scores(query, [f.text for f in facts]), dtype=float)
    ranked, scores = list(range(len(facts))), _normalised(lexical)
    if embed is not None:
        pool = _pool(lexical)
        try:
            vectors = np.asarray(embed([query, *(facts[i].text for i in pool)]), dtype=float)
        except Exception:  # noqa: BLE001 - the answer is still made: ranked by its words alone
            vectors = None
        if vectors is not None and vectors.ndim == 2 and vectors.shape[0] == len(pool) + 1:
            cosine = _normalised(_cosines(vectors[0], vectors[1:]), floor=None)
            blended = np.zeros(len(facts))
            blended[pool] = (1 - EXTRACTIVE_LEXICAL_SHARE) * cosine + EXTRACTIVE_LEXICAL_SHARE * scores[pool]
            ranked, scores = pool, blended
    ranked.sort(key=lambda i: (-scores[i], i))
    return [facts[i].model_copy(update={"score": round(float(scores[i]), 4)})
            for i in _select([facts[i].text for i in ranked], max_facts, room_words, ranked)]


def render_extractive(facts: list[Fact]) -> str:
    if not facts:
        return ""
    return _HEADER + "\n" + "\n".join(f"- {f.text} {_cite(f.evidence)}" for f in facts)


def extractive_answer(query: str, sources: Sources, max_facts: int = EXTRACTIVE_SENTENCES, *,
                      embed: Embed | None = None, room_words: int | None = None) -> str:
    """The best sentences of the kept context with their citations (no LLM involved)."""
    return render_extractive(extractive_facts(query, sources, max_facts, embed=embed, room_words=room_words))


def _cite(ev: Evidence) -> str:
    ref = f"{_LABEL_OF_KIND.get(ev.kind, 'Data')} ({ev.cite})"
    docs = ", ".join(d for d in ev.doc_ids[:3] if d)
    return f"[Data: {ref}; Documents ({docs})]" if docs else f"[Data: {ref}]"


def _candidates(sources: Sources, docs: Mapping[str, Document]) -> list[Fact]:
    """Every whole sentence of the passages and descriptions (of the reports when there is nothing else),
    passages first, each item in the context's rank order; a sentence said twice is kept where it comes first."""
    items = [ev for ev in sources.evidence if ev.kind in _KIND_ORDER]
    items = sorted(items, key=lambda ev: _KIND_ORDER[ev.kind]) or [ev for ev in sources.evidence
                                                                  if ev.kind == "report"]
    out, seen = [], set()
    for ev in items:
        body = _body_start(ev)
        open_start, open_end = _window(ev, docs)
        text = ev.text[body:]
        if ev.kind == "report":  # "NAME: its first sentence" items: each item a paragraph, without its label
            text = _LABEL.sub(lambda m: "\n\n" + " " * (len(m.group()) - 2), text)
        for s in sentences(text, open_start, open_end):
            if s.text not in seen:
                seen.add(s.text)
                out.append(Fact(text=s.text, evidence=ev, offset=body + s.start, end=body + s.end))
    return out


def _body_start(ev: Evidence) -> int:
    """Where the text of an entity's or relation's description starts, after the "NAME: " / "A -> B: " the
    context builder puts before it."""
    if ev.kind not in ("entity", "relation"):
        return 0
    head, sep, _ = ev.text.partition(": ")
    return len(head) + len(sep) if sep else 0


def _window(ev: Evidence, docs: Mapping[str, Document]) -> tuple[bool, bool]:
    """(document text before, document text after) a passage: it is not its document's first (last) chunk. A
    document that lists no chunks (older data, a description) leaves the text whole."""
    if ev.kind != "chunk" or not ev.doc_ids or ev.doc_ids[0] not in docs:
        return False, False
    ids = docs[ev.doc_ids[0]].chunk_ids
    if ev.key not in ids:
        return False, False
    return ids[0] != ev.key, ids[-1] != ev.key


def _pool(lexical: np.ndarray) -> list[int]:
    """The candidates worth embedding: the best half of the pool by BM25 (those that share words with the
    question), then the others in the context's rank order, ``EXTRACTIVE_CANDIDATES`` in all."""
    by_words = [int(i) for i in np.argsort(-lexical, kind="stable")[: EXTRACTIVE_CANDIDATES // 2] if lexical[i] > 0]
    chosen = set(by_words)
    rest = [i for i in range(len(lexical)) if i not in chosen][: EXTRACTIVE_CANDIDATES - len(by_words)]
    return sorted([*by_words, *rest])


def _cosines(question: np.ndarray, rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1) * (np.linalg.norm(question) or 1.0)
    return rows @ question / np.where(norms > 0, norms, 1.0)


def _normalised(values: np.ndarray, floor: float | None = 0.0) -> np.ndarray:
    """Scores scaled to [0, 1]: by the largest (BM25, whose 0 means no shared word), or between the smallest and
    the largest (cosines, ``floor=None``)."""
    if values.size == 0:
        return values
    low = float(values.min()) if floor is None else floor
    span = float(values.max()) - low
    return (values - low) / span if span > 1e-12 else np.zeros_like(values)


def _select(texts: list[str], max_facts: int, room_words: int | None, ids: list[int]) -> list[int]:
    """The ids of the sentences the answer takes, going down ``texts`` (best first)."""
    chosen: list[int] = []
    said: list[str] = []
    used = 0
    for text, i in zip(texts, ids, strict=True):
        if len(chosen) >= max_facts:
            break
        size = len(text.split())
        if room_words is not None and used + size > room_words:
            continue  # too long for the room left: the next sentence instead, never a cut one
        letters = " ".join(_WORDS.findall(text.lower()))
        if any(_near(letters, other) for other in said):
            continue
        chosen.append(i)
        said.append(letters)
        used += size
    return chosen


def _near(a: str, b: str) -> bool:
    """The same sentence said twice with small differences (a hyphen, a word's case or spelling)."""
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return matcher.real_quick_ratio() >= NEAR_COPY and matcher.quick_ratio() >= NEAR_COPY and \
        matcher.ratio() >= NEAR_COPY
