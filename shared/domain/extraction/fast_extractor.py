"""Entity/relation extraction without an LLM (pure, rule-based; cf. GraphRAG's "fast" NLP graph).

* entities: proper-name sequences (capitalised words, joined by "of"/"the"/"de"...) and titled
  names (Mr./Mrs./Dr. ...); a capitalised word at a sentence (or quotation) start counts only if the
  phrase is also seen mid-sentence or starts two sentences, and never if it also occurs lower-case;
  plus lower-case noun phrases (2+ word n-grams of adjective/noun runs, filtered by a stopword
  list and suffix heuristics) seen at least twice in the chunk;
* type: title -> person; organisation / place / event lexicons and suffixes; capitalised ->
  person when it is multi-word or next to a speech verb, else concept;
* description: up to two sentences mentioning the entity;
* relations: co-occurrence within a sentence, weight = number of sentences, description = the part of
  the first such sentence from one name to the other, with a few words either side (a sentence naming
  eight entities relates 28 pairs: each keeps what lies between its two names, not the whole sentence
  again). At most ``max_entities`` entities (by frequency) and ``max_relations``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from shared.domain.extraction import lexicon as lx
from shared.domain.extraction.records import normalise_name
from shared.domain.merge import relation_key
from shared.domain.models import Entity, EntityFragment, ExtractionResult, Relation, RelationFragment

_PARAGRAPH = re.compile(r"\n\s*\n")
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]_]*\s+")
_TOKEN = re.compile(r"[^\W\d_](?:[\w'’\-]*[^\W\d_])?|\d[\d,.]*|[^\w\s]")
_QUOTES = set("\"'“”‘’(_[")
MAX_SENTENCE_CHARS = 300
MAX_PAIR_ENTITIES = 8
PAIR_CONTEXT_WORDS = 4  # words a relation's description keeps either side of its two names


@dataclass
class _Candidate:
    count: int = 0
    start_count: int = 0
    title: bool = False
    speech: bool = False
    proper: bool = True
    words: tuple[str, ...] = ()
    sentences: list[int] = field(default_factory=list)


_TITLE_LINE_WORDS = 6  # a first line this short with no closing punctuation is a title, not a wrapped line


def _title_lines(paragraph: str) -> list[str]:
    """A paragraph whose first line is a title ("Samuel Fuller" above "Samuel Michael Fuller (1912 ..."),
    split after it, so the title is not run into the first sentence; hard-wrapped prose (lines of ten words
    or more, or ending in punctuation) is left whole."""
    first, sep, rest = paragraph.strip().partition("\n")
    words = first.split()
    if sep and rest.strip() and 0 < len(words) <= _TITLE_LINE_WORDS and first.rstrip()[-1:].isalnum():
        return [first, rest]
    return [paragraph]


def split_sentences(text: str) -> list[str]:
    return [s for s, _title in marked_sentences(text)]


def marked_sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, is a title line): a title's first word is not "at a sentence start" (where common
    words are capitalised too), so a name standing alone as a title counts as a name."""
    out: list[tuple[str, bool]] = []
    for block in _PARAGRAPH.split(text):
        parts = _title_lines(block)
        for k, paragraph in enumerate(parts):
            sentences: list[str] = []
            _split_paragraph(_SPACES.sub(" ", paragraph).strip(), sentences)
            out += [(x, len(parts) == 2 and k == 0) for x in sentences]
    return out


def _split_paragraph(paragraph: str, sentences: list[str]) -> None:
    start = 0
    for m in _SENTENCE_END.finditer(paragraph):
        before = paragraph[start : m.start()].rsplit(" ", 1)[-1].lower()
        if before in lx.TITLES or (len(before) == 1 and before.isalpha()):
            continue  # "Mr. Scrooge", "J. B. Lippincott"
        sentences.append(paragraph[start : m.end()].strip())
        start = m.end()
    if paragraph[start:].strip():
        sentences.append(paragraph[start:].strip())


def _is_word(tok: str) -> bool:
    return tok[0].isalpha()


def _is_cap(tok: str) -> bool:
    low = _base(tok)[0].lower()
    if not tok[0].isupper() or "'" in low or "’" in low:  # contractions: I'll, Don't
        return False
    return low not in lx.STOPWORDS and not (low.endswith("s") and low[:-1] in lx.STOPWORDS)


def _base(tok: str) -> tuple[str, bool]:
    """Strip a possessive; the flag says the phrase must end here."""
    for suffix in ("'s", "’s"):
        if tok.endswith(suffix) and len(tok) > 2:
            return tok[: -len(suffix)], True
    return tok, False


def _heading(tokens: list[str]) -> bool:
    words = [t for t in tokens if _is_word(t) and len(t) > 1]
    return bool(words) and sum(t.isupper() for t in words) * 2 > len(words)


def _proper_phrase(tokens: list[str], i: int, max_words: int) -> tuple[list[str], int]:
    """Capitalised run starting at ``i`` (ends after a possessive): (words, next index)."""
    words: list[str] = []
    j = i
    while j < len(tokens) and len(words) < max_words:
        tok = tokens[j]
        if words and tok.lower() in lx.CONNECTORS and j + 1 < len(tokens) and _is_cap(tokens[j + 1]):
            words.append(tok.lower())
            j += 1
            continue
        if not (_is_word(tok) and _is_cap(tok)):
            break
        base, possessive = _base(tok)
        words.append(base)
        j += 1
        if possessive:
            break
    return words, j


def _content_word(tok: str) -> bool:
    low = tok.lower()
    if not _is_word(tok) or tok[0].isupper() or low in lx.STOPWORDS or len(low) < 3 or "'" in low:
        return False
    if low.endswith("ly") or (low.endswith("ed") and len(low) > 4):
        return False
    return not low.endswith("ing") or low in lx.NOUN_ING


class _Scanner:
    def __init__(self, max_words: int):
        self.max_words = max_words
        self.cands: dict[str, _Candidate] = {}
        self.lower_words: set[str] = set()

    def add(self, words: list[str], sent: int, *, at_start=False, title=False, proper=True, speech=False):
        name = normalise_name(" ".join(words))
        if not name or len(name) < 2 or name.replace(" ", "").isdigit():
            return
        cand = self.cands.setdefault(name, _Candidate(words=tuple(words), proper=proper))
        cand.count += 1
        cand.start_count += at_start
        cand.title |= title
        cand.speech |= speech
        if sent not in cand.sentences:
            cand.sentences.append(sent)

    def scan(self, tokens: list[str], sent: int, title_line: bool = False) -> None:
        self.lower_words.update(t for t in tokens if _is_word(t) and t[0].islower())
        if not _heading(tokens):
            self._proper(tokens, sent, at_start=not title_line)
        self._noun_phrases(tokens, sent)

    def _proper(self, tokens: list[str], sent: int, at_start: bool = True) -> None:
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            title = tok.lower() in lx.TITLES and i + 1 < len(tokens)
            if title:
                j = i + 1 + (tokens[i + 1] == ".")
                words, nxt = _proper_phrase(tokens, j, self.max_words - 1)
                if words:
                    self.add([_title(tok), *words], sent, title=True)
                    i, at_start = nxt, False
                    continue
            if _is_word(tok) and _is_cap(tok):
                words, nxt = _proper_phrase(tokens, i, self.max_words)
                speech = _speech(tokens, i - 1) or _speech(tokens, nxt)
                self.add(words, sent, at_start=at_start, speech=speech)
                i, at_start = nxt, False
                continue
            at_start = tok in _QUOTES or tok in ".!?:;" or (at_start and not _is_word(tok))
            i += 1

    def _noun_phrases(self, tokens: list[str], sent: int) -> None:
        run: list[str] = []
        for tok in [*tokens, "."]:
            if _content_word(tok):
                run.append(tok.lower())
                continue
            for n in range(2, min(len(run), self.max_words) + 1):
                for start in range(len(run) - n + 1):
                    self.add(run[start : start + n], sent, proper=False)
            run = []


def _title(tok: str) -> str:
    return tok.capitalize() + ("." if tok.lower() in lx.ABBREVIATED_TITLES else "")


def _speech(tokens: list[str], i: int) -> bool:
    return 0 <= i < len(tokens) and tokens[i].lower() in lx.SPEECH_VERBS


def _accepted(cand: _Candidate, lower_words: set[str]) -> bool:
    if not cand.proper:
        return cand.count >= 2
    if len(cand.words) == 1 and cand.words[0].lower() in lower_words and cand.count - cand.start_count < 2:
        return False  # "Darkness" at a sentence start, "darkness" elsewhere
    return cand.title or cand.count > cand.start_count or cand.start_count >= 2


def entity_type(cand: _Candidate) -> str:
    """Type from lexicons applied to the phrase head ("Bank" in "Bank of England"), then case."""
    words = [part for w in cand.words for part in w.lower().split("-") if part]
    head = words[: words.index("of")] if "of" in words[1:] else words
    if cand.title:
        return "person"
    if any(w in lx.ORG_WORDS for w in head):
        return "organization"
    if " ".join(words) in lx.GEO_NAMES or any(w in lx.GEO_WORDS for w in head) or head[-1].endswith(lx.GEO_SUFFIXES):
        return "geo"
    if any(w in lx.EVENT_WORDS for w in head):
        return "event"
    if cand.proper and (
        cand.speech or len(words) > 1 or len(words[0]) < 6 or not words[0].endswith(lx.ADJECTIVE_SUFFIXES)
    ):
        return "person"
    return "concept"


def _trim(sentence: str) -> str:
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return sentence
    return sentence[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + "…"


def pair_span(sentence: str, a: str, b: str) -> str:
    """The words of ``sentence`` from the first of names ``a`` and ``b`` to the end of the other, with
    ``PAIR_CONTEXT_WORDS`` more either side ("…" where the sentence goes on); the whole (trimmed) sentence
    when a name cannot be found in it as written."""
    found = [re.search(rf"(?<!\w){re.escape(name)}(?!\w)", sentence, re.IGNORECASE) for name in (a, b)]
    if not all(found):
        return _trim(sentence)
    start, end = min(m.start() for m in found), max(m.end() for m in found)
    words = sentence.split(" ")
    offsets, pos = [], 0
    for word in words:
        offsets.append(pos)
        pos += len(word) + 1
    first = max(0, sum(o <= start for o in offsets) - 1 - PAIR_CONTEXT_WORDS)
    last = min(len(words), sum(o < end for o in offsets) + PAIR_CONTEXT_WORDS)
    span = " ".join(words[first:last])
    return _trim(("…" if first else "") + span + ("…" if last < len(words) else ""))


def extract_chunk_fast(
    chunk_text: str,
    chunk_id: str,
    doc_id: str,
    *,
    max_phrase_words: int = 4,
    max_entities: int = 30,
    max_relations: int = 60,
) -> ExtractionResult:
    marked = marked_sentences(chunk_text)
    sentences = [x for x, _ in marked]
    scanner = _Scanner(max(max_phrase_words, 1))
    for index, (sentence, title_line) in enumerate(marked):
        scanner.scan(_TOKEN.findall(sentence), index, title_line)
    accepted = [(n, c) for n, c in scanner.cands.items() if _accepted(c, scanner.lower_words)]
    ranked = sorted(accepted, key=lambda nc: (-nc[1].count, nc[1].sentences[0]))[:max_entities]
    entities = [
        EntityFragment(
            name=name,
            type=entity_type(cand),
            description=" ".join(_trim(sentences[s]) for s in cand.sentences[:2]),
            source_id=chunk_id,
            doc_id=doc_id,
        )
        for name, cand in ranked
    ]
    relations = _cooccurrences(ranked, sentences, chunk_id, doc_id)[:max_relations]
    return ExtractionResult(chunk_id=chunk_id, entities=entities, relations=relations)


def _cooccurrences(
    ranked: list[tuple[str, _Candidate]], sentences: list[str], chunk_id: str, doc_id: str
) -> list[RelationFragment]:
    by_sentence: dict[int, list[str]] = {}
    for name, cand in ranked:
        for s in cand.sentences:
            by_sentence.setdefault(s, []).append(name)
    weights: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], int] = {}
    for s in sorted(by_sentence):
        names = by_sentence[s][:MAX_PAIR_ENTITIES]
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                key = relation_key(a, b)
                weights[key] += 1
                first.setdefault(key, s)
    keys = sorted(weights, key=lambda k: (-weights[k], first[k], k))
    return [
        RelationFragment(
            src=k[0],
            tgt=k[1],
            description=pair_span(sentences[first[k]], k[0], k[1]),
            keywords="co-occurrence",
            weight=float(weights[k]),
            strength=float(weights[k]),
            source_id=chunk_id,
            doc_id=doc_id,
        )
        for k in keys
    ]


STRONG_EDGE_WEIGHT = 3.0  # an entity with an edge this heavy is kept by ``prune_graph`` whatever its mentions


def prune_graph(
    entities: dict[str, Entity],
    relations: dict[tuple[str, str], Relation],
    min_mentions: int = 2,
    strong_edge_weight: float = STRONG_EDGE_WEIGHT,
) -> tuple[dict[str, Entity], dict[tuple[str, str], Relation]]:
    """Corpus-level pruning of a co-occurrence graph.

    Rule: an entity is kept when it was extracted from at least ``min_mentions`` distinct chunks
    (``len(set(source_ids))``), or when at least one of its edges has a total weight of at least
    ``strong_edge_weight`` (it repeatedly co-occurred with the same entity). Relations are kept
    only when both endpoints are kept. Inputs are not modified.
    """
    strong: set[str] = set()
    for (a, b), rel in relations.items():
        if rel.weight >= strong_edge_weight:
            strong.update((a, b))
    kept = {name: ent for name, ent in entities.items() if len(set(ent.source_ids)) >= min_mentions or name in strong}
    kept_relations = {key: rel for key, rel in relations.items() if key[0] in kept and key[1] in kept}
    return kept, kept_relations
