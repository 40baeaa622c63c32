"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from tests.gateway.live import start_live


@pytest.fixture(scope="module")
def live(redis_server, tmp_path_factory, request):
    """A real stack of the module's own (worker processes, the gateway subprocess, an LLM simulator)."""
    stack = start_live(redis_server.url, tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]),
                       redis_server.broker_url)
    yield stack
    stack.stop()
