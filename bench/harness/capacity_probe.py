"""What the capacity bench reads off its two Redis servers: command counts and times (``INFO commandstats``),
the server's CPU (``INFO cpu``), memory (``INFO memory``) and ``MEMORY USAGE`` of every key by family."""

from __future__ import annotations

from collections import defaultdict

from shared.infra.redis.keys import tenant_prefix

PROBE_COMMANDS = {"info", "memory"}  # the bench's own reads: never counted as the workload's
# first segment of a tenant key -> the family it is charged to (keys.py names them)
FAMILIES = {
    "chunk": "chunks", "chunks": "chunks", "chunkdocs": "chunks", "extraction": "extractions",
    "doc": "documents", "docs": "documents", "doctext": "documents", "docfile": "documents",
    "entfrag": "entities", "entities": "entities", "degrees": "entities", "nodecomm": "entities",
    "relfrag": "relations", "relations": "relations", "edges": "relations", "degdelta": "entities",
    "vec": "vectors", "vecmeta": "vectors", "vecver": "vectors",
    "communities": "communities", "reports": "communities", "reportcache": "communities",
    "job": "jobs", "jobs": "jobs", "query": "queries", "llmcache": "llm_cache",
    "usage": "usage", "ledger": "usage", "idxsnap": "index_snapshots",
}


def snapshot(r) -> dict:
    calls, usec = {}, {}
    for name, stats in r.info("commandstats").items():
        cmd = name.removeprefix("cmdstat_").lower()
        if cmd.split("|")[0] not in PROBE_COMMANDS:
            calls[cmd], usec[cmd] = int(stats["calls"]), int(stats["usec"])
    cpu = r.info("cpu")
    return {"cmd": calls, "usec": usec, "cpu": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])}


def _by_count(d: dict) -> dict:
    return dict(sorted(d.items(), key=lambda kv: -kv[1]))


def delta(before: dict, after: dict) -> dict:
    """Ops, calls and microseconds per command, and the server's CPU seconds between two snapshots."""
    by = {k: v - before["cmd"].get(k, 0) for k, v in after["cmd"].items() if v - before["cmd"].get(k, 0) > 0}
    usec = {k: after["usec"][k] - before["usec"].get(k, 0) for k in by}
    return {"ops": sum(by.values()), "by_command": _by_count(by), "usec": sum(usec.values()),
            "usec_by_command": _by_count(usec), "redis_cpu_s": round(after["cpu"] - before["cpu"], 3)}


def minus(a: dict, b: dict, times: float = 1.0) -> dict:
    """``a`` less ``times`` x ``b`` (per command, floored at 0): a stage's ops without the bench's polling."""
    by = {k: max(0, round(v - times * b["by_command"].get(k, 0))) for k, v in a["by_command"].items()}
    usec = {k: max(0, round(v - times * b.get("usec_by_command", {}).get(k, 0)))
            for k, v in a.get("usec_by_command", {}).items()}
    return {"ops": sum(by.values()), "by_command": {k: v for k, v in by.items() if v}, "usec": sum(usec.values()),
            "usec_by_command": {k: v for k, v in usec.items() if v}, "redis_cpu_s": a["redis_cpu_s"]}


def memory(r) -> dict:
    info = r.info("memory")
    return {k: int(info[k]) for k in ("used_memory", "used_memory_dataset", "used_memory_overhead") if k in info}


def key_family(key: str, tenant: str) -> tuple[str, str]:
    """(family, sub-family) of a key: ``("vectors", "vec:entity")``, ``("chunks", "chunk")``, ``("global", ...)``."""
    prefix = tenant_prefix(tenant)
    if not key.startswith(prefix):
        return "global", key.split(":")[1] if ":" in key else key
    rest = key[len(prefix):].split(":")
    head = rest[0]
    sub = f"{head}:{rest[1]}" if head in ("vec", "vecmeta", "vecver") and len(rest) > 1 else head
    if head == "job" and len(rest) > 2:
        sub = f"job:{rest[2]}"
    return FAMILIES.get(head, "other"), sub


def memory_by_family(r, tenant: str, batch: int = 500) -> dict:
    """Exact ``MEMORY USAGE`` (``SAMPLES 0``) and count of every key, summed by family and sub-family."""
    families: dict[str, dict] = defaultdict(lambda: {"bytes": 0, "keys": 0})
    subs: dict[str, dict] = defaultdict(lambda: {"bytes": 0, "keys": 0})
    keys = [k.decode() if isinstance(k, bytes) else k for k in r.scan_iter(count=1000)]
    for i in range(0, len(keys), batch):
        part = keys[i:i + batch]
        pipe = r.pipeline(transaction=False)
        for k in part:
            pipe.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")
        for k, used in zip(part, pipe.execute(), strict=True):
            for acc, name in zip((families, subs), key_family(k, tenant), strict=True):
                acc[name]["bytes"] += int(used or 0)
                acc[name]["keys"] += 1
    return {"families": dict(families), "subfamilies": dict(sorted(subs.items(), key=lambda kv: -kv[1]["bytes"])),
            "keys": len(keys)}


def broker_messages(d: dict) -> dict:
    """Messages put on the broker (kombu's Redis transport LPUSHes each), pub/sub publishes, and all ops
    (BRPOP polls, unacked bookkeeping, heartbeats, lease renewals)."""
    by = d["by_command"]
    return {"messages": by.get("lpush", 0) + by.get("rpush", 0), "publishes": by.get("publish", 0)
            + by.get("spublish", 0), "ops": d["ops"], "redis_cpu_s": d["redis_cpu_s"]}
