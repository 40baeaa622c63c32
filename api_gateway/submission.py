"""The shared submit path: idempotency replay -> quotas -> claim -> enqueue -> record.

Every check happens before anything is enqueued; a rejected request leaves no job behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from api_gateway.deps import Principal
from api_gateway.idempotency import Idempotency
from api_gateway.state import Gateway
from shared.infra.tenancy.quotas import check_token_budget, commit_job_slot, release_job_slot, reserve_job_slot

log = logging.getLogger("api_gateway")


def run_submission(gw: Gateway, who: Principal, *, scope: str, idempotency_key: str | None, fingerprint: str,
                   submit: Callable[[], dict], uses_llm: bool = True) -> tuple[int, dict]:
    """Returns (status, body); ``submit`` enqueues and returns a body with ``job_id``."""
    idem = Idempotency(gw.redis, who.tenant, scope, idempotency_key, fingerprint) if idempotency_key else None
    if idem is not None and (stored := idem.replay()) is not None:
        return stored
    if uses_llm:
        check_token_budget(gw.redis, who.tenant, who.limits)
    reservation = reserve_job_slot(gw.redis, who.tenant, who.limits)
    try:
        if idem is not None and (stored := idem.claim()) is not None:
            release_job_slot(gw.redis, who.tenant, reservation)
            return stored
        body = submit()
        commit_job_slot(gw.redis, who.tenant, reservation, body["job_id"])
        log.info("%s job %s submitted", scope, body["job_id"], extra={"job_id": body["job_id"], "tenant": who.tenant,
                                                                      "kind": body.get("kind", "query")})
        if idem is not None:
            idem.complete(202, body)
        return 202, body
    except BaseException:
        release_job_slot(gw.redis, who.tenant, reservation)
        if idem is not None:
            idem.abandon()
        raise
