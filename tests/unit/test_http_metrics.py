"""Gateway HTTP metrics (api_gateway/http_metrics.py) on the real gateway app (TestClient, real Redis): counted
per route template and status class, never per raw path; refused and failing requests counted too."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from shared.config import reset_settings_cache
from shared.infra.observability.metrics import metrics_response


def scrape() -> dict[tuple[str, tuple], float]:
    out = {}
    for fam in text_string_to_metric_families(metrics_response()[0].decode()):
        for s in fam.samples:
            if s.name.startswith("graphfleet_http_"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def delta(before: dict, after: dict) -> dict[tuple[str, tuple], float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def requests(d: dict, **labels) -> float:
    return sum(v for (name, lab), v in d.items()
               if name == "graphfleet_http_requests_total" and all(dict(lab).get(k) == w for k, w in labels.items()))


@pytest.fixture()
def gateway(monkeypatch, redis_server, tmp_path):
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", redis_server.url)
    monkeypatch.setenv("GRAPHFLEET_DATA_DIR", str(tmp_path))
    reset_settings_cache()
    from api_gateway.app import create_app

    app = create_app(max_body_bytes=1024)

    async def boom():
        raise RuntimeError("handler bug")

    app.add_api_route("/v1/boom/{thing_id}", boom, methods=["GET"])
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    reset_settings_cache()


def test_requests_are_counted_by_route_template_and_status_class(gateway):
    job_id = uuid.uuid4().hex
    before = scrape()
    assert gateway.get("/healthz").status_code == 200
    assert gateway.get(f"/v1/jobs/{job_id}").status_code == 401  # no API key
    assert gateway.get(f"/v1/jobs/{job_id}x").status_code == 401
    assert gateway.get(f"/no/such/{job_id}").status_code == 404
    assert gateway.post("/v1/documents", content=b"x" * 4096,
                        headers={"content-type": "application/json"}).status_code == 413
    assert gateway.get(f"/v1/boom/{job_id}").status_code == 500
    d = delta(before, scrape())

    assert requests(d, route="/healthz", method="GET", status="2xx") == 1
    assert requests(d, route="/v1/jobs/{job_id}", method="GET", status="4xx") == 2
    assert requests(d, route="unmatched", status="4xx") == 2  # the 404 and the body refused before routing
    assert requests(d, route="/v1/boom/{thing_id}", method="GET", status="5xx") == 1
    assert requests(d) == 6
    # no raw path, id or tenant ever becomes a label value; no tenant label at all
    for _name, labels in d:
        assert job_id not in str(labels) and "tenant" not in dict(labels)
    durations: dict[str, float] = {}
    for (name, lab), v in d.items():
        if name == "graphfleet_http_request_duration_seconds_count":
            durations[dict(lab)["route"]] = durations.get(dict(lab)["route"], 0) + v
    assert durations == {"/healthz": 1, "/v1/jobs/{job_id}": 2, "unmatched": 2, "/v1/boom/{thing_id}": 1}
