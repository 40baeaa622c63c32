"""Every graphfleet variable is a ``Settings`` field, read under its contract name (``GRAPHFLEET_...``)."""

from __future__ import annotations

import pytest

from shared.config import Settings

CONTRACTS = {  # variable -> (value, the field's value it gives)
    "GRAPHFLEET_API_KEY_PEPPER": ("pep-1", ("api_key_pepper", "pep-1")),
    "GRAPHFLEET_API_KEY": ("gfk_x", ("api_key", "gfk_x")),
    "GRAPHFLEET_GATEWAY_MAX_BODY_BYTES": ("80000000", ("gateway_max_body_bytes", 80_000_000)),
    "GRAPHFLEET_METRICS_PORT": ("9808", ("metrics_port", 9808)),
    "GRAPHFLEET_METRICS_TENANT_ALLOWLIST": (" acme,globex ,,", ("metrics_tenant_allowlist", {"acme", "globex"})),
    "GRAPHFLEET_WORKER_LOG_LEVEL": ("DEBUG", ("worker_log_level", "DEBUG")),
}


@pytest.mark.parametrize("variable", sorted(CONTRACTS))
def test_each_variable_sets_its_field(monkeypatch, variable):
    value, (name, expected) = CONTRACTS[variable]
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), name) == expected


def test_unset_and_empty_variables_give_the_defaults(monkeypatch):
    s = Settings()
    assert (s.api_key_pepper, s.api_key, s.metrics_port, s.worker_log_level) == ("", None, None, "WARNING")
    assert s.gateway_max_body_bytes == 64 * 1024 * 1024 and s.metrics_tenant_allowlist == frozenset()
    for variable in ("GRAPHFLEET_GATEWAY_MAX_BODY_BYTES", "GRAPHFLEET_METRICS_PORT",
                     "GRAPHFLEET_METRICS_TENANT_ALLOWLIST"):
        monkeypatch.setenv(variable, "")  # `VAR=` in an env file: unset
    s = Settings()
    assert s.gateway_max_body_bytes == 64 * 1024 * 1024 and s.metrics_port is None
    assert s.metrics_tenant_allowlist == frozenset()


def test_secrets_stay_out_of_the_settings_repr(monkeypatch):
    monkeypatch.setenv("GRAPHFLEET_API_KEY_PEPPER", "pep-secret")
    monkeypatch.setenv("GRAPHFLEET_API_KEY", "gfk_secret")
    assert "pep-secret" not in repr(Settings()) and "gfk_secret" not in repr(Settings())
