"""Long texts stored deflated: a document's text and a chunk's row (its text is most of it).

A stored value that starts with ``MARK`` is the zlib stream after it; any other value is the text itself (values
written before, or too short to gain). A text that itself starts with ``MARK`` is always stored deflated, so a
value is never mistaken for the other form.
"""

from __future__ import annotations

import zlib

MARK = b"\x00z"
MIN_BYTES = 256  # shorter texts are kept as they are: the deflate header and a short text gain nothing


def pack_text(text: str | bytes) -> bytes:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(data) < MIN_BYTES and not data.startswith(MARK):
        return data
    packed = MARK + zlib.compress(data, 6)
    return packed if len(packed) < len(data) or data.startswith(MARK) else data


def unpack_bytes(raw: bytes | str) -> bytes:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return zlib.decompress(data[len(MARK):]) if data.startswith(MARK) else data


def unpack_text(raw: bytes | str) -> str:
    return unpack_bytes(raw).decode("utf-8", "surrogatepass")
