"""Read an ingestion batch from JSON or a multipart upload and validate it synchronously.

A multipart upload may hold text (.txt/.md), PDF, HTML and DOCX files. The type is told from the file's
first bytes (``shared.domain.documents.sniff``), never from its name: a text file is stored as the document's
text, any other file is stored as sent (bounded by ``chunking.max_original_bytes``) and its text is extracted
by a parse task (``parser`` queue), not here.

The documents are validated here, once (``shared.infra.jobs.ingest_submit.validate_documents``): the batch
carries the proof (``ValidDocuments``), so submitting it does not validate it again. An invalid document (or
file) is refused and the others are ingested, the job listing each refused one with its reason; ``atomic``
(a JSON field, or a multipart form field ``atomic=true``) refuses the whole batch instead, as does a batch
with no valid document.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePath
from typing import Annotated

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from api_gateway.deps import GatewayDep
from api_gateway.errors import ApiError
from api_gateway.idempotency import fingerprint
from api_gateway.schemas import IngestBody
from shared.domain.documents import TEXT_TYPES, sniff
from shared.domain.documents.detect import DOCX, PDF
from shared.infra.jobs.ingest_submit import (
    DocumentInput,
    InvalidDocument,
    ValidDocuments,
    decode_bytes,
    refused_file,
    validate_documents,
)

ACCEPTED = "text (.txt, .md), PDF, HTML and DOCX files"
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
BINARY_SUFFIXES = {".pdf": PDF, ".docx": DOCX}
MAX_FILES = 1000
_STATUS = {"document_too_large": 413, "unsupported_file_type": 415}
TRUE = {"1", "true", "yes", "on"}


class IngestBatch:
    def __init__(self, items: ValidDocuments, atomic: bool = False):
        self.items, self.atomic = items, atomic
        self.fingerprint = fingerprint([[[d.text or hashlib.sha256(d.data or b"").hexdigest(), d.id, d.title,
                                          d.metadata] for d in items], [r.body() for r in items.refused], atomic])


def invalid(exc: InvalidDocument) -> ApiError:
    extra = {"index": exc.index} if exc.index is not None else {}
    if exc.refused:
        extra["refused"] = exc.refused
    return ApiError(_STATUS.get(exc.code, 422), exc.code, str(exc), extra=extra or None)


async def _from_json(request: Request) -> tuple[list[DocumentInput], bool]:
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_encoding", f"request body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {exc}") from None
    try:
        parsed = IngestBody.model_validate(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None
    return [DocumentInput(text=d.text, title=d.title, id=d.id, metadata=dict(d.metadata))
            for d in parsed.documents], parsed.atomic


async def _from_form(request: Request) -> tuple[list[DocumentInput], bool]:
    try:
        form = await request.form(max_files=MAX_FILES, max_fields=100)
    except ApiError:
        raise
    except Exception as exc:
        if getattr(exc, "status_code", None) == 413:
            raise
        raise ApiError(400, "malformed_multipart", f"could not parse the multipart body: {exc}") from exc
    uploads = [v for key in ("files", "file") for v in form.getlist(key) if isinstance(v, UploadFile)]
    if not uploads:
        raise ApiError(422, "empty_batch", f"no files: upload {ACCEPTED} in the 'files' field")
    items = [_document(PurePath(upload.filename or "upload.txt").name, await upload.read()) for upload in uploads]
    atomic = str(form.get("atomic") or "").strip().lower() in TRUE
    await form.close()
    return items, atomic


def _document(name: str, data: bytes) -> DocumentInput:
    """What the file is comes from its bytes: a ``.txt`` or ``.html`` that is a PDF is read as a PDF; bytes that
    are none of the accepted types are refused whatever the name says, and so is a file named as a binary
    format (.pdf, .docx) whose content is not that format (an executable, or text, renamed). A refused file stays
    in the batch with its reason (``refused_file``): validation decides whether the rest goes on."""
    media_type = sniff(data)
    suffix = PurePath(name).suffix.lower()
    try:
        if media_type is None and suffix in TEXT_SUFFIXES:
            decode_bytes(data, name)  # named text, but not UTF-8: say so (invalid_encoding, with the byte)
        claimed = BINARY_SUFFIXES.get(suffix)
        if media_type is None or (claimed and claimed != media_type):
            what = f"is {media_type}" if media_type else "is none of them"
            return refused_file(name, "unsupported_file_type", f"{name}: accepted are {ACCEPTED}; the content {what}")
        if media_type in TEXT_TYPES:
            return DocumentInput(text=decode_bytes(data, name), title=name, metadata={"filename": name}, name=name)
    except InvalidDocument as exc:
        return refused_file(name, exc.code, str(exc))
    return DocumentInput(text="", title=name, metadata={"filename": name}, data=data, media_type=media_type,
                         name=name)


async def read_batch(request: Request, gw: GatewayDep) -> IngestBatch:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if ctype == "application/json" or ctype.endswith("+json"):
            items, atomic = await _from_json(request)
        elif ctype == "multipart/form-data":
            items, atomic = await _from_form(request)
        else:
            raise ApiError(415, "unsupported_media_type", "send application/json or multipart/form-data")
        chunking = gw.settings.chunking
        return IngestBatch(validate_documents(items, chunking.max_document_bytes,
                                              max_files_bytes=chunking.max_original_bytes, atomic=atomic), atomic)
    except InvalidDocument as exc:
        raise invalid(exc) from None


BatchDep = Annotated[IngestBatch, Depends(read_batch)]


def _inline_refs(schema: dict) -> dict:
    defs = schema.pop("$defs", {})

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(dict(defs[ref.rsplit("/", 1)[1]]))
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return walk(schema)


REQUEST_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": _inline_refs(IngestBody.model_json_schema()),
                "examples": {"batch": {"summary": "two documents", "value": {"documents": [
                    {"text": "Marley was dead: to begin with.", "id": "carol-1", "title": "Stave One"},
                    {"text": "Scrooge knew he was dead?", "metadata": {"source": "gutenberg"}}]}}},
            },
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {
                    "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                    "atomic": {"type": "boolean", "default": False, "description": "refuse the whole upload "
                               "when one file is invalid (by default the valid files are ingested)"}}},
                "examples": {"upload": {"summary": "upload text, PDF, HTML or DOCX files (the type is read from "
                                                   "the content)", "value": {"files": ["carol.txt", "report.pdf"]}}},
            },
        },
    }
}
