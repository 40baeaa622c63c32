"""The public JSON of jobs, documents, cancels, accepted submissions and usage reports: one definition for the
gateway's responses (``api_gateway/schemas.py`` models are built from these dicts) and for the CLI's local
backend, so ``graphfleet jobs show`` and ``graphfleet documents`` print the same JSON with or without
``GRAPHFLEET_URL``.

Pure functions of what the stores return (``JobStore.view()`` dicts, :class:`~shared.domain.models.Document`);
nothing here reads Redis.
"""

from __future__ import annotations

from shared.domain.models import Document

TIMESTAMPS = ("created_at", "started_at", "updated_at", "finished_at")


def job_json(view: dict) -> dict:
    """A ``JobStore.view()`` as ``GET /v1/jobs/{id}`` shows it: ``job_id`` for ``id``, the timestamps grouped, a
    query's result left to ``GET /v1/queries/{id}``."""
    return {"job_id": view["id"], "kind": view.get("kind", ""), "status": view["status"], "stage": view.get("stage"),
            "progress": view["progress"], "failures": view["failures"], "usage": view["usage"],
            "timestamps": {f: view.get(f) for f in TIMESTAMPS},
            "stage_times": view.get("stage_times", {}), "error": view.get("error"),
            "result": view.get("result") if view.get("kind") != "query" else None, "waiting": view.get("waiting")}


def job_view(body: dict) -> dict:
    """:func:`job_json` read back into the ``JobStore.view()`` shape (``id``, flat timestamps, unset ones left
    out), for the CLI's HTTP client, which offers the local client's views. ``job_json(job_view(b)) == b`` for
    every body :func:`job_json` makes; the fields the public JSON does not carry are not recovered."""
    view = {"id": body["job_id"], **{k: v for k, v in body.items() if k not in ("job_id", "timestamps")}}
    view.update({k: v for k, v in (body.get("timestamps") or {}).items() if v is not None})
    return view


def document_json(doc: Document) -> dict:
    """A document as ``GET /v1/documents/{id}`` shows it: its chunks counted, its text left out."""
    return {"id": doc.id, "title": doc.title, "status": doc.status, "metadata": doc.metadata,
            "chunks": len(doc.chunk_ids), "created_at": doc.created_at, "error": doc.error}


def accepted_json(job_id: str, kind: str, **counts) -> dict:
    """A submission's ``202`` body (``JobAccepted``): queued, with the job's ``location`` to poll."""
    return {"job_id": job_id, "status": "queued", "kind": kind, **counts, "location": f"/v1/jobs/{job_id}"}


def cancel_json(job_id: str, canceled: bool, view: dict, stage: str | None) -> dict:
    """``POST /v1/jobs/{id}/cancel``'s body; ``view`` is the job after the cancel, ``stage`` the one it was in."""
    return {"job_id": job_id, "canceled": canceled, "status": view["status"],
            "message": cancel_message(view, canceled, stage), "progress": view["progress"], "usage": view["usage"]}


def cancel_message(view: dict, canceled: bool, stage: str | None) -> str:
    """What the cancel stopped and what had been completed by then."""
    if not canceled:
        return f"job already ended ({view['status']}); nothing to cancel"
    p = view["progress"]
    if view.get("kind") == "query":
        done = f"query canceled during {stage or 'queued'}"
    else:
        done = (f"canceled during {stage or 'queued'}: {p['chunks_done']} of {p['chunks_total']} "
                f"chunks extracted ({p['chunks_failed']} failed) across {p['documents']} document(s)")
    return (f"{done}; {view['usage']['calls']} LLM calls made. Completed work is kept (re-submitting the same "
            "documents reuses it through the LLM cache); queued work is skipped and tasks in flight stop at "
            "their next LLM call.")


def usage_json(tenant: str, start: float | None, end: float | None, group_by: str | None, report: dict) -> dict:
    """``GET /v1/usage``'s body from ``ledger.usage_report``'s report over [start, end]."""
    return {"tenant": tenant, "from": start, "to": end, "group_by": group_by, "totals": report["totals"],
            "groups": report.get("groups")}
