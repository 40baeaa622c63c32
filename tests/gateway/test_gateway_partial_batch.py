"""A batch with invalid documents at the gateway: the valid ones are ingested and the job names each refused one
and why (its file name, else its ``id`` or ``title``, else its index); ``atomic`` refuses the whole batch naming
the file; a batch with no valid document is refused, each reason given, and nothing is enqueued."""

from __future__ import annotations

from shared.infra.store.redis_graph import GraphStore
from tests.gateway.helpers import assert_error, enqueued, job_count, queue_lengths

GOOD = [f"Fezziwig's apprentice number {i} danced at the warehouse ball." for i in range(6)]


def _files(*named: tuple[str, bytes]) -> list:
    return [("files", (n, d, "text/plain")) for n, d in named]


def _good_files() -> list[tuple[str, bytes]]:
    return [(f"good-{i}.txt", text.encode()) for i, text in enumerate(GOOD)]


def _titles(redis, tenant: str) -> list[str]:
    store = GraphStore(redis, tenant)
    return sorted(d.title for d in store.documents(store.list_document_ids()).values())


def test_an_upload_of_six_good_files_and_an_empty_one_ingests_the_six_and_names_the_empty(api, alice, gw_redis):
    r = api.post("/v1/documents", files=_files(*_good_files(), ("empty.txt", b"")), headers=alice["headers"])
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["documents"] == 6 and queue_lengths(gw_redis)["chunker"] == 6
    assert [(x["name"], x["code"], x["cause"]) for x in body["refused"]] == [
        ("empty.txt", "empty_document", "empty.txt: text is empty")]
    job = api.get(body["location"], headers=alice["headers"]).json()
    assert job["progress"]["documents"] == 6
    assert [(f["name"], f["stage"], f["cause"]) for f in job["failures"]] == [
        ("empty.txt", "validate", "empty.txt: text is empty")]
    assert _titles(gw_redis, "alice") == sorted(name for name, _ in _good_files())


def test_a_json_batch_names_a_refused_document_by_id_or_title_or_index(api, alice, gw_redis):
    docs = [{"text": t} for t in GOOD] + [{"text": "", "id": "blank-1"}, {"text": " \n", "title": "Notes"},
                                          {"text": "\t"}]
    r = api.post("/v1/documents", json={"documents": docs}, headers=alice["headers"])
    assert r.status_code == 202, r.text
    refused = r.json()["refused"]
    assert [(x["name"], x["index"], x["doc_id"]) for x in refused] == [
        ("blank-1", 6, "blank-1"), ("Notes", 7, None), ("document 8", 8, None)]
    assert all(x["code"] == "empty_document" for x in refused)
    failures = api.get(r.json()["location"], headers=alice["headers"]).json()["failures"]
    assert [f["cause"] for f in failures] == ["blank-1: text is empty", "Notes: text is empty",
                                              "document 8: text is empty"]
    assert GraphStore(gw_redis, "alice").document_count() == 6


def test_atomic_refuses_the_whole_batch_and_the_422_names_the_file(api, alice, gw_redis):
    r = api.post("/v1/documents", files=_files(*_good_files(), ("empty.txt", b"")), data={"atomic": "true"},
                 headers=alice["headers"])
    body = assert_error(r, 422, "empty_document")
    assert body["error"]["message"] == "empty.txt: text is empty"
    assert [x["name"] for x in body["error"]["refused"]] == ["empty.txt"]
    docs = [{"text": t} for t in GOOD] + [{"text": "", "title": "empty.txt"}]
    r = api.post("/v1/documents", json={"documents": docs, "atomic": True}, headers=alice["headers"])
    assert assert_error(r, 422, "empty_document")["error"]["message"] == "empty.txt: text is empty"
    assert enqueued(gw_redis) == 0 and job_count(gw_redis, "alice") == 0
    assert GraphStore(gw_redis, "alice").document_count() == 0


def test_a_batch_of_only_invalid_documents_is_422_with_each_reason_and_nothing_enqueued(api, alice, gw_redis):
    r = api.post("/v1/documents", files=_files(("empty.txt", b""), ("latin1.txt", b"caf\xe9 au lait")),
                 headers=alice["headers"])
    body = assert_error(r, 422, "empty_document")
    assert body["error"]["message"] == ("empty.txt: text is empty; latin1.txt: not valid UTF-8 (invalid "
                                        "continuation byte at byte 3)")
    assert [(x["name"], x["code"]) for x in body["error"]["refused"]] == [
        ("empty.txt", "empty_document"), ("latin1.txt", "invalid_encoding")]
    assert enqueued(gw_redis) == 0 and job_count(gw_redis, "alice") == 0
