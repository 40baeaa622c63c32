"""Long values stored deflated: document texts, chunk rows, graph rows and fragments, reports, LLM answers.

A stored value that starts with ``MARK`` is the zlib stream after it; any other value is the text itself (values
written before, or too short to gain). A text that itself starts with ``MARK`` is always stored deflated, so a
value is never mistaken for the other form.
"""

from __future__ import annotations

import zlib

MARK = b"\x00z"
MIN_BYTES = 96  # shorter values are kept as they are: deflate's header and checksum take what it would gain


def pack_text(text: str | bytes) -> bytes:
    """``text`` deflated when that makes it shorter (level 6: deterministic, so equal values stay equal bytes)."""
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
