"""Bytes of a detected media type -> text with page / section markers (see the package docstring)."""

from __future__ import annotations

import io
import re
import zipfile

from shared.domain.documents.detect import DOCX, HTML, PDF, TEXT
from shared.domain.documents.errors import ParseError
from shared.domain.documents.markers import page_markers, section_marker

MAX_HTML_BYTES = 5_000_000  # HTML past this is cut before parsing (a page of 50 MB of scripts)
MAX_DOCX_UNCOMPRESSED = 100_000_000  # the zip's declared uncompressed total; past it: a zip bomb
MAX_DOCX_RATIO = 200  # uncompressed / compressed size of a member past this: a zip bomb
MAX_PDF_PAGES = 5000
_BOILERPLATE_TAGS = ["script", "style", "noscript", "nav", "header", "footer", "aside", "form", "iframe", "svg",
                     "template", "button", "select"]
_BOILERPLATE_NAME = re.compile(r"(^|[-_ ])(ad|ads|advert\w*|banner|sponsor\w*|promo\w*|nav\w*|menu|sidebar|"
                               r"cookie\w*|share|social|breadcrumbs?|footer|header)([-_ ]|$)", re.IGNORECASE)


def extract_text(data: bytes, media_type: str, max_chars: int = 20_000_000) -> str:
    """The document's text; :class:`ParseError` when there is none to be had (encrypted, scanned, a bomb)."""
    parser = {PDF: _pdf, HTML: _html, DOCX: _docx, TEXT: _text}.get(media_type)
    if parser is None:
        raise ParseError("unsupported_type", f"cannot parse {media_type!r}")
    text = parser(data).strip()
    if not _has_words(text):
        code = "no_text_layer" if media_type == PDF else "empty_document"
        reason = "the PDF has no text layer (a scan?); OCR it first" if media_type == PDF else "no text found"
        raise ParseError(code, reason)
    return text[:max_chars]


def _has_words(text: str) -> bool:
    return bool(re.sub(r"\[(page \d+|section [^\]]*)\]", "", text).strip())


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError("invalid_encoding", f"not valid UTF-8 (byte {exc.start})") from exc


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ParseError("encrypted_pdf", "the PDF is encrypted; upload a decrypted copy")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise ParseError("too_many_pages", f"{len(reader.pages)} pages; the limit is {MAX_PDF_PAGES}")
        return page_markers([page.extract_text() or "" for page in reader.pages])
    except ParseError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ParseError("malformed_pdf", f"unreadable PDF: {type(exc).__name__}: {exc}"[:300]) from exc


def _html(data: bytes) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data[:MAX_HTML_BYTES], "html.parser")
    for tag in soup.find_all(_BOILERPLATE_TAGS):
        tag.decompose()
    for tag in soup.find_all(_is_boilerplate):
        tag.decompose()
    root = soup.find("article") or soup.find("main") or soup.body or soup
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    lines = [section_marker(title)] if title else []
    for el in root.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "td"]):
        if el.find(["p", "li", "pre", "blockquote", "td"]):
            continue  # its blocks are taken one by one
        text = " ".join(el.get_text(" ", strip=True).split())
        if text:
            lines.append(section_marker(text) if el.name[0] == "h" and el.name[1:].isdigit() else text)
    if len(lines) <= (1 if title else 0):  # no block elements: the bare text
        lines.append(" ".join(root.get_text(" ", strip=True).split()))
    return "\n\n".join(lines)


def _is_boilerplate(tag) -> bool:
    if tag.attrs is None:
        return False
    names = " ".join([*tag.get("class", []), tag.get("id", ""), tag.get("role", "")])
    return bool(names and _BOILERPLATE_NAME.search(names)) and tag.name not in ("article", "main", "body", "html")


def _docx(data: bytes) -> str:
    _check_zip(data)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ParseError("malformed_docx", f"unreadable DOCX: {type(exc).__name__}: {exc}"[:300]) from exc
    lines = []
    for para in document.paragraphs:
        text = " ".join(para.text.split())
        if not text:
            continue
        style = (para.style.name if para.style is not None else "") or ""
        lines.append(section_marker(text) if style.lower().startswith(("heading", "title")) else text)
    for table in document.tables:
        for row in table.rows:
            cells = [" ".join(c.text.split()) for c in row.cells]
            if any(cells):
                lines.append(" | ".join(cells))
    return "\n\n".join(lines)


def _check_zip(data: bytes) -> None:
    """Refuse a zip bomb from the central directory (declared sizes), before any member is inflated.
    python-docx reads members whole, so a lying declared size is also bounded by the ratio check."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ParseError("malformed_docx", f"not a readable zip: {exc}") from exc
    total = sum(i.file_size for i in infos)
    if total > MAX_DOCX_UNCOMPRESSED:
        raise ParseError("zip_bomb", f"the DOCX inflates to {total} bytes; the limit is {MAX_DOCX_UNCOMPRESSED}")
    for info in infos:
        if info.file_size > 1_000_000 and info.file_size > MAX_DOCX_RATIO * max(info.compress_size, 1):
            raise ParseError("zip_bomb", f"{info.filename} inflates {info.file_size // max(info.compress_size, 1)}"
                                         f"-fold; refused as a zip bomb")
