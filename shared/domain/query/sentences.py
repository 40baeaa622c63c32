"""The whole sentences of a retrieved text, each with its span in that text, for extractive answers.

Documents are often hard-wrapped (Project Gutenberg prose, text taken out of a PDF): a line break inside a
paragraph is only a space, and a blank line (or the ``<SEP>`` between merged descriptions) ends a paragraph.
Inside a paragraph, with its whitespace made single spaces, the sentence boundaries are found by sentencex
(Wikimedia's rule-based segmenter: abbreviations such as "Mr." "Mrs." "St." "Dr.", initials, quotes and
dialogue punctuation). Its rules are compiled into its wheel, so nothing is downloaded at run time as nltk's
punkt model would be, and it splits a whole context per query where the pure-Python pysbd would take seconds.
Two corrections follow: a piece that starts lower-case continues the one before it (the "!" of "Scrooge! a
squeezing, wrenching ... old sinner!" or of "'What?' asked Scrooge." does not end a sentence), and so does the
piece after one that ends in a title ("Mr.", "St."). Each sentence keeps the character span of its own text in
the original, so a citation still points at the lines it was quoted from.

A retrieved passage is a window of its document: when the document has text before it, its first piece may be
the tail of a sentence the previous window began, and when the document goes on after it, its last piece may
be the head of one the next window ends. ``sentences(text, open_start, open_end)`` leaves such pieces out;
a window that starts (ends) at a paragraph break is whole at that edge.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from shared.domain.documents.markers import PAGE_RE
from shared.domain.extraction.lexicon import ABBREVIATED_TITLES
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP

MIN_WORDS = 6  # a shorter sentence ("'I do,' said Scrooge.", "Out upon merry Christmas!") rarely answers anything
_BREAK = re.compile(r"\n[^\S\n]*\n\s*|" + re.escape(GRAPH_FIELD_SEP))  # a blank line, or merged descriptions
_WORD = re.compile(r"\S+")
_OPENERS = "\"'‘“(_*"
_CLOSERS = "\"'’”)_*"
_TERMINAL = ".!?。！？"
_PAGE_BREAK = re.compile(r"\s*^" + PAGE_RE.pattern.strip("^$") + r"$\s*", re.MULTILINE)
_NOTE_LINE = re.compile(r"^[^\S\n]*\[[^\]\n]*\][^\S\n]*$", re.MULTILINE)
_TITLE_LINE_WORDS = 6  # a first line this short with no closing punctuation is a heading ("Samuel Fuller")


@dataclass(frozen=True)
class Sentence:
    """One sentence: its text with whitespace made single spaces, and ``start``/``end``, the span of that text
    in the original (line breaks included)."""

    text: str
    start: int
    end: int


def sentences(text: str, open_start: bool = False, open_end: bool = False) -> list[Sentence]:
    """The whole sentences of ``text`` in order (see :func:`is_whole`). ``open_start``/``open_end``: the text is
    cut out of a longer one at that edge (a passage inside its document), so the piece at an edge that is not a
    paragraph break is left out."""
    text = _unmarked(text)
    blocks = _blocks(text, open_start)
    if not blocks:
        return []
    pieces: list[list[Sentence]] = [_pieces(text, a, b, head_cut) for a, b, head_cut in blocks]
    if open_end and not _BREAK.search(text, blocks[-1][1]) and pieces[-1]:
        pieces[-1] = pieces[-1][:-1]
    return [s for block in pieces for s in block if is_whole(s.text)]


def is_whole(sentence: str) -> bool:
    """A sentence as a reader expects one: at least ``MIN_WORDS`` words, starting with a capital letter or a
    digit (after any opening quote or parenthesis) and ending in terminal punctuation (before any closing quote or
    parenthesis). A trailing ellipsis marks a text the index cut (a long description), not a sentence's end, and square
    brackets an editor's note ("[Illustration: ...]", the budget's omission marker), not the author's sentence."""
    head = sentence.lstrip(_OPENERS)
    tail = sentence.rstrip(_CLOSERS)
    if not head or not tail or len(sentence.split()) < MIN_WORDS:
        return False
    if tail.endswith(("…", "...")):
        return False
    return (head[0].isupper() or head[0].isdigit()) and tail[-1] in _TERMINAL


def _unmarked(text: str) -> str:
    """``text`` with the parser's markers made blanks of the same length (so every span stays in place): a page
    marker with the blank lines around it is a space (a sentence goes on over a PDF's page break), and a line
    holding only a bracketed note (a section marker, "[Illustration]") is an empty line (a paragraph ends)."""
    if "[" not in text:
        return text
    text = _PAGE_BREAK.sub(lambda m: " " * len(m.group()), text)
    return _NOTE_LINE.sub(lambda m: " " * len(m.group()), text)


def _blocks(text: str, open_start: bool) -> list[tuple[int, int, bool]]:
    """(start, end, first piece cut) of each paragraph. A short first line without closing punctuation above
    more lines is a heading, a paragraph of its own (it then holds no sentence), except in a first paragraph
    that may begin mid-sentence (its first line may be the end of a wrapped line)."""
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for stop, after in [*((m.start(), m.end()) for m in _BREAK.finditer(text)), (len(text), len(text))]:
        first = _WORD.search(text, pos, stop)
        if first is not None:
            start, end = first.start(), stop
            while text[end - 1].isspace():
                end -= 1
            head_cut = open_start and pos == 0  # no paragraph break before it in this text
            line_end = text.find("\n", start, end)
            line = text[start:line_end] if line_end >= 0 and not head_cut else ""
            if line.strip() and len(line.split()) <= _TITLE_LINE_WORDS and line.rstrip()[-1:].isalnum():
                out.append((start, line_end, False))
                start = _WORD.search(text, line_end, end).start()
            out.append((start, end, head_cut))
        pos = after
    return out


def _pieces(text: str, start: int, end: int, head_cut: bool) -> list[Sentence]:
    """The sentences of one paragraph ``text[start:end]``, found in its single-spaced form and mapped back."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    flat = " ".join(text[a:b] for a, b in words)
    flat_starts, at = [], 0  # where each word starts in ``flat``
    for a, b in words:
        flat_starts.append(at)
        at += b - a + 1
    spans = _merge(flat, _segment(flat))
    if head_cut:
        spans = spans[1:]

    def original(i: int, closing: bool) -> int:
        k = bisect_right(flat_starts, i - 1 if closing else i) - 1
        return words[k][0] + (i - flat_starts[k])

    return [Sentence(flat[a:b], original(a, False), original(b, True)) for a, b in spans]


def _segment(flat: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of a single-spaced paragraph, without its surrounding spaces."""
    from sentencex import segment  # imported on first use: the gateway, which never answers, does not install it

    parts = list(segment("en", flat))
    if "".join(parts) != flat:  # sentencex returns the paragraph in pieces; if ever not, it is one sentence
        parts = [flat]
    out, at = [], 0
    for part in parts:
        body = part.strip()
        if body:
            a = at + len(part) - len(part.lstrip())
            out.append((a, a + len(body)))
        at += len(part)
    for k in range(len(out) - 1):  # an opening quote after a space starts the next sentence ("... Scrooge. 'I am")
        (a, b), (_, d) = out[k], out[k + 1]
        if b - a > 2 and flat[b - 1] in _OPENERS and flat[b - 2] == " ":
            out[k], out[k + 1] = (a, b - 2), (b - 1, d)
    return out


def _merge(flat: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Join a piece that starts lower-case to the one before it, and a piece that ends in a title ("Mr.") to
    the one after it."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and (flat[a:b].lstrip(_OPENERS)[:1].islower() or _ends_in_title(flat[out[-1][0]:out[-1][1]])):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _ends_in_title(piece: str) -> bool:
    last = piece.rsplit(" ", 1)[-1]
    return last.endswith(".") and last[:-1].lstrip(_OPENERS).lower() in ABBREVIATED_TITLES
