"""Deterministic entity / relationship extraction in the graph record format, and gleaning."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from shared.domain.prompts.delimiters import COMPLETE, RECORD, TEXT_CLOSE, TEXT_OPEN, TUPLE

from .textutil import STOPWORDS, clean, content_words, digest, sentences

MAX_ENTITIES = 25
MAX_RELATIONS = 40
GLEAN_BATCH = 5
DEFAULT_TYPES = ("organization", "person", "geo", "event")
TITLES = frozenset({"Mr.", "Mrs.", "Ms.", "Dr.", "St.", "Sir", "Madam", "Miss", "Lady", "Lord"})
_CAP = r"(?:(?:Mr|Mrs|Ms|Dr|St)\.\s+)?[A-Z][A-Za-z'’\-]*"
_RUN = re.compile(rf"{_CAP}(?:\s+{_CAP})*")
_ROMAN = re.compile(r"^[IVXLC]+$")
_PLACE = re.compile(r"(Street|Road|Lane|City|Town|Square|Court|Hall|Church|Market|River|Hill|Park|Island|County)$")
_ORG = re.compile(r"(Company|Inc|Ltd|Bank|Society|Foundation|Corporation|University|Office|Association|Council)$")
_SPEECH = r"(?:said|cried|replied|answered|asked|exclaimed|whispered|returned|observed|thought)"
_EMITTED = re.compile(r'\("entity"' + re.escape(TUPLE) + r"(.*?)" + re.escape(TUPLE))
_KINDS = {
    "person": ("person", "people", "character", "individual"),
    "place": ("geo", "location", "place", "gpe", "city", "country"),
    "org": ("organization", "organisation", "org", "company", "group"),
}


@dataclass
class Entity:
    key: str
    name: str
    count: int
    first: int  # index of the first sentence mentioning it
    kind: str = ""


@dataclass
class Analysis:
    sents: list[str]
    types: tuple[str, ...]
    entities: list[Entity]  # capitalised candidates, most frequent first
    extra: list[Entity]  # lower-case terms for gleaning, most frequent first
    mentions: list[set[str]] = field(default_factory=list)  # entity keys per sentence
    where: dict[str, list[int]] = field(default_factory=dict)  # sentence indexes per entity key


def parse_prompt(prompt: str) -> tuple[str, tuple[str, ...]]:
    """(chunk text, entity types) of an extraction prompt."""
    types: tuple[str, ...] = DEFAULT_TYPES
    m = re.search(r"^Entity_types:\s*(.+)$", prompt, re.MULTILINE)
    if m:
        parsed = tuple(t.strip(" []'\"") for t in m.group(1).split(","))
        types = tuple(t for t in parsed if t) or DEFAULT_TYPES
    start = prompt.rfind(TEXT_OPEN + "\n")
    end = prompt.rfind("\n" + TEXT_CLOSE)
    if start < 0 or end < start:
        return "", types
    return prompt[start + len(TEXT_OPEN) + 1 : end], types


def _split_run(words: list[str], initial: bool) -> list[tuple[list[str], bool]]:
    """One capitalised run cut into names at stopwords, possessives and a word the name already holds (a title line
    runs into its text's first sentence: "Paul Bettany" then "Paul Bettany (born ..." is two mentions, as an LLM
    reads it, not a name "Paul Bettany Paul")."""
    out: list[tuple[list[str], bool]] = []
    current: list[str] = []
    for word in words:
        possessive = word.endswith(("'s", "’s"))
        word = word[:-2] if possessive else word.rstrip("'’-")
        stop = word.lower() in STOPWORDS or _ROMAN.match(word) or len(word) < 2
        if stop and word not in TITLES:
            if current:
                out.append((current, initial))
            current, initial = [], False
            continue
        if word in current:
            out.append((current, initial))
            current, initial = [], False
        current.append(word)
        if possessive:
            out.append((current, initial))
            current, initial = [], False
    if current:
        out.append((current, initial))
    return out


def _pieces(words: list[str], initial: bool) -> list[tuple[list[str], bool]]:
    """A name without trailing titles, in pieces of at most three words that are not all titles."""
    while words and words[-1] in TITLES:
        words = words[:-1]
    pieces = [(words[i : i + 3], initial and i == 0) for i in range(0, len(words), 3)]
    return [(piece, first) for piece, first in pieces if any(w not in TITLES for w in piece)]


def name_runs(sentence: str) -> list[tuple[list[str], bool]]:
    """Capitalised word runs of a sentence as (words, sentence_initial)."""
    lead = len(sentence) - len(sentence.lstrip("\"'“‘([_*-— "))
    runs = [run for m in _RUN.finditer(sentence) for run in _split_run(m.group(0).split(), m.start() <= lead)]
    return [piece for ws, initial in runs for piece in _pieces(ws, initial)]


def _shouting(sentence: str) -> bool:
    letters = sum(map(str.isalpha, sentence))
    return letters >= 8 and sum(map(str.isupper, sentence)) > 0.6 * letters


_AFTER_SPEECH = re.compile(rf"\b{_SPEECH}\s+")
_BEFORE_SPEECH = re.compile(rf",?\s+{_SPEECH}\b")
_WINDOW = 120


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass
class SpeechContext:
    """Text right after and right before each speech verb of a chunk, found once per chunk (one
    compiled regex each) instead of one freshly compiled regex per candidate name."""

    after: list[str]
    before: list[str]

    @classmethod
    def of(cls, text: str) -> SpeechContext:
        after = [text[m.end() : m.end() + _WINDOW] for m in _AFTER_SPEECH.finditer(text)]
        before = [text[max(0, m.start() - _WINDOW - 1) : m.start()] for m in _BEFORE_SPEECH.finditer(text)]
        return cls(after, before)

    def speaks(self, name: str) -> bool:
        n = len(name)
        # "said NAME" followed by a word boundary, or "NAME, said" preceded by one
        return any(c.startswith(name) and (len(c) == n or not _is_word(c[n])) for c in self.after) or any(
            c.endswith(name) and (len(c) == n or not _is_word(c[-n - 1])) for c in self.before)


def _kind(name: str, speech: SpeechContext) -> str:
    if name.split()[0] in TITLES:
        return "person"
    if _PLACE.search(name):
        return "place"
    if _ORG.search(name):
        return "org"
    return "person" if speech.speaks(name) else ""


def type_for(entity: Entity, types: tuple[str, ...]) -> str:
    for t in types:
        if entity.kind and t.lower() in _KINDS[entity.kind]:
            return t
    return types[digest("type", entity.key) % len(types)]


@lru_cache(maxsize=512)
def analyse(text: str, types: tuple[str, ...]) -> Analysis:
    sents = sentences(text)
    runs = [
        (idx, " ".join(ws), initial, _shouting(sent))
        for idx, sent in enumerate(sents)
        for ws, initial in name_runs(sent)
    ]
    # a single capitalised word only counts at the start of a sentence if it also occurs mid-sentence;
    # words of an all-caps line (a heading, a caption) only if they also occur in normal prose
    mid = {surface.upper() for _, surface, initial, _ in runs if not initial}
    prose = {surface.upper() for _, surface, _, shout in runs if not shout}
    found: dict[str, Entity] = {}
    surfaces: dict[str, Counter] = {}
    mentions: list[set[str]] = [set() for _ in sents]
    for idx, surface, initial, shout in runs:
        key = surface.upper()
        if (initial and " " not in surface and key not in mid) or (shout and key not in prose):
            continue
        entity = found.setdefault(key, Entity(key, surface, 0, idx))
        entity.count += 1
        surfaces.setdefault(key, Counter())[surface] += 1
        mentions[idx].add(key)
    speech = SpeechContext.of(text)
    for key, entity in found.items():
        entity.name = max(surfaces[key].items(), key=lambda kv: (not kv[0].isupper(), kv[1], kv[0]))[0]
        entity.kind = _kind(entity.name, speech)
    ranked = sorted(found.values(), key=lambda e: (-e.count, e.first, e.key))
    name_words = {w for key in found for w in key.lower().split()}
    extra = _lowercase_terms(sents, name_words)
    where: dict[str, list[int]] = {}
    for idx, keys in enumerate(mentions):
        for key in keys:
            where.setdefault(key, []).append(idx)
    return Analysis(sents, types, ranked, extra, mentions, where)


def _lowercase_terms(sents: list[str], exclude: set[str]) -> list[Entity]:
    counts: Counter = Counter()
    first: dict[str, int] = {}
    for idx, sent in enumerate(sents):
        for w in re.findall(r"\b[a-z][a-z\-]{5,}\b", sent):
            if w in STOPWORDS or w in exclude or w.endswith(("ed", "ly", "ing")):
                continue
            counts[w] += 1
            first.setdefault(w, idx)
    terms = [Entity(w.upper(), w.title(), n, first[w]) for w, n in counts.items() if n >= 2]
    return sorted(terms, key=lambda e: (-e.count, e.first, e.key))


def _mentions_of(analysis: Analysis, entity: Entity) -> list[int]:
    if entity.key in analysis.where:
        return analysis.where[entity.key]
    pattern = re.compile(rf"\b{re.escape(entity.key.lower())}\b")
    return [i for i, s in enumerate(analysis.sents) if pattern.search(s.lower())]


def _relations(analysis: Analysis, chosen: list[Entity], anchors: list[Entity], cap: int) -> list[str]:
    """Records for pairs co-occurring in a sentence, each pair touching ``chosen``."""
    where = {e.key: set(_mentions_of(analysis, e)) for e in chosen + anchors}
    names = {e.key: e.name for e in chosen + anchors}
    chosen_keys = {e.key for e in chosen}
    pairs: dict[tuple[str, str], list[int]] = {}
    keys = sorted(where)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if a not in chosen_keys and b not in chosen_keys:
                continue
            shared = sorted(where[a] & where[b])
            if shared:
                pairs[(a, b)] = shared
    ranked = sorted(pairs.items(), key=lambda kv: (-len(kv[1]), kv[1][0], kv[0]))[:cap]
    records = []
    for (a, b), idxs in ranked:
        sent = analysis.sents[idxs[0]]
        skip = set(a.lower().split()) | set(b.lower().split())
        kws = [w for w, _ in Counter(w for w in content_words(sent) if w not in skip).most_common(2)]
        keywords = clean(", ".join(kws) or "related", 60)
        src, tgt = sorted((names[a], names[b]))
        records.append(
            f'("relationship"{TUPLE}{src}{TUPLE}{tgt}{TUPLE}{clean(sent)}{TUPLE}{keywords}{TUPLE}{min(len(idxs), 10)})'
        )
    return records


def _entity_record(analysis: Analysis, entity: Entity) -> str:
    idxs = _mentions_of(analysis, entity)
    desc = clean(analysis.sents[idxs[0]] if idxs else entity.name)
    return f'("entity"{TUPLE}{clean(entity.name, 80)}{TUPLE}{type_for(entity, analysis.types)}{TUPLE}{desc})'


def render(records: list[str]) -> str:
    return (RECORD + "\n").join(records) + ("\n" if records else "") + COMPLETE


def extract_records(prompt: str) -> list[str]:
    return records_of(*parse_prompt(prompt))


def records_of(text: str, types: tuple[str, ...]) -> list[str]:
    """Entity then relationship records of a chunk (the one extraction rule every prompt format shares)."""
    analysis = analyse(text, types)
    chosen = analysis.entities[:MAX_ENTITIES]
    return [_entity_record(analysis, e) for e in chosen] + _relations(analysis, chosen, [], MAX_RELATIONS)


def emitted_keys(assistant_texts: list[str]) -> set[str]:
    return {m.strip().upper() for text in assistant_texts for m in _EMITTED.findall(text)}


def glean_pool(prompt: str, assistant_texts: list[str]) -> tuple[Analysis, list[Entity], list[Entity]]:
    """(analysis, entities already emitted, entities still to add, in order)."""
    return glean_pool_of(*parse_prompt(prompt), emitted_keys(assistant_texts))


def glean_pool_of(text: str, types: tuple[str, ...], done: set[str]) -> tuple[Analysis, list[Entity], list[Entity]]:
    analysis = analyse(text, types)
    everything = analysis.entities + analysis.extra
    emitted = [e for e in everything if e.key in done]
    remaining = [e for e in everything if e.key not in done]
    return analysis, emitted, remaining


def glean_records(prompt: str, assistant_texts: list[str]) -> list[str]:
    return glean_records_of(*glean_pool(prompt, assistant_texts))


def glean_records_of(analysis: Analysis, emitted: list[Entity], remaining: list[Entity]) -> list[str]:
    chosen = remaining[:GLEAN_BATCH]
    if not chosen:
        return []
    records = [_entity_record(analysis, e) for e in chosen]
    return records + _relations(analysis, chosen, emitted, 10)


def glean_more(prompt: str, assistant_texts: list[str]) -> bool:
    return bool(glean_pool(prompt, assistant_texts)[2])
