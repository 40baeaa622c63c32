"""What a file is, from its first bytes (magic numbers), never from its name."""

from __future__ import annotations

import io
import zipfile

PDF, HTML, DOCX, TEXT = "application/pdf", "text/html", \
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "text/plain"
MEDIA_TYPES = (PDF, HTML, DOCX, TEXT)
TEXT_TYPES = {TEXT}  # stored as the document's text at submission: no parse step
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<!--", b"<meta", b"<title", b"<article", b"<div")


def sniff(data: bytes) -> str | None:
    """The media type of ``data`` from its content; None when it is none of the supported formats
    (an executable, an image, a zip that is not a DOCX, binary bytes that are not UTF-8 text)."""
    if data.startswith(b"%PDF-"):
        return PDF
    if data.startswith(b"PK\x03\x04"):
        return DOCX if _is_docx(data) else None
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(_HTML_STARTS) and (b"<html" in head or b"<body" in data[:65536].lower() or b"<!doctype" in head):
        return HTML
    if b"\x00" in data[:8192]:
        return None
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return TEXT


def _is_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return "word/document.xml" in z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
