"""The parsers (``shared.domain.documents``) on real files the tests make: text out, with page / section markers,
and a clear error (a code) for every hostile file instead of a crash or a hang."""

from __future__ import annotations

import pytest

from shared.domain.documents import ParseError, extract_text, pages_of, sniff
from shared.domain.documents.detect import DOCX, HTML, PDF, TEXT
from shared.domain.documents.extract import MAX_HTML_BYTES
from tests import document_files as files


def test_pdf_text_is_extracted_page_by_page_and_a_chunk_knows_its_pages():
    data = files.pdf(["The harbour master logs every ship.", "Kestrel Point lighthouse reopened in May."])
    assert sniff(data) == PDF
    text = extract_text(data, PDF)
    assert text.index("[page 1]") < text.index("harbour master") < text.index("[page 2]") < text.index("Kestrel")
    assert pages_of(text, "Kestrel Point lighthouse") == [2]  # a chunk starting inside page 2
    assert pages_of(text, "harbour master logs every ship.\n\n[page 2]\nKestrel") == [1, 2]
    assert pages_of(text, "not in the document") == []


def test_docx_paragraphs_and_headings_become_text_with_section_markers():
    data = files.docx(["The board approved the budget.", "Minutes taken by Ada."], heading="Board minutes")
    assert sniff(data) == DOCX
    assert extract_text(data, DOCX).split("\n\n") == [
        "[section Board minutes]", "The board approved the budget.", "Minutes taken by Ada."]


def test_html_keeps_the_article_and_drops_navigation_ads_scripts_and_footers():
    data = files.html_page("The lighthouse at Kestrel Point reopened on Monday after repairs.")
    assert sniff(data) == HTML
    text = extract_text(data, HTML)
    assert "The lighthouse at Kestrel Point reopened on Monday after repairs." in text
    assert "[section Lighthouse reopens]" in text
    for noise in ("TRACKING-SCRIPT", "STYLE-TEXT", "NAV-HEADER", "NAV-MENU", "ADVERT", "COOKIE", "SPONSORED",
                  "ASIDE-TEXT", "FOOTER-TEXT", "INLINE-SCRIPT"):
        assert noise not in text, noise


def test_plain_text_and_markdown_are_text():
    assert sniff("# Notes\ncafé au lait".encode()) == TEXT
    assert extract_text(b"\xef\xbb\xbfhello", TEXT) == "hello"


@pytest.mark.parametrize("data", [
    b"MZ\x90\x00\x03\x00\x00\x00\x04\x00",  # a Windows executable
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",  # an image
    b"caf\xe9 au lait",  # Latin-1 text: not UTF-8
    b"PK\x03\x04" + b"\x00" * 40,  # a broken zip
], ids=["exe", "png", "latin1", "broken-zip"])
def test_content_that_is_none_of_the_formats_is_not_recognised_whatever_its_name(data):
    assert sniff(data) is None


def test_a_zip_that_is_not_a_docx_is_not_a_docx():
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("payload.txt", "hello")
    assert sniff(out.getvalue()) is None


@pytest.mark.parametrize("make,media_type,code", [
    (files.encrypted_pdf, PDF, "encrypted_pdf"),
    (files.scanned_pdf, PDF, "no_text_layer"),
    (files.zip_bomb_docx, DOCX, "zip_bomb"),
    (lambda: b"%PDF-1.7\n%garbage without any object\n", PDF, "malformed_pdf"),
    (lambda: b"<html><body><nav>only a menu</nav><script>x()</script></body></html>", HTML, "empty_document"),
], ids=["encrypted-pdf", "scanned-pdf", "zip-bomb-docx", "truncated-pdf", "html-without-text"])
def test_hostile_files_fail_with_a_clear_code(make, media_type, code):
    with pytest.raises(ParseError) as err:
        extract_text(make(), media_type)
    assert err.value.code == code and str(err.value)


def test_a_docx_declaring_a_huge_uncompressed_size_is_refused_before_it_is_inflated(monkeypatch):
    from shared.domain.documents import extract

    monkeypatch.setattr(extract, "MAX_DOCX_UNCOMPRESSED", 10_000)  # the real limit is 100 MB
    with pytest.raises(ParseError) as err:
        extract_text(files.docx(["x" * 20_000]), DOCX)
    assert err.value.code == "zip_bomb"


def test_fifty_megabytes_of_scripts_are_cut_before_parsing():
    article = b"<html><body><article><p>The ferry timetable changes in June.</p></article>"
    scripts = b"<script>" + b"var x = 1;" * 5_000_000 + b"</script><p>LATE-TEXT past the bound</p></body></html>"
    data = article + scripts
    assert len(data) > 50_000_000 > MAX_HTML_BYTES
    text = extract_text(data, HTML)
    assert text == "The ferry timetable changes in June."
    with pytest.raises(ParseError) as err:  # nothing but scripts within the bound: no text, not a hang
        extract_text(scripts, HTML)
    assert err.value.code == "empty_document"


def test_extracted_text_is_bounded():
    data = files.docx(["word " * 2000])
    assert len(extract_text(data, DOCX, max_chars=500)) == 500
