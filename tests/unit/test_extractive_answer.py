"""The extractive answer (no LLM) on real hard-wrapped prose: A Christmas Carol as Project Gutenberg prints it
(graphfleet_cli/sample, the copy of ../shared/data/christmas_carol.txt the package ships). Every answer line is a
whole sentence of the book, ranked by its meaning with the local embedder, cited to the chunk it was quoted from."""

from __future__ import annotations

import re
from functools import cache

import pytest

from shared.domain.chunking import chunk_by_tokens
from shared.domain.documents.markers import page_markers, page_spans, pages_in_span
from shared.domain.models import Document
from shared.domain.query.context_common import Evidence, Sources
from shared.domain.query.engine import answer_query
from shared.domain.query.extractive import extractive_facts
from shared.domain.query.params import EXTRACTIVE_CANDIDATES, EXTRACTIVE_SENTENCES, QueryParam
from shared.domain.query.sentence_pages import sentence_citations
from shared.domain.query.sentences import sentences
from shared.domain.retrieval.bm25 import BM25Index, tokenize
from shared.domain.storage import VectorItem
from shared.infra.llm.local_embedder import LocalEmbedder
from tests.conftest import SAMPLE
from tests.memory_graph import InMemoryGraphReader, InMemoryVectorStore

LINE = re.compile(r"^- (?P<text>.+) \[Data: (?P<label>\w+) \((?P<cite>[^)]+)\); Documents \((?P<docs>[^)]*)\)\]$")
QUESTIONS = ["Who is Ebenezer Scrooge and how does he change?", "What happens on Christmas morning?",
             "How is Bob Cratchit related to Scrooge?", "Why does Scrooge change his ways?",
             "What did the ghost of Marley tell Scrooge?"]


@cache
def book() -> str:
    return SAMPLE.read_text(encoding="utf-8-sig")


def excerpt(first: str, last: str) -> str:
    """The book's text from the line holding ``first`` to the end of the paragraph holding ``last``."""
    text = book()
    begin = re.search(loose(first), text).start()
    start = text.rfind("\n", 0, begin) + 1
    end = text.find("\n\n", re.compile(loose(last)).search(text, begin).end())
    return text[start:end]


def loose(words: str) -> str:
    """A pattern for ``words`` whatever the line breaks between them."""
    return r"\s+".join(map(re.escape, words.split()))


def flat(text: str) -> str:
    return " ".join(text.split())


def is_sentence_of(sentence: str, source: str) -> bool:
    """``sentence`` occurs in ``source`` (whatever its line breaks there) as a whole sentence: preceded by the
    start of a paragraph or by a sentence's end, followed by whitespace or the end of the text."""
    for m in re.finditer(loose(sentence), source):
        before = source[: m.start()].rstrip()
        starts = not before or source[len(before):m.start()].count("\n") >= 2 or re.search(r"[.!?]['\"’”)_]*$", before)
        if starts and (m.end() == len(source) or source[m.end()].isspace()):
            return True
    return False


def reads_as_sentence(text: str) -> bool:
    return bool(re.match(r"^['\"‘“(_]*[A-Z0-9]", text)) and bool(re.search(r"[.!?]['\"’”)_]*$", text))


def test_hard_wrapped_lines_are_rejoined_into_whole_sentences_with_their_spans():
    text = excerpt("They were a boy and girl.", "dread.")
    found = sentences(text)
    whole = ("No change, no degradation, no perversion of humanity in any grade, through all the mysteries of "
             "wonderful creation, has monsters half so horrible and dread.")
    assert whole in [s.text for s in found]
    assert "No change, no" not in [s.text for s in found]
    for s in found:
        assert flat(text[s.start:s.end]) == s.text and reads_as_sentence(s.text) and is_sentence_of(s.text, book())
    assert any("\n" in text[s.start:s.end] for s in found)  # the spans keep the original line breaks


def test_titles_quotes_and_dialogue_do_not_end_a_sentence():
    text = excerpt("The mention of Marley's funeral", "It was all the same to him.")
    text += "\n\n" + excerpt("Oh! but he was a tight-fisted hand", "sinner!")
    texts = [s.text for s in sentences(text)]
    assert any(t.startswith("If we were not perfectly convinced") and "St. Paul's Churchyard" in t
               and t.endswith("weak mind.") for t in texts)  # "St." is a title, not a sentence's end
    assert "Oh! but he was a tight-fisted hand at the grindstone, Scrooge! a squeezing, wrenching, grasping, " \
           "scraping, clutching, covetous old sinner!" in texts  # "! a" goes on: one sentence
    ghost = sentences(excerpt("'O Man! look here!", "here!' exclaimed the Ghost."))
    assert [s.text for s in ghost] == ["'O Man! look here! Look, look down here!' exclaimed the Ghost."]
    mrs = sentences("'Mr. Scrooge!' said Bob; 'I'll give you Mr. Scrooge, the Founder of the Feast!'\n"
                    "said Mrs. Cratchit, reddening, and Dr. Johnson nodded.")
    assert len(mrs) == 1 and mrs[0].text.endswith("nodded.")


def test_a_passage_cut_out_of_its_document_loses_the_pieces_at_its_edges():
    text = book()
    start = text.index("Marley was as dead as a door-nail.")  # "Old\nMarley was ...": a window may start here
    window = text[start:start + 900]
    assert "Marley was as dead as a door-nail." in [s.text for s in sentences(window)]  # read as if whole
    assert "Marley was as dead as a door-nail." not in [s.text for s in sentences(window, open_start=True)]
    assert sentences(window, open_start=True, open_end=True)
    for s in sentences(window, open_start=True, open_end=True):
        assert is_sentence_of(s.text, text), s.text
    paragraph = text[text.rindex("\n\n", 0, start):start + 900]  # a window that starts at a paragraph break
    assert sentences(paragraph, open_start=True)[0].text == "Marley was dead, to begin with."


@cache
def carol_index():
    """The whole book as 1,200-token windows (cut mid-sentence, as ingestion cuts them), embedded locally."""
    embedder = LocalEmbedder()
    chunks = chunk_by_tokens(book(), "carol")
    reader = InMemoryGraphReader(tenant="t")
    for c in chunks:
        reader.chunk_map[c.id] = c
    reader.document_map["carol"] = Document(id="carol", tenant="t", title="A Christmas Carol",
                                            chunk_ids=[c.id for c in chunks])
    store = InMemoryVectorStore()
    store.upsert("t", "chunks", [VectorItem(id=c.id, vector=v, payload={"doc_id": "carol"})
                                 for c, v in zip(chunks, embedder.embed([c.text for c in chunks]), strict=True)])
    index = BM25Index.build((c.id, c.text) for c in chunks)
    return reader, store, embedder, lambda _tenant, kind: index if kind == "chunks" else None


def test_every_sentence_the_books_windows_offer_is_a_whole_sentence_of_the_book():
    reader, _store, _embedder, _bm25 = carol_index()
    chunks = list(reader.chunk_map.values())
    offered = 0
    for i, c in enumerate(chunks):
        for s in sentences(c.text, open_start=i > 0, open_end=i < len(chunks) - 1):
            assert reads_as_sentence(s.text) and is_sentence_of(s.text, book()), s.text
            assert flat(c.text[s.start:s.end]) == s.text
            offered += 1
    assert offered > 1000


@pytest.mark.parametrize("question", QUESTIONS)
def test_every_answer_line_is_a_whole_sentence_of_the_book_cited_to_its_chunk(question):
    reader, store, embedder, bm25 = carol_index()
    res = answer_query(QueryParam(mode="naive", query=question), reader, store, embedder.embed, None, bm25)
    assert res.answer_kind == "extractive"
    header, *lines = res.answer.splitlines()
    assert header.startswith("Extractive answer") and 1 <= len(lines) <= EXTRACTIVE_SENTENCES
    assert len(res.sources.sentences) == len(lines)
    assert sum(len(s.text.split()) for s in res.sources.sentences) <= QueryParam().min_answer_words
    for line, cited in zip(lines, res.sources.sentences, strict=True):
        m = LINE.match(line)
        assert m and m["label"] == "Sources" and m["docs"] == "carol", line
        sentence = m["text"]
        assert reads_as_sentence(sentence) and is_sentence_of(sentence, book()), sentence
        chunk = reader.chunk_map[res.citations[m["cite"]]]
        assert (cited.text, cited.cite, cited.kind) == (sentence, m["cite"], "chunk")
        assert (cited.chunk_id, cited.doc_id, cited.document_name) == (chunk.id, "carol", "A Christmas Carol")
        assert chunk.start <= cited.start < cited.end <= chunk.end
        assert flat(book()[cited.start:cited.end]) == sentence  # the span is the sentence's own lines
    assert len({flat(s.text).lower() for s in res.sources.sentences}) == len(lines)


def test_the_sentence_that_means_what_the_question_asks_wins_without_a_shared_word():
    text = excerpt("Marley was dead, to begin with.", "It was all the same to him.")
    sources = Sources()
    sources.add(Evidence(kind="chunk", cite="S1", key="c1", text=text, doc_ids=["carol"], chunk_ids=["c1"]))
    question = "Who buried him?"
    burial = ("The register of his burial was signed by the clergyman, the clerk, the undertaker, and the chief "
              "mourner.")
    assert not set(tokenize(question)) & set(tokenize(burial))
    calls = []
    embedder = LocalEmbedder()

    def embed(texts):
        calls.append(list(texts))
        return embedder.embed(texts)

    by_meaning = extractive_facts(question, sources, embed=embed)
    assert by_meaning[0].text == burial
    assert len(calls) == 1 and calls[0][0] == question and len(calls[0]) <= EXTRACTIVE_CANDIDATES + 1
    assert extractive_facts(question, sources)[0].text != burial  # words alone: nothing to go on


def test_a_failing_embedder_leaves_the_answer_ranked_by_its_words():
    text = excerpt("Marley was dead, to begin with.", "It was all the same to him.")
    sources = Sources()
    sources.add(Evidence(kind="chunk", cite="S1", key="c1", text=text))

    def broken(_texts):
        raise ConnectionError("embedding endpoint down")

    facts = extractive_facts("Who signed the register of his burial?", sources, embed=broken)
    assert facts and facts[0].text.startswith("The register of his burial")


def test_a_sentence_too_long_for_the_room_gives_way_to_the_next_one():
    text = excerpt("Holly, mistletoe, red berries", "artificial little snowstorms.")
    text += "\n\n" + excerpt("Scrooge did as he was told, and held it fast.", "held it fast.")
    sources = Sources()
    sources.add(Evidence(kind="chunk", cite="S1", key="c1", text=text))
    long_one = [s.text for s in sentences(text) if "Christmas morning" in s.text]
    assert long_one and len(long_one[0].split()) > 40
    roomy = extractive_facts("What happened on Christmas morning?", sources)
    assert roomy[0].text == long_one[0]
    tight = extractive_facts("What happened on Christmas morning?", sources, room_words=40)
    assert tight and long_one[0] not in [f.text for f in tight]
    assert all(is_sentence_of(f.text, text) for f in tight) and sum(len(f.text.split()) for f in tight) <= 40


def test_a_sentence_quoted_twice_is_answered_once_and_a_description_is_cited_to_its_chunk():
    text = excerpt("Marley was dead, to begin with.", "It was all the same to him.")
    chunks = chunk_by_tokens(text, "carol", size=150, overlap=75)  # overlapping windows repeat sentences
    reader = InMemoryGraphReader(tenant="t")
    for c in chunks:
        reader.chunk_map[c.id] = c
    docs = {"carol": Document(id="carol", tenant="t", title="Stave One", chunk_ids=[c.id for c in chunks])}
    sources = Sources()
    executor = next(s.text for s in sentences(text) if "sole executor" in s.text)
    named = ("Sometimes people new to the business called Scrooge Scrooge, and sometimes Marley, but he answered to "
             "both names.")  # on two lines of the book
    source = next(c for c in chunks if flat(named) in flat(c.text))
    sources.add(Evidence(kind="entity", cite="E1", key="SCROOGE", text=f"SCROOGE: {executor}", doc_ids=["carol"],
                         chunk_ids=[c.id for c in chunks if flat(executor) in flat(c.text)]))
    sources.add(Evidence(kind="entity", cite="E2", key="MARLEY", text=f"MARLEY: {named}", doc_ids=["carol"],
                         chunk_ids=[source.id]))
    passages = chunks[:5]  # none of them quotes the sentence of E2
    for i, c in enumerate(passages, 1):
        sources.add(Evidence(kind="chunk", cite=f"S{i}", key=c.id, text=c.text, doc_ids=["carol"], chunk_ids=[c.id]))
    assert source not in passages and sum(flat(executor) in flat(c.text) for c in passages) == 2
    question = "Who was the sole executor and mourner? Who answered to both names?"
    facts = extractive_facts(question, sources, docs=docs)
    texts = [f.text for f in facts]
    assert texts.count(executor) == 1 and named in texts
    assert all(is_sentence_of(t, text) for t in texts)
    cited = sentence_citations(facts, reader, docs, {"carol": "Stave One"})
    for fact, c in zip(facts, cited, strict=True):
        assert c.chunk_id in fact.evidence.chunk_ids and flat(text[c.start:c.end]) == fact.text
    placed = cited[texts.index(named)]
    assert (placed.kind, placed.cite, placed.chunk_id, placed.document_name) == ("entity", "E2", source.id, "Stave One")
    assert text[placed.start:placed.end].count("\n") == 1  # found in its chunk across the line breaks
    assert set(cited[0].model_dump()) == {"text", "cite", "kind", "key", "doc_id", "document_name", "chunk_id",
                                         "pages", "start", "end"}


def test_a_near_copy_of_a_sentence_already_answered_is_left_out():
    text = excerpt("Marley was dead, to begin with.", "It was all the same to him.")
    sources = Sources()
    sources.add(Evidence(kind="chunk", cite="S1", key="c1", text=text))
    sources.add(Evidence(kind="entity", cite="E1", key="MARLEY", text="MARLEY: Old Marley was as dead as a doornail."))
    facts = extractive_facts("Was Marley as dead as a door-nail?", sources)
    said = [f.text for f in facts if "dead as a door" in f.text]
    assert len(said) == 2, said  # "Old Marley was as dead as a door-nail." once, and the narrator's repetition of it
    assert ("Old Marley was as dead as a doornail." in said) != ("Old Marley was as dead as a door-nail." in said)
    assert any(t.startswith("You will, therefore, permit me to repeat") for t in said)


def test_a_reports_named_items_are_sentences_of_their_own_without_their_labels():
    """Global mode quotes reports; an LLM-free report's summary lists "NAME: its first sentence" items."""
    summary = ("Community of 18 entities and 27 relationships. SCROOGE: Scrooge started back, appalled. GHOST: "
               "Scrooge looked about him for the Ghost, and saw it not. SPIRIT: 'Spirit! FUTURE: 'Ghost of the "
               "Future!' he exclaimed, 'I fear you more than any spectre I have seen.'")
    sources = Sources()
    sources.add(Evidence(kind="report", cite="L0-0", key="L0-0", text=f"SCROOGE, GHOST and MARLEY. {summary}"))
    texts = [f.text for f in extractive_facts("What did Scrooge fear about the Ghost of the Future?", sources)]
    assert "Scrooge looked about him for the Ghost, and saw it not." in texts
    assert "'Ghost of the Future!' he exclaimed, 'I fear you more than any spectre I have seen.'" in texts
    assert not any(":" in t.split()[0] or "Spirit!" in t for t in texts)


def test_a_sentence_goes_on_over_a_pdf_page_break_and_the_page_marker_is_not_quoted():
    text = excerpt("Scrooge knew he was dead?", "with an undoubted bargain.")
    cut = text.index("sole friend")  # page 1 ends inside the sentence "Scrooge was his sole executor, ..."
    paged = page_markers([text[:cut], text[cut:]])
    found = {s.text: s for s in sentences(paged)}
    assert "[page" not in " ".join(found)

    def pages(sentence: str) -> list[int]:
        return pages_in_span(page_spans(paged), found[sentence].start, found[sentence].end)

    executor = next(t for t in found if t.startswith("Scrooge was his sole executor"))
    assert executor.endswith("and sole mourner.") and is_sentence_of(executor, book()) and pages(executor) == [1, 2]
    assert pages("Scrooge and he were partners for I don't know how many years.") == [1]
    assert pages(next(t for t in found if t.startswith("And even Scrooge was not so dreadfully"))) == [2]
