"""Backends of the management verbs (tenants, keys, jobs, documents, usage): the gateway through
:class:`graphfleet.Client` when ``GRAPHFLEET_URL`` is set, else the local stack's Redis directly.

Both return the gateway's JSON shapes (``api_gateway/schemas.py``), so ``--json`` output is the same in both modes.
"""

from __future__ import annotations

from graphfleet import Client
from graphfleet.errors import ApiError, NotFoundError
from graphfleet_cli.errors import missing_key, tenant_mismatch
from graphfleet_cli.http_client import ADMIN_KEY_ENV, API_KEY_ENV
from shared.public_json import accepted_json, cancel_json, document_json, job_json, usage_json


def _dump(obj) -> dict:
    return obj.model_dump(mode="json", by_alias=True)


def missing_route(exc: ApiError, route: str) -> ApiError:
    if exc.status in (404, 405):
        return ApiError(exc.status, "unsupported", f"this gateway has no {route}: run the command without "
                        "GRAPHFLEET_URL on a host that reaches the stack's Redis (GRAPHFLEET_REDIS_URL)")
    return exc


class HttpBackend:
    """The gateway: tenant verbs with ``GRAPHFLEET_API_KEY``, admin verbs (tenants, keys) with
    ``GRAPHFLEET_ADMIN_KEY``."""

    def __init__(self, url: str, admin: bool):
        from shared.config import get_settings

        settings = get_settings()
        env, key = (ADMIN_KEY_ENV, settings.admin_key) if admin else (API_KEY_ENV, settings.api_key)
        if not key:
            raise missing_key(env, "the admin key" if admin else "a tenant API key")
        self.api = Client(url, key, user_agent="graphfleet-cli")

    def close(self) -> None:
        self.api.close()

    def tenant(self, requested: str | None) -> str:
        tenant = self.api.current_tenant().id
        if requested and requested != tenant:
            raise tenant_mismatch(requested, tenant, API_KEY_ENV)
        return tenant

    def create_tenant(self, **fields) -> dict:
        return _dump(self.api.create_tenant(**fields))

    def list_tenants(self) -> list[dict]:
        try:
            return [_dump(t) for t in self.api.list_tenants()]
        except ApiError as exc:
            raise missing_route(exc, "GET /v1/tenants") from None

    def get_tenant(self, tenant_id: str) -> dict:
        return _dump(self.api.get_tenant(tenant_id))

    def create_key(self, tenant_id: str, name: str) -> dict:
        return _dump(self.api.create_key(tenant_id, name))

    def revoke_key(self, tenant_id: str, key_id: str) -> dict:
        return _dump(self.api.revoke_key(tenant_id, key_id))

    def list_jobs(self, tenant: str, offset: int, limit: int, status: str | None, kind: str | None) -> dict:
        try:
            return _dump(self.api.list_jobs(offset=offset, limit=limit, status=status, kind=kind))
        except ApiError as exc:
            raise missing_route(exc, "GET /v1/jobs") from None

    def get_job(self, tenant: str, job_id: str) -> dict:
        return _dump(self.api.get_job(job_id))

    def cancel_job(self, tenant: str, job_id: str) -> dict:
        return _dump(self.api.cancel_job(job_id))

    def list_documents(self, tenant: str, offset: int, limit: int, status: str | None) -> dict:
        return _dump(self.api.list_documents(offset=offset, limit=limit, status=status))

    def get_document(self, tenant: str, doc_id: str) -> dict:
        return _dump(self.api.get_document(doc_id))

    def delete_document(self, tenant: str, doc_id: str) -> dict:
        return _dump(self.api.delete_document(doc_id))

    def wait_job(self, tenant: str, job_id: str) -> dict:
        return _dump(self.api.wait_job(job_id))

    def usage(self, tenant: str, start: str | None, end: str | None, group_by: str | None) -> dict:
        return _dump(self.api.usage(from_=start, to=end, group_by=group_by))


class LocalBackend:
    """The local stack (``GRAPHFLEET_REDIS_URL``, or the running ``graphfleet up`` stack's Redis)."""

    def __init__(self):
        from graphfleet_cli.stack import resolve_redis_url
        from shared.config import get_settings
        from shared.infra.messaging.queueing import settings_for
        from shared.infra.redis.conn import connect

        url = resolve_redis_url()
        self.settings = settings_for(get_settings(), url)
        self.redis = connect(url)

    def close(self) -> None:
        self.redis.close()

    def tenant(self, requested: str | None) -> str:
        return requested or self.settings.default_tenant

    def _tenants(self):
        from shared.infra.tenancy.tenants import TenantStore, api_key_pepper

        return TenantStore(self.redis, api_key_pepper(self.settings))

    def create_tenant(self, **fields) -> dict:
        from shared.infra.tenancy.tenants import Tenant, TenantExists

        store = self._tenants()
        record = Tenant(**{"id": fields.get("id") or store.new_id(),
                           **{k: v for k, v in fields.items() if k != "id" and v is not None}})
        try:
            return store.create(record).model_dump(mode="json")
        except TenantExists:
            raise ApiError(409, "tenant_exists", f"tenant {record.id!r} already exists") from None

    def list_tenants(self) -> list[dict]:
        from shared.infra.redis.keys import tenants_key

        store = self._tenants()
        ids = sorted(x.decode() if isinstance(x, bytes) else x for x in self.redis.smembers(tenants_key()))
        return [t.model_dump(mode="json") for t in map(store.get, ids) if t is not None]

    def get_tenant(self, tenant_id: str) -> dict:
        record = self._tenants().get(tenant_id)
        if record is None:
            raise NotFoundError(404, "not_found", "tenant not found")
        return record.model_dump(mode="json")

    def create_key(self, tenant_id: str, name: str) -> dict:
        from dataclasses import asdict

        store = self._tenants()
        if store.get(tenant_id) is None:
            raise NotFoundError(404, "not_found", "tenant not found")
        return asdict(store.issue_key(tenant_id, name))

    def revoke_key(self, tenant_id: str, key_id: str) -> dict:
        store = self._tenants()
        if store.get(tenant_id) is None or not store.revoke_key(tenant_id, key_id):
            raise NotFoundError(404, "not_found", "key not found")
        return {"key_id": key_id, "tenant": tenant_id, "revoked": True}

    def _job(self, tenant: str, job_id: str) -> dict:
        from shared.infra.jobs.store import JobStore

        view = JobStore(self.redis, tenant).view(job_id)
        if view is None:
            raise NotFoundError(404, "not_found", "job not found")
        return view

    def _require_tenant(self, tenant: str) -> None:
        """A tenant is known when it is registered, has a document or a job, or is the default one; an unknown
        one is not found (exit 3), as it is over HTTP, rather than an empty list."""
        from shared.infra.redis.keys import Keys, tenants_key

        k = Keys(tenant)
        if tenant == self.settings.default_tenant or self.redis.sismember(tenants_key(), tenant):
            return
        if not (self.redis.zcard(k.docs()) or self.redis.zcard(k.jobs())):
            raise NotFoundError(404, "not_found", f"no tenant {tenant!r} (no documents or jobs, not registered)")

    def list_jobs(self, tenant: str, offset: int, limit: int, status: str | None, kind: str | None) -> dict:
        from shared.infra.redis.keys import Keys

        self._require_tenant(tenant)
        ids = [x.decode() if isinstance(x, bytes) else x for x in self.redis.zrevrange(Keys(tenant).jobs(), 0, -1)]
        views = [v for v in (self._view_or_none(tenant, i) for i in ids) if v is not None
                 and (status is None or v["status"] == status) and (kind is None or v.get("kind") == kind)]
        return {"items": [job_json(v) for v in views[offset:offset + limit]], "total": len(views), "offset": offset,
                "limit": limit}

    def _view_or_none(self, tenant: str, job_id: str) -> dict | None:
        try:
            return self._job(tenant, job_id)
        except NotFoundError:
            return None

    def get_job(self, tenant: str, job_id: str) -> dict:
        return job_json(self._job(tenant, job_id))

    def cancel_job(self, tenant: str, job_id: str) -> dict:
        from shared.infra.jobs.store import JobStore

        jobs = JobStore(self.redis, tenant)
        stage = self._job(tenant, job_id).get("stage")
        canceled = jobs.cancel(job_id)
        return cancel_json(job_id, canceled, self._job(tenant, job_id), stage)

    def list_documents(self, tenant: str, offset: int, limit: int, status: str | None) -> dict:
        from shared.infra.store.redis_graph import GraphStore

        self._require_tenant(tenant)
        store = GraphStore(self.redis, tenant)
        ids = store.list_document_ids(0, store.document_count() + 1)
        docs = store.documents(ids)
        matching = [docs[i] for i in ids if i in docs and docs[i].status != "deleted"
                    and (status is None or docs[i].status == status)]
        return {"items": [document_json(d) for d in matching[offset:offset + limit]], "total": len(matching),
                "offset": offset, "limit": limit, "status": status}

    def _document(self, tenant: str, doc_id: str):
        from shared.infra.store.redis_graph import GraphStore

        doc = GraphStore(self.redis, tenant).document(doc_id)
        if doc is None or doc.status == "deleted":
            raise NotFoundError(404, "not_found", "document not found")
        return doc

    def get_document(self, tenant: str, doc_id: str) -> dict:
        return document_json(self._document(tenant, doc_id))

    def delete_document(self, tenant: str, doc_id: str) -> dict:
        from shared.infra.jobs.ingest_submit import submit_deletion
        from shared.infra.messaging.queueing import make_celery

        self._document(tenant, doc_id)
        return accepted_json(submit_deletion(self.redis, make_celery(self.settings), tenant, doc_id), "delete",
                             documents=1)

    def wait_job(self, tenant: str, job_id: str) -> dict:
        from shared.infra.jobs.status import wait_finished
        from shared.infra.jobs.store import JobStore

        wait_finished(JobStore(self.redis, tenant), job_id, 3600.0)
        return self.get_job(tenant, job_id)

    def usage(self, tenant: str, start: str | None, end: str | None, group_by: str | None) -> dict:
        from shared.infra.tenancy.ledger import parse_time, usage_report

        try:
            lo, hi = parse_time(start, end=False), parse_time(end, end=True)
        except ValueError:
            raise ApiError(422, "invalid_time", "--from/--to: expected an ISO date/datetime or unix seconds") from None
        if lo is not None and hi is not None and lo > hi:
            raise ApiError(422, "invalid_time_range", "--from is after --to")
        return usage_json(tenant, lo, hi, group_by, usage_report(self.redis, tenant, lo, hi, group_by))


def backend(admin: bool = False):
    """The gateway's backend when ``GRAPHFLEET_URL`` is set, else the local stack's."""
    from shared.config import get_settings

    url = get_settings().url
    return HttpBackend(url, admin) if url else LocalBackend()
