"""Read an ingestion batch from JSON or a multipart upload and validate it synchronously.

The documents are validated here, once (``shared.infra.ingest_submit.validate_documents``): the batch
carries the proof (``ValidDocuments``), so submitting it does not validate it again.
"""

from __future__ import annotations

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
from shared.infra.ingest_submit import (
    DocumentInput,
    InvalidDocument,
    ValidDocuments,
    decode_bytes,
    validate_documents,
)

UPLOAD_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
MAX_FILES = 1000
_STATUS = {"document_too_large": 413}


class IngestBatch:
    def __init__(self, items: ValidDocuments):
        self.items = items
        self.fingerprint = fingerprint([[d.text, d.id, d.title, d.metadata] for d in items])


def invalid(exc: InvalidDocument) -> ApiError:
    extra = {"index": exc.index} if exc.index is not None else None
    return ApiError(_STATUS.get(exc.code, 422), exc.code, str(exc), extra=extra)


async def _from_json(request: Request) -> list[DocumentInput]:
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
    return [DocumentInput(text=d.text, title=d.title, id=d.id, metadata=dict(d.metadata)) for d in parsed.documents]


async def _from_form(request: Request) -> list[DocumentInput]:
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
        raise ApiError(422, "empty_batch", "no files: upload .txt/.md files in the 'files' field")
    items = []
    for upload in uploads:
        name = PurePath(upload.filename or "upload.txt").name
        if PurePath(name).suffix.lower() not in UPLOAD_SUFFIXES:
            raise ApiError(415, "unsupported_file_type", f"{name}: only .txt and .md files are accepted")
        text = decode_bytes(await upload.read(), name)
        items.append(DocumentInput(text=text, title=name, metadata={"filename": name}))
    await form.close()
    return items


async def read_batch(request: Request, gw: GatewayDep) -> IngestBatch:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if ctype == "application/json" or ctype.endswith("+json"):
            items = await _from_json(request)
        elif ctype == "multipart/form-data":
            items = await _from_form(request)
        else:
            raise ApiError(415, "unsupported_media_type", "send application/json or multipart/form-data")
        return IngestBatch(validate_documents(items, gw.settings.chunking.max_document_bytes))
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
                    "files": {"type": "array", "items": {"type": "string", "format": "binary"}}}},
                "examples": {"upload": {"summary": "upload .txt/.md files", "value": {"files": ["carol.txt"]}}},
            },
        },
    }
}
