"""graphfleet's Python client: ``Client`` (sync) and ``AsyncClient`` (asyncio) over the gateway's HTTP API.

    from graphfleet import Client
    with Client("http://localhost:8080", api_key="gfk_...") as gf:
        job = gf.ingest_paths(["notes/"])
        gf.wait_job(job.job_id, progress=lambda j: print(j.status, j.progress.get("chunks_done")))
        print(gf.query("Who is Scrooge?", mode="local").answer)

See docs/client.md.
"""

from graphfleet.async_client import AsyncClient
from graphfleet.client import Client
from graphfleet.errors import (
    ApiError,
    AuthError,
    BadRequestError,
    ConflictError,
    GraphfleetError,
    NotFoundError,
    RateLimitedError,
    TransportError,
    UnavailableError,
)
from graphfleet.models import (
    ApiKey,
    CancelResult,
    Document,
    DocumentPage,
    Entity,
    Event,
    GraphStats,
    Job,
    JobAccepted,
    JobPage,
    KeyRevoked,
    QueryAccepted,
    QueryResult,
    Tenant,
    Usage,
)

__all__ = ["Client", "AsyncClient", "GraphfleetError", "ApiError", "BadRequestError", "AuthError", "NotFoundError",
           "ConflictError", "RateLimitedError", "UnavailableError", "TransportError", "ApiKey", "CancelResult",
           "Document", "DocumentPage", "Entity", "Event", "GraphStats", "Job", "JobAccepted", "JobPage", "KeyRevoked",
           "QueryAccepted", "QueryResult", "Tenant", "Usage"]
