"""A job's documents whose uploaded file is parsed (or failed to be): the parse half of ``JobStore``."""

from __future__ import annotations

from typing import Any

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys


class DocumentProgress:
    """A mixin of ``JobStore``: uses its ``redis`` and ``k``."""

    redis: Any
    k: Keys

    def doc_parsed(self, job_id: str, doc_id: str, error: str | None = None) -> None:
        """The document's text is extracted. With ``error`` it could not be: the document is recorded as failed
        with its cause and counts as chunked (it has nothing to chunk), so the rest of the job goes on."""
        pipe = self.redis.pipeline(transaction=True)
        if error is not None:
            pipe.hset(self.k.job_doc_failures(job_id), doc_id, error[:500])
            pipe.sadd(self.k.job_docs_done(job_id), doc_id)
        pipe.sadd(self.k.job_docs_parsed(job_id), doc_id)
        pipe.execute()

    def read_parse_sets(self, pipe, job_id: str) -> None:
        """Queue the reads of the documents to parse and of those parsed on ``pipe`` (``JobStore.snapshot``)."""
        pipe.smembers(self.k.job_docs_files(job_id))
        pipe.smembers(self.k.job_docs_parsed(job_id))

    def document_failures(self, job_id: str) -> dict[str, str]:
        """doc_id -> why its uploaded file could not be parsed."""
        return {to_str(k): to_str(v) for k, v in self.redis.hgetall(self.k.job_doc_failures(job_id)).items()}
