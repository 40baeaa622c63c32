"""Fuzz the gateway from its own OpenAPI document (schemathesis), in-process against a real Redis.

Every operation gets valid (positive) and invalid (negative) requests, authenticated as a tenant
(admin routes with the admin key). No response may be a 5xx or contain a stack trace. Bounded:
``EXAMPLES`` per operation and mode, derandomised, so the run is reproducible and takes well under
a minute. It found one bug when written: ``GET /v1/documents?offset=9223372036854775808`` reached
Redis ZRANGE and answered 500 (fixed with an upper bound on ``offset``); without that bound this
test fails again.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402

from tests.gateway.helpers import ADMIN  # noqa: E402

EXAMPLES = 10
TRACE_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages", ".py\", line ")


def _problems(response, documented: set[str]) -> list[str]:
    """A 5xx is a problem unless the operation documents it (``/readyz`` answers 503 without workers)."""
    text = response.text
    out = [f"HTTP {response.status_code}"] if response.status_code >= 500 and (
        str(response.status_code) not in documented) else []
    out += [f"stack trace ({m!r})" for m in TRACE_MARKERS if m in text]
    return out


def _fuzz(operation, mode, headers: dict, found: dict) -> None:
    documented = set(operation.definition.raw.get("responses", {}))

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        if case.query:  # ?wait holds a request open for up to 60 s by design; no worker answers here
            case.query.pop("wait", None)
        response = case.call(headers={**(case.headers or {}), **headers})
        problems = _problems(response, documented)
        if problems:
            found.setdefault(f"{case.method} {operation.path} [{mode.value}]", f"{problems}: {response.text[:300]}")

    try:
        run()
    except Unsatisfiable:  # no invalid request can be built for this operation (e.g. it has no inputs)
        pass


def test_gateway_survives_schema_driven_fuzzing(api, alice):
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.app)
    found: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        headers = {"X-API-Key": ADMIN if operation.path.startswith("/v1/tenants") else alice["key"]}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, headers, found)
    assert found == {}, found
