"""Per-tenant snapshots of the query indexes in Redis, so a cold query worker loads an index instead of
rebuilding it from the tenant's rows.

One hash per tenant and kind (``Keys.index_snapshot``: "walk" the walk graph, "edges" the neighbour lists,
"chunks" and "entities" the BM25 indexes, "rowids-<kind>" a vector collection's row ids; the vectors themselves
are not snapshotted, see ``redis_vectors``), under the tenant's hash tag, so deleting a tenant's keys deletes its
snapshots. Fields: ``tag`` (the versions the index was built for), ``size`` and ``crc`` (CRC-32) of the whole
snapshot, ``parts`` and the parts ``0``, ``1``, ... (each at most ``PART_BYTES``, read one per reply: no single
Redis value or reply grows with the tenant). A new snapshot is written to a staging key of its own, which expires if
its writer dies, then renamed over the old one: a reader sees the old snapshot or the new one, never a mix, and one
snapshot per tenant and kind is kept. A snapshot whose tag is not the caller's, or that is missing, truncated or
altered, is never used: the index is built as before.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from collections.abc import Callable

from shared.infra.pretouched import buffer
from shared.infra.redis.bulk_read import read_value
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

log = logging.getLogger(__name__)
DEFAULT_SNAPSHOT_BYTES = 1024 * 2**20  # ``QuerySettings.index_snapshot_mb``'s default
PART_BYTES = 32 * 2**20  # one field of the snapshot hash at most
STAGING_TTL_S = 600  # a staging key whose writer died goes after this long


def version_tag(*versions) -> str:
    """The versions an index was built for, as stored beside it (a missing counter reads as "")."""
    return ",".join("" if v is None else v.decode() if isinstance(v, bytes) else str(v) for v in versions)


class IndexSnapshots:
    def __init__(self, redis, max_bytes: int):
        """``max_bytes``: a larger snapshot is not written (its index is built by every cold process, as before)."""
        self.redis = redis
        self.max_bytes = max_bytes

    def load(self, tenant: str, kind: str, tag: str) -> memoryview | None:
        """The snapshot of ``kind`` built for ``tag``; None when there is none for that tag. ``ValueError`` when it
        is damaged (truncated, altered, parts missing)."""
        key = Keys(tenant).index_snapshot(kind)
        stored, size, crc, parts = self.redis.hmget(key, ["tag", "size", "crc", "parts"])
        if stored is None or to_str(stored) != tag:
            return None
        try:
            size, crc, parts = int(size), int(crc), int(parts)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"index snapshot {kind} of tenant {tenant} has no valid size") from exc
        if parts < 0 or parts > 1 + size // PART_BYTES:
            raise ValueError(f"index snapshot {kind} of tenant {tenant} has {parts} parts for {size} bytes")
        if not 0 <= size <= self.max_bytes:  # never written so large: the buffer below is not sized by a bad field
            raise ValueError(f"index snapshot {kind} of tenant {tenant} claims {size} bytes")
        # one part per reply, each read into its place in one buffer (``bulk_read``)
        data, filled = memoryview(buffer(size)), 0
        for i in range(parts):
            part = read_value(self.redis, "HGET", key, str(i), into=data[filled:])
            filled += 0 if part is None else len(part)
        if filled != size or zlib.crc32(data) != crc:
            raise ValueError(f"index snapshot {kind} of tenant {tenant} is damaged (size or checksum)")
        return data

    def load_latest(self, tenant: str, kind: str) -> memoryview | None:
        """The snapshot of ``kind`` whatever versions it was built for (an earlier version's index, to update);
        None when there is none. ``ValueError`` when it is damaged."""
        tag = self.stored_tag(tenant, kind)
        return None if tag is None else self.load(tenant, kind, tag)

    def stored_tag(self, tenant: str, kind: str) -> str | None:
        raw = self.redis.hget(Keys(tenant).index_snapshot(kind), "tag")
        return None if raw is None else to_str(raw)

    def save(self, tenant: str, kind: str, tag: str, data: bytes) -> bool:
        """Replace the snapshot of ``kind`` with ``data`` built for ``tag``; False when over ``max_bytes``."""
        if len(data) > self.max_bytes:
            return False
        key = Keys(tenant).index_snapshot(kind)
        staging = f"{Keys(tenant).staging(key)}:{uuid.uuid4().hex[:12]}"  # one per writer: writers never mix
        parts = [data[i:i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
        self.redis.hset(staging, mapping={"size": len(data), "crc": zlib.crc32(data), "parts": len(parts)})
        self.redis.expire(staging, STAGING_TTL_S)
        for i, part in enumerate(parts):  # one command per part: no request grows with the tenant
            self.redis.hset(staging, str(i), part)
        self.redis.hset(staging, "tag", tag)  # last: a staging key without a tag is never read
        # not a pipeline: a cluster's pipelines refuse RENAME (both keys share the tenant's slot). Should this
        # process die between the two, the snapshot expires with the staging key's TTL and is built again.
        self.redis.rename(staging, key)
        self.redis.persist(key)
        return True

    def load_or_build(self, tenant: str, kind: str, tag: str, decode: Callable[[bytes], object],
                      encode: Callable[[object], bytes], build: Callable[[], object]) -> tuple[object, bool]:
        """(the index, whether it came from its snapshot): decoded from the snapshot stored for ``tag``, else
        built and its snapshot stored (write-through). A snapshot that cannot be read or written only costs the
        build: a query never fails on it."""
        damaged = False
        try:
            data = self.load(tenant, kind, tag)
            if data is not None:
                return decode(data), True
        except Exception:  # noqa: BLE001 - an unreadable snapshot is rebuilt, never an error to the user
            damaged = True
            log.warning("index snapshot %s of tenant %s unreadable: building it", kind, tenant, exc_info=True)
        index = build()
        try:  # unless another process stored this version's snapshot meanwhile
            if damaged or self.stored_tag(tenant, kind) != tag:
                self.save(tenant, kind, tag, encode(index))
        except Exception:  # noqa: BLE001 - the index is built; only the next cold process pays the build again
            log.warning("could not store the index snapshot %s of tenant %s", kind, tenant, exc_info=True)
        return index, False
