"""Real PDF, DOCX and HTML files made by the tests (fpdf2, pypdf, python-docx), the good and the hostile."""

from __future__ import annotations

import io
import zipfile


def pdf(pages: list[str]) -> bytes:
    """A PDF with a text layer, one page per string."""
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("helvetica", size=12)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 8, text)
    return bytes(doc.output())


def scanned_pdf() -> bytes:
    """A PDF whose page is only a picture (a scan): no text layer."""
    from fpdf import FPDF

    doc = FPDF()
    doc.add_page()
    doc.set_fill_color(40, 40, 40)
    doc.rect(20, 20, 150, 200, style="F")  # the "scanned" page: drawn, not text
    return bytes(doc.output())


def encrypted_pdf(text: str = "Top secret minutes.") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf([text]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="open-sesame", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx(paragraphs: list[str], heading: str = "") -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    if heading:
        document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(inflated_bytes: int = 20_000_000) -> bytes:
    """A real DOCX with one more member of zeros that deflates ~1000-fold."""
    src = zipfile.ZipFile(io.BytesIO(docx(["bait"])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in src.infolist():
            z.writestr(item, src.read(item.filename))
        with z.open("word/media/bomb.bin", "w", force_zip64=True) as member:
            block = b"\0" * 1_000_000
            for _ in range(inflated_bytes // len(block)):
                member.write(block)
    return out.getvalue()


def html_page(article: str, title: str = "Harbour news") -> bytes:
    """A page with navigation, a header, ads, a cookie banner, scripts and a footer around one article."""
    return f"""<!DOCTYPE html>
<html><head><title>{title}</title><script>var tracker = "TRACKING-SCRIPT-TEXT";</script>
<style>body {{ color: red }} .STYLE-TEXT {{}}</style></head>
<body>
<header><a href="/">Home NAV-HEADER-TEXT</a></header>
<nav><ul><li><a href="/a">Sports NAV-MENU-TEXT</a></li><li><a href="/b">Weather</a></li></ul></nav>
<div class="ad-banner">Buy now! ADVERT-TEXT</div>
<div id="cookie-consent">We use cookies COOKIE-TEXT</div>
<article><h1>Lighthouse reopens</h1><p>{article}</p>
<div class="sponsored">SPONSORED-TEXT</div></article>
<aside>Related ASIDE-TEXT</aside>
<footer>Copyright FOOTER-TEXT</footer>
<script>document.write("INLINE-SCRIPT-TEXT")</script>
</body></html>""".encode()
