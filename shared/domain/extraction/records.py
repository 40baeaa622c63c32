"""Robust parser for the LLM extraction record format (pure).

``("entity"<|>NAME<|>TYPE<|>DESC)##("relationship"<|>SRC<|>TGT<|>DESC<|>KEYWORDS<|>STRENGTH)##...<|COMPLETE|>``

The output may echo untrusted document text containing raw delimiters, so records are accepted
only when they are well formed *and* stand on their own:

* nothing after the first ``<|COMPLETE|>`` is read, and echoed input (between ``<<<TEXT`` and
  ``TEXT>>>``) is dropped;
* a record starts at a boundary (output start, ``##`` or a line start) with ``(`` + kind + ``<|>``
  and extends over following pieces until it ends with ``)`` and its parentheses balance, or until it
  ends with ``)`` right before the next record's opening while it holds no other opening (a
  description that leaves a parenthesis open, "(who won the...", "Hashim( c.", ends there instead of
  swallowing every record after it); a record that contains a second record opening is rejected
  whole, so a record smuggled inside a description is never split out of it;
* a line that mixes records with other text is contaminated: none of its records is kept;
* field counts are exact (entity 4, relationship 6) and names are cleaned and bounded.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from shared.domain.merge import UNKNOWN_TYPE, relation_key
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.domain.prompts.delimiters import COMPLETE, GRAPH_FIELD_SEP, TEXT_CLOSE, TEXT_OPEN, TUPLE, neutralise

MAX_NAME_CHARS = 120
_OPEN = r"\(\s*[\"'“”‘’]?\s*(entity|relationship)\s*[\"'“”‘’]?\s*<\|>"
_RECORD_OPEN = re.compile(r"^(?:\d{1,3}[.)]\s+|[-*•]\s+)?" + _OPEN, re.I)
_NESTED_OPEN = re.compile(_OPEN, re.I)
_BOUNDARY = re.compile(r"(##|\n)")
_FENCE = re.compile(r"^`{3}\w*$")
_TYPE = re.compile(r"^[a-z][a-z0-9_\-]{0,39}$")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")
_NAME_STRIP = " \"'`“”‘’«»()[]{}<>*_"
_QUOTES_STRIP = " \"'`“”‘’«»*_"
_BRACKETS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_DESC_STRIP = " \"'`“”‘’"
_FIELDS = {"entity": 4, "relationship": 6}


@dataclass
class _Record:
    text: str
    first_line: int
    last_line: int


def clean_text(value: str) -> str:
    """Unescape HTML, drop control / zero-width (format) characters, collapse whitespace. A printable string
    (``str.isprintable``: no character of a C category, no separator but the space) has nothing to drop and
    skips the per-character pass: most names and descriptions are printable, so most values skip it, which
    matters because the ingest worker cleans every field of every extraction answer."""
    value = html.unescape(value)
    if not value.isprintable():
        value = "".join(" " if ch.isspace() else ch for ch in value
                        if ch.isspace() or unicodedata.category(ch)[0] != "C")
    return _SPACES.sub(" ", value).strip()


def _unwrapped(name: str) -> str:
    """``name`` without the quotes, emphasis and brackets around it: a bracket goes when it wraps the whole
    name ("(Bob)") or has no partner in it ("Bob)"); a qualifier's pair stays ("Ed Wood (film)")."""
    while True:
        out = name.strip(_QUOTES_STRIP)
        if out and out[0] in _BRACKETS:
            if _wraps(out):
                out = out[1:-1]
            elif out.count(out[0]) > out.count(_BRACKETS[out[0]]):
                out = out[1:]
        for opening, closing in _BRACKETS.items():
            if out.endswith(closing) and out.count(closing) > out.count(opening):
                out = out[:-1]
        if out == name:
            return out
        name = out


def _wraps(name: str) -> bool:
    """Whether the bracket that opens ``name`` is closed by its last character (and not before)."""
    opening, closing, depth = name[0], _BRACKETS[name[0]], 0
    for i, ch in enumerate(name):
        depth += (ch == opening) - (ch == closing)
        if depth == 0:
            return i == len(name) - 1
    return False


def normalise_name(raw: str) -> str:
    """Canonical entity name: NFKC, cleaned, unquoted/unbracketed (a trailing qualifier keeps its brackets),
    single-spaced, UPPER-case."""
    name = _unwrapped(clean_text(unicodedata.normalize("NFKC", raw)))
    name = neutralise(name.replace("\x1f", "").replace(GRAPH_FIELD_SEP, " "))
    return _SPACES.sub(" ", name).strip().upper()


def normalise_type(raw: str) -> str:
    value = _SPACES.sub("_", clean_text(raw).strip(_NAME_STRIP).lower())
    return value if _TYPE.match(value) else UNKNOWN_TYPE


def _clean_description(raw: str) -> str:
    text = clean_text(raw).strip(_DESC_STRIP).replace(GRAPH_FIELD_SEP, " ")
    return neutralise(text.replace("\x1f", " ")).strip()


def _body(text: str, warnings: list[str]) -> str:
    """Text before the first completion marker, with echoed input regions removed."""
    if COMPLETE in text:
        text = text.split(COMPLETE, 1)[0]
    else:
        warnings.append("missing <|COMPLETE|> marker: output may be truncated")
    if TEXT_CLOSE in text and (TEXT_OPEN not in text or text.index(TEXT_CLOSE) < text.index(TEXT_OPEN)):
        text = text.split(TEXT_CLOSE, 1)[1]
        warnings.append("dropped echoed input before TEXT>>>")
    while TEXT_OPEN in text:
        head, _, rest = text.partition(TEXT_OPEN)
        _, closed, tail = rest.partition(TEXT_CLOSE)
        text = head + "\n" + (tail if closed else "")
        warnings.append("dropped echoed input between <<<TEXT and TEXT>>>")
    return text


def _closes(record: str, next_opens: Callable[[], bool]) -> bool:
    """Whether ``record`` is whole: it ends with ``)`` and its parentheses balance, or ``next_opens()`` (the next
    piece opens a record, or the answer ends complete) and it holds no opening but its own (only a stray
    ``(`` in a field left it open). ``next_opens`` is asked only then: most records balance."""
    stripped = record.rstrip()
    if not stripped.endswith(")"):
        return False
    if stripped.count(")") >= stripped.count("("):
        return True
    return not _NESTED_OPEN.search(stripped, 1) and next_opens()


def _opens_next(parts: list[str], i: int, complete: bool) -> bool:
    """Whether the first non-blank piece after piece ``i`` opens a record, or nothing follows in an answer
    that reached its completion marker (its last record is not cut short)."""
    for j in range(i + 2, len(parts), 2):
        if part := parts[j].strip():
            return bool(_RECORD_OPEN.match(part))
    return complete


def split_records(text: str, warnings: list[str]) -> list[str]:
    """The well-formed, uncontaminated record strings of an LLM answer (see module docstring)."""
    complete = COMPLETE in text
    parts = _BOUNDARY.split(_body(text, warnings))
    records: list[_Record] = []
    contaminated: set[int] = set()
    current: _Record | None = None
    line = 0
    for i, part in enumerate(parts):
        if i % 2:  # a separator
            if current is not None:
                current.text += part
            line += part == "\n"
            continue
        if current is not None:
            current.text += part
            current.last_line = line
        elif _RECORD_OPEN.match(part.strip()):
            current = _Record(part.strip(), line, line)
        elif part.strip() and not _FENCE.match(part.strip()):
            contaminated.add(line)
        if current is not None and _closes(current.text, lambda i=i: _opens_next(parts, i, complete)):
            records.append(current)
            current = None
    if current is not None:
        warnings.append(f"dropped partial last record: {current.text[:60]!r}")
    kept = [r.text.strip() for r in records if not contaminated & set(range(r.first_line, r.last_line + 1))]
    if len(kept) < len(records):
        warnings.append(f"skipped {len(records) - len(kept)} record(s) on lines mixed with other text")
    return kept


def _fields(record: str, warnings: list[str]) -> tuple[str, list[str]] | None:
    body = _RECORD_OPEN.sub(lambda m: f'("{m.group(1)}"{TUPLE}', record, count=1).strip()
    if _NESTED_OPEN.search(body, 1):
        warnings.append(f"skipped record containing another record: {record[:60]!r}")
        return None
    fields = [f.strip() for f in body[1:-1].split(TUPLE)]
    kind = fields[0].strip(_DESC_STRIP).lower()
    if len(fields) != _FIELDS[kind]:
        warnings.append(f"skipped {kind} record with {len(fields)} fields: {record[:60]!r}")
        return None
    return kind, fields[1:]


def _valid_name(name: str, raw: str, warnings: list[str]) -> bool:
    if not name:
        warnings.append(f"skipped record with empty name {raw[:40]!r}")
        return False
    if len(name) > MAX_NAME_CHARS:
        warnings.append(f"skipped record with {len(name)}-char name {name[:40]!r}")
        return False
    return True


def _strength(raw: str, warnings: list[str]) -> float:
    match = _NUMBER.search(clean_text(raw))
    value = float(match.group()) if match else math.nan
    if not math.isfinite(value) or value <= 0:
        warnings.append(f"non-numeric strength {raw[:20]!r}: using 1.0")
        return 1.0
    return value


def _keywords(raw: str) -> str:
    words = [w.strip(_DESC_STRIP) for w in _clean_description(raw).split(",")]
    return ", ".join(dict.fromkeys(w for w in words if w))


def _entity(fields: list[str], chunk_id: str, doc_id: str, warnings: list[str]) -> EntityFragment | None:
    name = normalise_name(fields[0])
    if not _valid_name(name, fields[0], warnings):
        return None
    return EntityFragment(
        name=name,
        type=normalise_type(fields[1]),
        description=_clean_description(fields[2]),
        source_id=chunk_id,
        doc_id=doc_id,
    )


def _relation(fields: list[str], chunk_id: str, doc_id: str, warnings: list[str]) -> RelationFragment | None:
    src, tgt = normalise_name(fields[0]), normalise_name(fields[1])
    if not (_valid_name(src, fields[0], warnings) and _valid_name(tgt, fields[1], warnings)):
        return None
    if src == tgt:
        warnings.append(f"skipped self-relation of {src[:40]!r}")
        return None
    strength = _strength(fields[4], warnings)
    return RelationFragment(
        src=src,
        tgt=tgt,
        description=_clean_description(fields[2]),
        keywords=_keywords(fields[3]),
        weight=strength,
        strength=strength,
        source_id=chunk_id,
        doc_id=doc_id,
    )


def combine(
    chunk_id: str,
    doc_id: str,
    entities: list[EntityFragment],
    relations: list[RelationFragment],
    warnings: list[str],
) -> ExtractionResult:
    """Deduplicate fragments of one chunk and add placeholder entities for relation endpoints."""
    ents: dict[str, EntityFragment] = {}
    for e in entities:
        if e.name not in ents:
            ents[e.name] = e.model_copy()
            continue
        kept = ents[e.name]
        if kept.type == UNKNOWN_TYPE:
            kept.type = e.type
        kept.description = _join(kept.description, e.description)
    rels: dict[tuple[str, str], RelationFragment] = {}
    for r in relations:
        key = relation_key(r.src, r.tgt)
        if key not in rels:
            rels[key] = r.model_copy()
            continue
        kept_r = rels[key]
        kept_r.description = _join(kept_r.description, r.description)
        kept_r.keywords = ", ".join(dict.fromkeys(filter(None, (kept_r.keywords + ", " + r.keywords).split(", "))))
        kept_r.weight += r.weight
        kept_r.strength = max(kept_r.strength, r.strength)
    for r in rels.values():
        for endpoint in (r.src, r.tgt):
            if endpoint not in ents:
                ents[endpoint] = EntityFragment(name=endpoint, source_id=chunk_id, doc_id=doc_id)
    return ExtractionResult(
        chunk_id=chunk_id, entities=list(ents.values()), relations=list(rels.values()), warnings=warnings
    )


def _join(a: str, b: str) -> str:
    parts = [p for p in a.split(GRAPH_FIELD_SEP) + b.split(GRAPH_FIELD_SEP) if p]
    return GRAPH_FIELD_SEP.join(dict.fromkeys(parts))


def parse_records(text: str, chunk_id: str, doc_id: str = "") -> ExtractionResult:
    warnings: list[str] = []
    entities: list[EntityFragment] = []
    relations: list[RelationFragment] = []
    for record in split_records(text, warnings):
        parsed = _fields(record, warnings)
        if parsed is None:
            continue
        kind, fields = parsed
        if kind == "entity":
            entity = _entity(fields, chunk_id, doc_id, warnings)
            entities += [entity] if entity else []
        else:
            relation = _relation(fields, chunk_id, doc_id, warnings)
            relations += [relation] if relation else []
    return combine(chunk_id, doc_id, entities, relations, warnings)
