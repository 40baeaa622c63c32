"""Small deterministic text helpers shared by the responders."""

from __future__ import annotations

import hashlib
import re

from shared.domain.prompts.delimiters import COMPLETE, RECORD, TEXT_CLOSE, TEXT_OPEN, TUPLE

STOPWORDS = frozenset(
    """
    a an the and or but nor so yet for of in on at to from by with without into onto upon about above
    below over under after before since until while during through throughout between among against
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    this that these those there here where when why how what which who whom whose whoever whatever
    is am are was were be been being do does did done have has had having will would shall should can
    could may might must ought not no yes nay oh ah alas well now then than too very just only also
    even still ever never always often again once all any both each few more most other some such
    own same as if because though although unless whether either neither every many much one two
    let lets said says say tell told up down out off away back like unlike chapter stave part book
    mr mrs ms dr st sir madam miss lord lady behind enough himself herself itself myself yourself ourselves
    themselves something nothing anything everything someone somebody nobody anyone everyone within beyond
    across around toward towards another rather almost perhaps indeed thought little great whose upon
    """.split()
)
HONORIFICS = ("Mr.", "Mrs.", "Ms.", "Dr.", "St.", "Sir", "Madam", "Miss", "Lady", "Lord")
_ABBREV = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|Mt|No|vs|etc|e\.g|i\.e)\.", re.IGNORECASE)
_SENT_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|(?<=\])\s+(?=[A-Z])|\n\s*\n")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_SPACES = re.compile(r"\s+")
_DELIMS = (COMPLETE, TUPLE, RECORD, TEXT_OPEN, TEXT_CLOSE)


def digest(*parts: object) -> int:
    """A stable 64-bit integer from any parts (never Python's salted ``hash``)."""
    raw = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")


def unit(*parts: object) -> float:
    """A stable float in [0, 1) from any parts."""
    return digest(*parts) / 2.0**64


def clean(text: str, limit: int = 200) -> str:
    """One line, no format delimiters or quotes that could break a record, at most ``limit`` chars."""
    for needle in _DELIMS:
        while needle in text:
            text = text.replace(needle, " ")
    text = _SPACES.sub(" ", text.replace('"', "'")).strip()
    if len(text) > limit:
        cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
        text = cut.rstrip(",;:") + "..."
    return text


def sentences(text: str) -> list[str]:
    """Split prose into sentences (abbreviations such as ``Mr.`` do not end a sentence)."""
    protected = _ABBREV.sub(lambda m: m.group(0)[:-1] + "\x00", text)
    out = []
    for part in _SENT_END.split(protected):
        part = _SPACES.sub(" ", part.replace("\x00", ".")).strip()
        if part:
            out.append(part)
    return out


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (no stopwords, no one-letter words)."""
    out = []
    for raw in words(text):
        w = raw.lower().strip("'’-")
        if w.endswith(("'s", "’s")):
            w = w[:-2]
        if len(w) > 1 and w not in STOPWORDS:
            out.append(w)
    return out


def overlap(query_terms: set[str], text: str) -> int:
    return len(query_terms & set(content_words(text)))


def trim_words(text: str, max_words: int) -> str:
    parts = text.split()
    return text if len(parts) <= max_words else " ".join(parts[:max_words]) + "..."


def section(text: str, header: str, stops: tuple[str, ...] = ()) -> str:
    """Text after ``header`` up to the first of ``stops`` (or the end); empty when absent."""
    start = text.find(header)
    if start < 0:
        return ""
    body = text[start + len(header) :]
    ends = [i for i in (body.find(s) for s in stops) if i >= 0]
    return (body[: min(ends)] if ends else body).strip()
