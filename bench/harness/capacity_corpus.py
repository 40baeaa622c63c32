"""The capacity bench's corpora: real text first, then renamed copies, cut at a target chunk count."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from bench.harness.results import DATA
from shared.domain.tokens import count_tokens_batch

MODEL = "gpt-4o-mini"
PACK_TOKENS = 2000  # short passages are joined into documents of about this many tokens
_NAME = re.compile(r"\b([A-Z][a-z]{2,})\b")


def chunks_of(tokens: int, size: int, overlap: int) -> int:
    """How many chunks ``chunk_by_tokens`` makes of a text of ``tokens`` tokens."""
    return len(range(0, max(tokens - overlap, 1), size - overlap))


def renamed(text: str, copy: int) -> str:
    """The text with every capitalised name made the ``copy``-th copy's own (new entities, same shape). The
    copy number is spelled in letters (7 -> ``-ch``, 12 -> ``-cbc``): the LLM-free extractor's names end in a
    letter, so a digit suffix was dropped and every copy's ``Scrooge-c<n>`` became one ``SCROOGE-C``."""
    suffix = "-c" + "".join("abcdefghij"[int(d)] for d in str(copy))
    return _NAME.sub(lambda m: f"{m.group(1)}{suffix}", text)


def _jsonl(path: str) -> Iterator[dict]:
    return (json.loads(line) for line in (DATA / path).read_text(encoding="utf-8").splitlines())


def _paragraphs() -> Iterator[tuple[str, str]]:
    hotpot = json.loads((DATA / "hotpotqa_hipporag100" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    for title, sentences in hotpot.items():
        yield title, "".join(sentences) if isinstance(sentences, list) else str(sentences)
    musique = ((p["title"], p["paragraph_text"]) for q in _jsonl("musique_dev/migres_musique_200.jsonl")
               for p in q.get("paragraphs", []))
    wiki = ((title, "".join(s)) for q in _jsonl("2wikimultihopqa_dev/migres_wikihop_200.jsonl")
            for title, s in q.get("context", []))
    yield from dict.fromkeys([*musique, *wiki])  # each (title, text) once, in order


def real_pool() -> list[tuple[str, str]]:
    """(title, text) documents of the real text, short passages packed to about ``PACK_TOKENS`` tokens."""
    docs = [("A Christmas Carol", (DATA / "christmas_carol.txt").read_text(encoding="utf-8-sig"))]
    docs += [(f"msft {d['doc_id']}", d["text"]) for d in
             json.loads((DATA / "msft_earnings_calls" / "corpus.json").read_text(encoding="utf-8"))]
    paragraphs = list(_paragraphs())
    pack: list[str] = []
    pack_tokens = 0
    for (title, text), n in zip(paragraphs, count_tokens_batch([t for _, t in paragraphs], MODEL), strict=True):
        pack.append(f"{title}\n{text}")
        pack_tokens += n
        if pack_tokens >= PACK_TOKENS:
            docs.append((f"passages {len(docs)}", "\n\n".join(pack)))
            pack, pack_tokens = [], 0
    if pack:
        docs.append((f"passages {len(docs)}", "\n\n".join(pack)))
    return docs


def corpus(target_chunks: int, size: int, overlap: int) -> dict:
    """Documents making at least ``target_chunks`` chunks (the last one may overshoot by a few), with each
    document's chunks, the totals, the renamed copies and the real documents among them."""
    pool = real_pool()
    docs: list[tuple[str, str]] = []
    doc_chunks: list[int] = []
    chunks = tokens = copy = 0
    while chunks < target_chunks:
        batch = pool if copy == 0 else [(f"{t} (renamed copy {copy})", renamed(x, copy)) for t, x in pool]
        for (title, text), n in zip(batch, count_tokens_batch([x for _, x in batch], MODEL), strict=True):
            docs.append((title, text))
            doc_chunks.append(chunks_of(n, size, overlap))
            chunks += doc_chunks[-1]
            tokens += n
            if chunks >= target_chunks:
                break
        copy += 1
    return {"docs": docs, "doc_chunks": doc_chunks, "chunks": chunks, "tokens": tokens, "renamed_copies": copy - 1,
            "real_documents": min(len(docs), len(pool))}


def batches(built: dict, batch_chunks: int, then: tuple[int, int] = (0, 0)) -> list[list[tuple[str, str]]]:
    """The corpus's documents in batches of about ``batch_chunks`` chunks (0: one batch), then ``then`` (count, chunks)
    smaller ones at the end, dealt in turn (each document to the batch least filled for its size, in corpus order):
    every batch gets the same mix of the book, the earnings calls, the dense Wikipedia passages and the renamed
    copies, so a later batch costs more only because the tenant holds more, not because its text names more
    entities."""
    extra = then[0] * then[1]
    main = built["chunks"] - extra
    sizes = [main] if batch_chunks <= 0 else [main / max(1, round(main / batch_chunks))] * max(1, round(
        main / batch_chunks))
    sizes += [then[1]] * then[0]
    out: list[list[tuple[str, str]]] = [[] for _ in sizes]
    filled = [0] * len(sizes)
    for doc, n in zip(built["docs"], built["doc_chunks"], strict=True):
        i = min(range(len(sizes)), key=lambda b: (filled[b] / sizes[b], b))
        out[i].append(doc)
        filled[i] += n
    return out
