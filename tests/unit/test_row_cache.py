"""``row_cache.VersionRows``: rows read once per tenant and version, held within a bound over all tenants."""

from __future__ import annotations

from shared.infra.store import row_cache
from shared.infra.store.row_cache import VersionRows


def test_rows_are_read_once_per_version_and_tenant_and_stay_within_the_bound(monkeypatch):
    reads: list[tuple[str, list[str]]] = []

    def reader(tenant: str, version: int):
        def read(missing: list[str]) -> list[str | None]:
            reads.append((tenant, list(missing)))
            return [None if k == "absent" else f"{tenant}:{k}@{version}" for k in missing]
        return read

    cache: VersionRows[str] = VersionRows(capacity=4)
    redis = object()
    assert cache.rows("t1", 1, redis, ["a", "absent"], reader("t1", 1))["a"] == "t1:a@1"
    rows = cache.rows("t1", 1, redis, ["a", "b", "absent"], reader("t1", 1))
    assert (rows["b"], rows["absent"]) == ("t1:b@1", None)
    assert reads == [("t1", ["a", "absent"]), ("t1", ["b"])]  # an absent row is remembered too
    assert cache.rows("t2", 1, redis, ["a"], reader("t2", 1))["a"] == "t2:a@1"  # tenants apart
    assert cache.rows("t1", 2, redis, ["a"], reader("t1", 2))["a"] == "t1:a@2"  # a new version: read again
    assert cache.rows("t1", 2, object(), ["a"], reader("t1", 2))["a"] == "t1:a@2"  # another server: again
    assert len(reads) == 5

    monkeypatch.setattr(row_cache, "MAX_ROWS", 3)
    reads.clear()
    cache.rows("t3", 1, redis, ["x", "y", "z"], reader("t3", 1))
    cache.rows("t4", 1, redis, ["x"], reader("t4", 1))  # over the bound: every tenant starts afresh
    cache.rows("t3", 1, redis, ["x"], reader("t3", 1))
    assert reads == [("t3", ["x", "y", "z"]), ("t4", ["x"]), ("t3", ["x"])]


def test_a_tenant_s_new_version_releases_the_old_version_s_rows_from_the_bound(monkeypatch):
    monkeypatch.setattr(row_cache, "MAX_ROWS", 3)
    reads: list[int] = []

    def read(version: int):
        def rows(missing: list[str]) -> list[str]:
            reads.append(version)
            return [f"{k}@{version}" for k in missing]
        return rows

    cache: VersionRows[str] = VersionRows(capacity=4)
    redis = object()
    cache.rows("other", 1, redis, ["p"], read(0))
    for version in range(1, 6):  # two rows a version and the other tenant's one: only the current version counts
        cache.rows("t", version, redis, ["a", "b"], read(version))
        assert cache.rows("other", 1, redis, ["p"], read(0))["p"] == "p@0"  # never cleared
    assert reads == [0, 1, 2, 3, 4, 5]


def test_rows_filed_by_a_whole_read_are_served_at_their_version_only():
    reads: list[list[str]] = []

    def read(missing: list[str]) -> list[str | None]:
        reads.append(list(missing))
        return [f"{k}@read" for k in missing]

    cache: VersionRows[str] = VersionRows()
    redis = object()
    cache.fill("t1", 1, redis, {"a": "a@filled", "b": "b@filled"})
    assert cache.rows("t1", 1, redis, ["a", "b"], read) == {"a": "a@filled", "b": "b@filled"}
    assert reads == []  # filed rows are not read again
    assert cache.rows("t1", 1, redis, ["c"], read)["c"] == "c@read"  # a row not filed is read as before
    assert cache.rows("t2", 1, redis, ["a"], read)["a"] == "a@read"  # another tenant's is its own
    assert cache.rows("t1", 2, redis, ["a"], read)["a"] == "a@read"  # a newer version: the filed rows are gone
    cache.fill("t1", 1, redis, {"a": "a@stale"})  # filed under an older version: that version starts afresh
    assert cache.rows("t1", 2, redis, ["a"], read)["a"] == "a@read"
