"""Content-addressed identifiers and tenant validation."""

from __future__ import annotations

import hashlib
import re
import uuid

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def content_hash(*parts: str, length: int = 32) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def doc_id_for(text: str) -> str:
    return "doc-" + content_hash(text)


def chunk_id_for(text: str) -> str:
    return "chunk-" + content_hash(text)


def new_job_id() -> str:
    return "job-" + uuid.uuid4().hex


def validate_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not TENANT_RE.match(tenant):
        raise ValueError(
            f"invalid tenant id {tenant!r}: use 1-63 chars of a-z, 0-9, '_' or '-', starting alphanumeric"
        )
    return tenant
