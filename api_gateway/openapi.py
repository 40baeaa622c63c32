"""The OpenAPI document, made exact (``tests/gateway/test_openapi_conformance.py`` checks live responses against it).

* **Operation ids** are stable names (``documents_ingest``...), not FastAPI's generated
  ``ingest_documents_v1_documents_post``: generated clients name their methods after them, so renaming a
  handler or moving a path must not change them. ``tests/gateway/openapi_operation_ids.txt`` is the
  checked-in list; changing an id is an API change.
* **Validation errors** (422, and FastAPI's default 422 of every operation with parameters or a body) use the
  real error model ``{"error": {"code", "message", "details"?}}`` (``api_gateway.errors.ErrorBody``), not
  FastAPI's ``{"detail": [...]}``, which this server never sends.
* **Headers**: every 202 carries ``Location`` (the job/query to poll) and ``Retry-After`` (seconds before the
  first poll); every 429 and 503 ``Retry-After``; every 401 ``WWW-Authenticate``; a 200 of an unfinished job
  or query ``Retry-After``; a query finished within ``?wait`` ``Location``.

Errors stay ``application/json`` with the ``{"error": {...}}`` body, not RFC 9457 ``application/problem+json``:
problem details put ``type``/``title``/``status``/``detail`` at the top level, which would change the body every
client, the CLI and docs/api.md rely on; a media type announcing problem+json with another body would be wrong.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute

OPERATION_IDS = {
    "healthz": "health_live", "readyz": "health_ready", "prometheus_metrics": "metrics_scrape",
    "create_tenant": "tenants_create", "list_tenants": "tenants_list", "get_tenant": "tenants_get",
    "create_key": "tenants_keys_create",
    "revoke_key": "tenants_keys_revoke", "whoami": "tenants_current",
    "ingest_documents": "documents_ingest", "list_documents": "documents_list", "get_document": "documents_get",
    "delete_document": "documents_delete",
    "list_jobs": "jobs_list", "get_job": "jobs_get", "cancel_job": "jobs_cancel",
    "create_query": "queries_create", "get_query": "queries_get",
    "get_usage": "usage_get",
    "graph_stats": "graph_stats", "graph_entity": "graph_entity", "graph_export": "graph_export",
    "graph_entities_search": "graph_entities_search", "graph_communities": "graph_communities",
    "graph_community": "graph_community",
}

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_SECONDS = {"type": "integer", "minimum": 1}
RETRY_AFTER = {"description": "seconds to wait before retrying (or polling)", "schema": _SECONDS, "required": True}
LOCATION = {"description": "the job or query to poll", "schema": {"type": "string", "pattern": "^/v1/"},
            "required": True}
WWW_AUTHENTICATE = {"description": "`Bearer`", "schema": {"type": "string"}, "required": True}
BY_STATUS = {"202": {"Location": LOCATION, "Retry-After": RETRY_AFTER}, "429": {"Retry-After": RETRY_AFTER},
             "503": {"Retry-After": RETRY_AFTER}, "401": {"WWW-Authenticate": WWW_AUTHENTICATE}}
POLL_HINT = {"Retry-After": {**RETRY_AFTER, "required": False,
                             "description": "present while the job/query has not finished: seconds to the next poll"}}
BY_OPERATION = {("jobs_get", "200"): POLL_HINT, ("queries_get", "200"): POLL_HINT,
                ("queries_create", "200"): {"Location": LOCATION}}


def operation_id(route: APIRoute) -> str:
    """FastAPI's ``generate_unique_id_function``: the stable id of a route (its handler name if unlisted)."""
    return OPERATION_IDS.get(route.name, route.name)


def _fix_operation(op: dict) -> None:
    if "requestBody" in op:  # any body may be unparsable (not UTF-8, not JSON): 400 `malformed_json`
        op["responses"].setdefault("400", {"description": "bad request",
                                           "content": {"application/json": {"schema": ERROR_REF}}})
    for status, response in op.get("responses", {}).items():
        if status == "422":
            response["description"] = "invalid input (`validation_error` with `details`, or a specific code)"
            response["content"] = {"application/json": {"schema": ERROR_REF}}
        headers = {**BY_STATUS.get(status, {}), **BY_OPERATION.get((op.get("operationId"), status), {})}
        if headers:
            response["headers"] = {**response.get("headers", {}), **headers}


def exact_openapi(schema: dict) -> dict:
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            _fix_operation(op)
    for unused in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(unused, None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """``app.openapi()`` returns the exact document (built once)."""

    def openapi() -> dict:
        if not app.openapi_schema:
            app.openapi_schema = exact_openapi(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi
