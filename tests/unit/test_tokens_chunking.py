from __future__ import annotations

import logging
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.chunking import chunk_by_separators, chunk_by_tokens
from shared.domain.tokens import (
    ESTIMATE_ABOVE_CHARS,
    count_tokens,
    count_tokens_batch,
    estimate_tokens,
    get_encoding,
    min_tokens,
    tokens_over,
    truncate_list_by_token_size,
    truncate_text,
)
from tests.conftest import ROOT, SAMPLE


def test_encoding_for_gpt4o_works_offline_in_a_fresh_process(tmp_path):
    code = (
        "from shared.domain.tokens import seed_tiktoken_cache; seed_tiktoken_cache();"
        "import tiktoken; e = tiktoken.encoding_for_model('gpt-4o'); print(e.name, len(e.encode('hello world')))"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert out.stdout.split() == ["o200k_base", "2"]


def test_unknown_model_falls_back_with_warning(caplog):
    get_encoding.cache_clear()
    with caplog.at_level(logging.WARNING):
        enc = get_encoding("my-private-model-7b")
    assert enc.name == "cl100k_base"
    assert "falling back" in caplog.text


def test_batch_counts_match_single_counts():
    texts = ["hello world", "", "Scrooge's nephew", "x" * 1000]
    assert count_tokens_batch(texts) == [count_tokens(t) for t in texts]


def test_estimates_are_exact_when_short_or_counted_and_close_for_a_long_english_prompt():
    short = "Who is Ebenezer Scrooge and how does he change?"
    assert estimate_tokens(short, "gpt-4o-mini") == count_tokens(short, "gpt-4o-mini")
    prose = SAMPLE.read_text(encoding="utf-8-sig")[:120_000] + " (a prompt no one counted yet)"
    assert len(prose) > ESTIMATE_ABOVE_CHARS
    guess, exact = estimate_tokens(prose, "gpt-4o-mini"), len(get_encoding("gpt-4o-mini").encode_ordinary(prose))
    assert guess == -(-len(prose) // 4)  # not encoded: characters / 4
    assert 0.8 < guess / exact < 1.25  # English prose: within a quarter of the real count
    assert estimate_tokens(prose, "gpt-4o-mini") == guess
    counted = count_tokens(prose, "gpt-4o-mini")  # once counted (the context builder's exact fit), it is exact
    assert estimate_tokens(prose, "gpt-4o-mini") == counted == exact


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=80), max_size=40), st.integers(min_value=0, max_value=400))
def test_truncate_list_never_exceeds_limit_and_is_a_prefix(items, limit):
    kept = truncate_list_by_token_size(items, key=lambda s: s, max_tokens=limit)
    assert kept == items[: len(kept)]
    assert sum(count_tokens(s) + 1 for s in kept) <= limit
    if len(kept) < len(items):
        assert sum(count_tokens(s) + 1 for s in items[: len(kept) + 1]) > limit


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=500), st.integers(min_value=0, max_value=100))
def test_truncate_text_respects_budget(text, limit):
    cut = truncate_text(text, limit)
    assert count_tokens(cut) <= limit
    assert text.startswith(cut) or count_tokens(text) > limit


def test_a_text_within_the_byte_bound_is_kept_unencoded_and_a_longer_one_is_cut(monkeypatch):
    """Every token stands for a byte or more, so a text of at most ``max_tokens`` UTF-8 bytes fits unencoded (the
    index cuts each entity's text to 2,000 tokens; almost all are far shorter). Multi-byte text past the byte bound
    is still counted and cut."""
    from shared.domain import tokens

    wide = "\U0001f600" * 30  # 30 characters, 120 bytes, more than 30 tokens
    assert truncate_text(wide, 30) != wide and count_tokens(truncate_text(wide, 30)) <= 30
    monkeypatch.setattr(tokens, "get_encoding", lambda *_a: (_ for _ in ()).throw(AssertionError("encoded")))
    line = "Scrooge: a squeezing, wrenching old sinner."
    assert truncate_text(line, len(line)) == line
    assert truncate_text("é" * 10, 20) == "é" * 10


def test_token_chunks_overlap_and_keep_metadata():
    text = SAMPLE.read_text(encoding="utf-8-sig")[:30000]
    chunks = chunk_by_tokens(text, "doc-1", size=500, overlap=50)
    assert len(chunks) > 5
    enc = get_encoding()
    for i, chunk in enumerate(chunks):
        assert chunk.doc_id == "doc-1" and chunk.index == i
        assert chunk.tokens <= 500
    tokens = enc.encode_ordinary(text)
    # window i covers tokens [450*i, 450*i + 500): consecutive windows share exactly 50 tokens
    for i, chunk in enumerate(chunks):
        assert chunk.text == enc.decode(tokens[450 * i : 450 * i + 500])
    assert chunks[0].tokens == 500
    assert 450 * (len(chunks) - 1) + chunks[-1].tokens == len(tokens)


def test_chunk_ids_are_content_hashes():
    text = "Marley was dead: to begin with. " * 200
    first = chunk_by_tokens(text, "d1", 100, 10)
    second = chunk_by_tokens(text, "d2", 100, 10)
    assert [c.id for c in first] == [c.id for c in second]
    assert all(c.id.startswith("chunk-") for c in first)


def test_separator_chunks_fit_budget_and_cover_text():
    text = SAMPLE.read_text(encoding="utf-8-sig")[:40000]
    chunks = chunk_by_separators(text, "d", size=300, overlap=30)
    assert all(c.tokens <= 300 for c in chunks)
    joined = "".join(c.text for c in chunks)
    for para in text.split("\n\n")[:50]:
        assert para.strip()[:40] in joined


_PIECES = [*"ab Z9_,.'-\t\n\r\f\v/", "\x1c", "\x1e", "\x1f", "\u00a0", "\u0301", "é", "ß", "中", "²", "🙂",
           "'s", "<SEP>", " the", "ing", "1234"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_min_tokens_is_a_floor_and_bytes_a_ceiling_in_each_shipped_encoding(text):
    """The bounds that let a count be skipped: ``min_tokens`` never above the real count, UTF-8 bytes never below."""
    for name in ("cl100k_base", "o200k_base"):
        n = len(get_encoding(name).encode_ordinary(text))
        assert min_tokens(text) <= n <= len(text.encode("utf-8")), (name, text)


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.integers(0, 40))
def test_tokens_over_answers_as_a_count_would(text, limit):
    assert tokens_over(text, limit) == (count_tokens(text) > limit)
    assert tokens_over(text * 20, limit) == (count_tokens(text * 20) > limit)
