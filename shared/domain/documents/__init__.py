"""Text out of uploaded files: PDF, HTML, DOCX (and UTF-8 text), pure (bytes in, text out; no Redis).

Which library for which format, and why:

* PDF: ``pypdf`` - pure Python, actively maintained, no system libraries; text per page (``extract_text``),
  detects encryption (``is_encrypted``) before reading anything. Each page's text follows a ``[page N]``
  marker line, so the chunks keep their page (``page_markers``).
* HTML: ``beautifulsoup4`` on the standard-library ``html.parser`` - maintained for twenty years, no
  compiled parser to install; the main text is what is left after removing scripts, styles, navigation,
  headers, footers, asides, forms and elements whose class/id name an ad or a menu; ``<article>`` / ``<main>``
  is preferred when the page has one. Headings become ``[section ...]`` markers. (trafilatura does a finer
  boilerplate removal but brings a dozen dependencies; the rules above remove what the issue asks for.)
* DOCX: ``python-docx`` - the reference library for the format; paragraphs in order, headings become
  ``[section ...]`` markers. The zip's declared uncompressed size is checked *before* opening it (zip bombs).

Every parser is bounded: the input size is checked by the caller (the gateway's ``max_original_bytes``),
HTML is cut at ``MAX_HTML_BYTES`` before parsing, DOCX is refused past ``MAX_DOCX_UNCOMPRESSED``, and the
extracted text is cut at ``max_chars``. Errors are :class:`ParseError` with a machine-readable ``code``.
"""

from __future__ import annotations

from shared.domain.documents.detect import MEDIA_TYPES, TEXT_TYPES, sniff
from shared.domain.documents.errors import ParseError
from shared.domain.documents.extract import extract_text
from shared.domain.documents.markers import page_markers, page_spans, pages_in_span, pages_of

__all__ = ["MEDIA_TYPES", "TEXT_TYPES", "ParseError", "extract_text", "page_markers", "page_spans", "pages_in_span",
           "pages_of", "sniff"]
