"""``graphfleet backup`` / ``graphfleet restore``: every graphfleet key of a Redis, copied with DUMP/RESTORE.

Why DUMP/RESTORE and not a copy of the RDB/AOF files: it works the same against the embedded Redis and a remote
one (a container, a managed service) with nothing but a client connection, no access to the server's disk; it
copies only graphfleet's state (``gf:*``), not the broker's queues; and a restore can go into a running Redis.
A DUMP payload is Redis's own serialization of one key (any type, with a checksum), so nothing is re-encoded.

The file is a gzip stream: a magic line, a JSON header line, then one record per key (``K``, key length, key,
PTTL in ms or -1, payload length, payload; big-endian), then ``E`` and the number of records, so a truncated
file is refused. Keys are read with SCAN, so the copy is per key, not a point-in-time snapshot: take it while
no job runs (the backup warns when jobs are active). Locks, rate-limit windows and consumer heartbeats are
skipped (``shared.infra.redis.keys.is_transient_key``). RESTORE refuses payloads of a newer Redis than the target's:
restore into the same or a newer Redis version.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from shared.infra.redis.keys import BACKUP_PATTERN, active_jobs_key, is_transient_key, legacy_to_tagged, tenant_of_key

MAGIC = b"GRAPHFLEET-BACKUP\n"
VERSION = 1
BATCH = 200
_KEY = struct.Struct(">I")
_TTL = struct.Struct(">q")
_COUNT = struct.Struct(">Q")


class BackupError(Exception):
    """The file is not a graphfleet backup, of an unknown version, or truncated."""


def legacy_key(key: bytes) -> bytes:
    tagged = legacy_to_tagged(key.decode(errors="surrogateescape"))
    return tagged.encode(errors="surrogateescape") if tagged else key


def _scan_batches(redis) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for key in redis.scan_iter(match=BACKUP_PATTERN, count=1000):
        if not is_transient_key(key.decode(errors="replace")):
            batch.append(key)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def backup(redis, out: Path | str, source: str = "") -> dict:
    """Write every graphfleet key of ``redis`` to ``out`` (atomically: a temporary file renamed at the end;
    ``-``: standard output)."""
    header = {"version": VERSION, "created_at": time.time(), "source": source, "pattern": BACKUP_PATTERN,
              "redis_version": redis.info("server").get("redis_version"),
              "active_jobs": redis.zcard(active_jobs_key())}
    if str(out) == "-":
        with gzip.GzipFile(fileobj=sys.stdout.buffer, mode="wb") as f:
            count, size = _write(redis, f, header)
        sys.stdout.buffer.flush()
        return {**header, "keys": count, "payload_bytes": size, "file": "-"}
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(tmp, "wb") as f:
        count, size = _write(redis, f, header)
    os.replace(tmp, out)
    return {**header, "keys": count, "payload_bytes": size, "file": str(out)}


def _write(redis, f, header: dict) -> tuple[int, int]:
    count, size = 0, 0
    f.write(MAGIC + json.dumps(header).encode() + b"\n")
    for keys in _scan_batches(redis):
        pipe = redis.pipeline(transaction=False)
        for key in keys:
            pipe.dump(key)
            pipe.pttl(key)
        replies = pipe.execute()
        for key, payload, ttl in zip(keys, replies[::2], replies[1::2], strict=True):
            if payload is None:  # deleted since SCAN saw it
                continue
            f.write(b"K" + _KEY.pack(len(key)) + key + _TTL.pack(ttl if ttl > 0 else -1)
                    + _KEY.pack(len(payload)) + payload)
            count, size = count + 1, size + len(payload)
    f.write(b"E" + _COUNT.pack(count))
    return count, size


def _read_exact(f, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise BackupError("truncated backup file")
    return data


def read_header(f) -> dict:
    if f.read(len(MAGIC)) != MAGIC:
        raise BackupError("not a graphfleet backup file")
    header = json.loads(f.readline())
    if header.get("version") != VERSION:
        raise BackupError(f"backup format version {header.get('version')} is not supported (this is {VERSION})")
    return header


def read_records(f) -> Iterator[tuple[bytes, int, bytes]]:
    """(key, pttl or -1, payload) of each record; checks the end marker's count."""
    count = 0
    while True:
        tag = _read_exact(f, 1)
        if tag == b"E":
            expected = _COUNT.unpack(_read_exact(f, _COUNT.size))[0]
            if expected != count:
                raise BackupError(f"backup file has {count} records, its end marker says {expected}")
            return
        if tag != b"K":
            raise BackupError("corrupt backup file")
        key = _read_exact(f, _KEY.unpack(_read_exact(f, _KEY.size))[0])
        ttl = _TTL.unpack(_read_exact(f, _TTL.size))[0]
        payload = _read_exact(f, _KEY.unpack(_read_exact(f, _KEY.size))[0])
        count += 1
        yield key, ttl, payload


def wipe(redis) -> int:
    """Delete every graphfleet key (``gf:*``); how many."""
    deleted = 0
    batch: list[bytes] = []
    for key in redis.scan_iter(match=BACKUP_PATTERN, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += redis.unlink(*batch)
            batch = []
    if batch:
        deleted += redis.unlink(*batch)
    return deleted


def restore(redis, path: Path | str, wipe_first: bool = False) -> dict:
    """RESTORE (REPLACE) every key of the backup at ``path`` (``-``: standard input, spooled to a temporary
    file). The whole file is checked (format, end marker) before anything is written; ``wipe_first`` deletes
    the graphfleet keys not in the backup too."""
    if str(path) == "-":
        with tempfile.NamedTemporaryFile(prefix="graphfleet-restore-") as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            return {**_restore(redis, Path(spool.name), wipe_first), "file": "-"}
    return _restore(redis, Path(path), wipe_first)


def _restore(redis, path: Path, wipe_first: bool) -> dict:
    with gzip.open(path, "rb") as f:
        header = read_header(f)
        for _record in read_records(f):
            pass
    wiped = wipe(redis) if wipe_first else 0
    tenants: set[str] = set()
    count = 0
    with gzip.open(path, "rb") as f:
        read_header(f)
        pipe = redis.pipeline(transaction=False)
        for raw_key, ttl, payload in read_records(f):
            key = legacy_key(raw_key)  # a backup of a Redis before the tenant hash tag: restored tagged
            pipe.restore(key, max(ttl, 0), payload, replace=True)
            tenant = tenant_of_key(key.decode(errors="replace"))
            if tenant:
                tenants.add(tenant)
            count += 1
            if count % BATCH == 0:
                pipe.execute()
        pipe.execute()
    from shared.infra.store.warmup import announce_index_update

    for tenant in sorted(tenants):  # query workers drop and rebuild their caches of these tenants
        announce_index_update(redis, tenant)
    return {"file": str(path), "keys": count, "tenants": sorted(tenants), "wiped": wiped,
            "backup_created_at": header.get("created_at"), "backup_redis_version": header.get("redis_version")}
