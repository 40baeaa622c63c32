"""Live responses of every route, errors included, conform to the gateway's own OpenAPI document.

schemathesis generates requests from ``/openapi.json`` and sends them to the real app (in-process, real Redis;
no worker is needed for a 202): valid and invalid inputs with a tenant's (or the admin) key, the same requests
without a key (401) and with a throttled tenant's key (429), plus explicit requests for the answers random input
rarely reaches (202 of a delete, 200 of a job/query). Every response is checked for a documented status code,
content type, body schema and headers (``Location``/``Retry-After``/``WWW-Authenticate`` where declared required).
The test also asserts the error answers it must have exercised, so a route whose 401/422/429/404 drifts from the
document cannot pass by never being reached. Bounded: ``EXAMPLES`` per operation and mode, derandomised.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.gateway.helpers import ADMIN, new_tenant  # noqa: E402

EXAMPLES = 6
CHECKS = [status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
OPERATION_IDS = Path(__file__).with_name("openapi_operation_ids.txt")
UNAUTHENTICATED = {"health_live", "health_ready", "metrics_scrape"}


class Run:
    def __init__(self, keys: dict[str, str]):
        self.keys = keys
        self.seen: dict[str, set[int]] = defaultdict(set)
        self.failures: dict[str, str] = {}

    def send(self, operation, case, headers: dict | None, label: str) -> None:
        sent = {k: v for k, v in (case.headers or {}).items() if k.lower() not in ("x-api-key", "authorization")}
        response = case.call(headers={**sent, **(headers or {})})
        op_id = operation.definition.raw["operationId"]
        self.seen[op_id].add(response.status_code)
        try:
            case.validate_response(response, checks=CHECKS)
        except (AssertionError, BaseExceptionGroup) as exc:  # schemathesis raises a group of check failures
            self.failures.setdefault(f"{case.method} {operation.path} [{label}] {response.status_code}",
                                     f"{exc}"[:800] + f"\nbody: {response.text[:300]}")

    def fuzz(self, operation, mode: GenerationMode) -> None:
        op_id = operation.definition.raw["operationId"]
        own = None if op_id in UNAUTHENTICATED else {"X-API-Key": self.key_for(operation)}

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case):
            if case.query:  # ?wait holds a request open for up to 60 s by design; no worker answers here
                case.query.pop("wait", None)
            self.send(operation, case, own, mode.value)
            if own is not None and mode == GenerationMode.POSITIVE:
                self.send(operation, case, None, "no key")
                if not operation.path.startswith("/v1/tenants/") and op_id != "tenants_create":
                    self.send(operation, case, {"X-API-Key": self.keys["throttled"]}, "throttled")

        try:
            run()
        except Unsatisfiable:  # no invalid request can be built for this operation (it has no inputs)
            pass

    def key_for(self, operation) -> str:
        return self.keys["admin"] if operation.path.startswith("/v1/tenants") else self.keys["tenant"]


def _explicit_cases(schema, api, who: dict, run: Run) -> None:
    """The answers random input rarely produces: 202 of a delete, 200 of a known job and query, 400."""
    r = api.post("/v1/documents", json={"documents": [{"id": "doc-1", "text": "Marley was dead."}]},
                 headers=who["headers"])
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    r = api.post("/v1/queries", json={"query": "Who is Marley?"}, headers=who["headers"])
    assert r.status_code == 202, r.text
    query_id = r.json()["query_id"]
    ops = {op.definition.raw["operationId"]: op for op in (res.ok() for res in schema.get_all_operations())}
    doc = {"documents": [{"text": "Scrooge knew he was dead."}]}
    tenant = {"tenant_id": who["id"]}
    cases = [
        ("documents_ingest", {"body": doc, "media_type": "application/json"}),
        ("documents_ingest", {"headers": {"Idempotency-Key": "a\tb"}, "body": doc, "media_type": "application/json"}),
        ("documents_delete", {"path_parameters": {"doc_id": "doc-1"}}),
        ("jobs_get", {"path_parameters": {"job_id": job_id}}),
        ("queries_get", {"path_parameters": {"query_id": query_id}}),
        ("jobs_cancel", {"path_parameters": {"job_id": job_id}}),
        ("tenants_keys_create", {"path_parameters": tenant, "body": {"bogus": 1}, "media_type": "application/json"}),
        ("tenants_keys_revoke", {"path_parameters": {**tenant, "key_id": "k" * 65}}),
    ]
    for op_id, fields in cases:
        run.send(ops[op_id], ops[op_id].Case(**fields), {"X-API-Key": run.key_for(ops[op_id])}, "explicit")


def test_live_responses_conform_to_the_openapi_document(api, alice):
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.app)
    throttled = new_tenant(api, "throttled", limits={"requests_per_minute": 1, "burst": 1})
    run = Run({"admin": ADMIN, "tenant": alice["key"], "throttled": throttled["key"]})
    _throttle(api, throttled)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run.fuzz(operation, mode)
    _explicit_cases(schema, api, alice, run)
    assert run.failures == {}, "\n\n".join(f"{k}: {v}" for k, v in run.failures.items())
    missing = _unexercised(operations, run.seen)
    assert missing == [], "\n".join(missing)


def _throttle(api, who: dict) -> None:
    """Empty the tenant's request bucket (1 request per minute): its next requests get 429."""
    for _ in range(3):
        if api.get("/v1/tenant", headers=who["headers"]).status_code == 429:
            return
    raise AssertionError("the tenant was never rate limited")


def _unexercised(operations, seen: dict[str, set[int]]) -> list[str]:
    """Documented error answers each operation must have produced in this run."""
    must = {"401", "422", "429", "202", "503"}
    out = []
    for op in operations:
        op_id = op.definition.raw["operationId"]
        for status in sorted(must & set(op.definition.raw["responses"])):
            if int(status) not in seen[op_id]:
                out.append(f"{op_id} {status} (seen {sorted(seen[op_id])})")
    for op_id in ("documents_get", "jobs_get", "queries_get", "graph_entity", "tenants_get"):
        if 404 not in seen[op_id]:
            out.append(f"{op_id} 404 (seen {sorted(seen[op_id])})")
    return out


def test_operation_ids_are_unique_and_stable(api):
    spec = api.get("/openapi.json").json()
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)), ids
    expected = [line.split()[0] for line in OPERATION_IDS.read_text().splitlines() if line and line[0] != "#"]
    assert sorted(ids) == sorted(expected), "operation ids changed: an API change; update the checked-in list"


REQUIRED_HEADERS = {"202": {"Location", "Retry-After"}, "401": {"WWW-Authenticate"}, "429": {"Retry-After"},
                    "503": {"Retry-After"}}


def test_errors_use_the_real_error_model_and_headers_are_declared(api):
    spec = api.get("/openapi.json").json()
    text = json.dumps(spec)
    assert "HTTPValidationError" not in text and '"detail"' not in text
    for ops in spec["paths"].values():
        for op in ops.values():
            if "422" in op["responses"]:
                assert op["responses"]["422"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorBody"}, op["operationId"]
            for status, names in REQUIRED_HEADERS.items():
                declared = op["responses"].get(status, {}).get("headers", {})
                if status in op["responses"]:
                    assert {n for n in names if declared.get(n, {}).get("required")} == names, (op["operationId"],
                                                                                               status)
