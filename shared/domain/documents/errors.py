"""The one error of the parsers: ``code`` is machine-readable (``encrypted_pdf``, ``no_text_layer``, ...)."""

from __future__ import annotations


class ParseError(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
