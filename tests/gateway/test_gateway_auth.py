"""API keys, tenants, admin key: auth is by key only, keys are stored hashed, revocation works."""

from __future__ import annotations

import pytest

from shared.config import Settings, reset_settings_cache
from shared.infra.redis.keys import Keys
from tests.gateway.helpers import (
    ADMIN,
    ADMIN_HEADERS,
    assert_error,
    make_client,
    new_tenant,
)


def test_healthz_needs_no_key(api):
    assert api.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("headers,code", [
    ({}, "missing_api_key"),
    ({"X-API-Key": "nope"}, "invalid_api_key"),
    ({"Authorization": "Bearer gfk_0123456789abcdef_" + "x" * 43}, "invalid_api_key"),
    ({"X-API-Key": ADMIN}, "invalid_api_key"),  # the admin key is not a tenant key
])
def test_tenant_endpoints_reject_missing_or_unknown_keys(api, alice, headers, code):
    body = assert_error(api.get("/v1/documents", headers=headers), 401, code)
    assert "gfk_" not in body["error"]["message"]


def test_key_works_as_header_and_bearer_and_binds_the_tenant(api, alice):
    assert api.get("/v1/tenant", headers=alice["headers"]).json()["id"] == "alice"
    r = api.get("/v1/tenant", headers={"Authorization": f"Bearer {alice['key']}"})
    assert r.status_code == 200 and r.json()["id"] == "alice"


def test_tenant_comes_from_the_key_never_the_body(api, alice, bob, gw_redis):
    r = api.post("/v1/documents", json={"documents": [{"text": "hello world"}], "tenant": "bob"},
                 headers=alice["headers"])
    assert_error(r, 422, "validation_error")
    r = api.post("/v1/documents", json={"documents": [{"text": "hello world"}]}, headers=alice["headers"])
    assert r.status_code == 202
    assert api.get("/v1/documents", headers=bob["headers"]).json()["total"] == 0
    assert api.get("/v1/documents", headers=alice["headers"]).json()["total"] == 1


def test_admin_endpoints_need_the_admin_key(api, alice):
    assert_error(api.post("/v1/tenants", json={"id": "eve"}), 401, "missing_api_key")
    assert_error(api.post("/v1/tenants", json={"id": "eve"}, headers=alice["headers"]), 401, "invalid_admin_key")
    assert_error(api.post("/v1/tenants/alice/keys", json={}, headers=alice["headers"]), 401, "invalid_admin_key")
    assert_error(api.get("/v1/tenants/alice", headers={"X-API-Key": ADMIN + "x"}), 401, "invalid_admin_key")


def test_tenant_creation_validation_and_conflicts(api):
    r = api.post("/v1/tenants", json={"name": "generated", "tier": "gold", "preset": "balanced",
                                      "limits": {"requests_per_minute": 10}}, headers=ADMIN_HEADERS)
    assert r.status_code == 201
    created = r.json()
    assert created["id"] and created["tier"] == "gold" and created["preset"] == "balanced"
    assert created["limits"]["requests_per_minute"] == 10
    assert api.get(f"/v1/tenants/{created['id']}", headers=ADMIN_HEADERS).json() == created
    assert_error(api.post("/v1/tenants", json={"id": created["id"]}, headers=ADMIN_HEADERS), 409, "tenant_exists")
    assert_error(api.post("/v1/tenants", json={"id": "Bad Id!"}, headers=ADMIN_HEADERS), 422, "validation_error")
    assert_error(api.post("/v1/tenants", json={"id": "x", "preset": "huge"}, headers=ADMIN_HEADERS), 422,
                 "validation_error")
    assert_error(api.post("/v1/tenants", json={"id": "y", "limits": {"requests_per_minute": -1}},
                          headers=ADMIN_HEADERS), 422, "validation_error")
    assert_error(api.get("/v1/tenants/nobody", headers=ADMIN_HEADERS), 404, "not_found")
    assert_error(api.post("/v1/tenants/nobody/keys", json={}, headers=ADMIN_HEADERS), 404, "not_found")


def test_keys_are_stored_hashed(api, alice, gw_redis):
    secret = alice["key"].split("_", 2)[2]  # gfk_{key_id}_{secret}: the secret itself may contain "_"
    for key in gw_redis.scan_iter("*"):
        kind = gw_redis.type(key)
        if kind == b"string":
            assert secret.encode() not in gw_redis.get(key)
        elif kind == b"hash":
            assert all(secret.encode() not in v for v in gw_redis.hvals(key))
    assert gw_redis.hget("gf:apikeys", alice["key_id"]) == b"alice"
    assert gw_redis.exists(Keys("alice").api_key(alice["key_id"]))


def test_revoked_key_is_rejected_and_other_keys_keep_working(api, alice, bob):
    second = api.post("/v1/tenants/alice/keys", json={}, headers=ADMIN_HEADERS).json()["api_key"]
    # revoking through another tenant's path does not touch the key (and does not reveal it)
    assert_error(api.delete(f"/v1/tenants/bob/keys/{alice['key_id']}", headers=ADMIN_HEADERS), 404, "not_found")
    assert api.get("/v1/tenant", headers=alice["headers"]).status_code == 200
    r = api.delete(f"/v1/tenants/alice/keys/{alice['key_id']}", headers=ADMIN_HEADERS)
    assert r.status_code == 200 and r.json()["revoked"] is True
    assert_error(api.get("/v1/tenant", headers=alice["headers"]), 401, "invalid_api_key")
    assert api.get("/v1/tenant", headers={"X-API-Key": second}).json()["id"] == "alice"
    assert_error(api.delete("/v1/tenants/alice/keys/0000000000000000", headers=ADMIN_HEADERS), 404, "not_found")


def test_a_tampered_key_with_a_real_key_id_is_rejected(api, alice):
    prefix, key_id, secret = alice["key"].split("_", 2)
    forged = f"{prefix}_{key_id}_{'A' * len(secret)}"
    assert_error(api.get("/v1/tenant", headers={"X-API-Key": forged}), 401, "invalid_api_key")


def test_outside_development_the_admin_key_is_required(gw_env):
    gw_env.delenv("GRAPHFLEET_ADMIN_KEY")
    gw_env.setenv("GRAPHFLEET_ENV", "production")
    reset_settings_cache()
    with pytest.raises(RuntimeError, match="GRAPHFLEET_ADMIN_KEY"):
        make_client()


def test_development_generates_and_prints_an_admin_key(gw_env, capsys):
    gw_env.delenv("GRAPHFLEET_ADMIN_KEY")
    reset_settings_cache()
    with make_client() as client:
        printed = capsys.readouterr().err
        key = printed.split("development admin key: ", 1)[1].split()[0]
        assert client.post("/v1/tenants", json={"id": "devt"}, headers={"X-API-Key": key}).status_code == 201
    assert Settings().env == "development"


def test_tenant_record_fixture_is_isolated(api, alice, bob):
    assert new_tenant(api, "carol")["id"] == "carol"
