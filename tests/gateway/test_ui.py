"""``/ui``: the graph explorer page and its assets are served by the gateway itself (no CDN, no external URL),
with the right content types; the read endpoints it needs (entity search, communities) answer per tenant."""

from __future__ import annotations

import re

from tests.gateway.explorer_graph import BELLE, DOC_ID, FILE_NAME, LONG_PART, seed_explorer_graph
from tests.gateway.helpers import finish, ingest, new_tenant

ASSETS = {"/ui/assets/app.js": "javascript", "/ui/assets/app.css": "text/css",
          "/ui/assets/cytoscape.min.js": "javascript"}


def test_ui_page_and_assets_are_served_locally(api):
    page = api.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]  # the key is never sent anywhere but this gateway
    assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
    assert api.get("/ui/").status_code == 200
    html = page.text
    refs = [r for r in re.findall(r'(?:src|href)="([^"]+)"', html) if r != "data:,"]  # data:, the empty favicon
    assert sorted(refs) == sorted(ASSETS), refs  # every asset the page loads, and only those
    for path, kind in ASSETS.items():
        r = api.get(path)
        assert r.status_code == 200, path
        assert kind in r.headers["content-type"], (path, r.headers["content-type"])
        assert len(r.content) > 1000 or path.endswith(".css"), path
    for own in ("/ui", "/ui/assets/app.js", "/ui/assets/app.css"):
        assert not re.search(r"https?://", api.get(own).text), f"{own} references an external URL"
    library = api.get("/ui/assets/cytoscape.min.js").text
    assert "cytoscape" in library and not re.search(r"""(?:src|href)\s*=\s*["']https?://""", library)
    assert api.get("/ui/assets/cytoscape.LICENSE").status_code == 200


def test_ui_is_not_part_of_the_api_schema(api):
    paths = api.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]
    assert {"/v1/graph/entities", "/v1/graph/communities", "/v1/graph/communities/{community_id}"} <= set(paths)


def _seed_graph(redis, tenant: str) -> None:
    from shared.domain.models import Community, CommunityReport, Entity, Finding
    from shared.infra.redis.keys import Keys
    from shared.infra.store.redis_graph import GraphStore  # a document deleted since: its id stands as its name

    k = Keys(tenant)
    for name, etype in (("SCROOGE", "person"), ("MRS. SCROOGE", "person"), ("MARLEY", "person"),
                        ("SCROOGE AND MARLEY", "organization")):
        redis.hset(k.entities(), name, Entity(name=name, type=etype, description=f"about {name}").model_dump_json())
    store = GraphStore(redis, tenant)
    store.set_degrees({"SCROOGE": 5, "MRS. SCROOGE": 1, "MARLEY": 2, "SCROOGE AND MARLEY": 3})
    communities = [Community(id="L0-0", level=0, nodes=["SCROOGE", "MARLEY"], children=["L1-0"]),
                   Community(id="L0-1", level=0, nodes=["MRS. SCROOGE"]),
                   Community(id="L1-0", level=1, nodes=["SCROOGE"], parent="L0-0")]
    store.replace_communities(communities, {0: 2, 1: 1}, 1)
    store.save_reports([CommunityReport(community_id="L0-0", level=0, title="Partners", summary="Scrooge and Marley",
                                        rating=8.0, findings=[Finding(summary="misers", explanation="both")])])


def test_entity_search_ranks_exact_then_prefix_then_degree(api, gw_redis, alice):
    _seed_graph(gw_redis, alice["id"])
    r = api.get("/v1/graph/entities", params={"q": "scrooge"}, headers=alice["headers"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == 3
    assert [i["name"] for i in body["items"]] == ["SCROOGE", "SCROOGE AND MARLEY", "MRS. SCROOGE"]
    assert body["items"][0] == {"name": "SCROOGE", "type": "person", "degree": 5}
    limited = api.get("/v1/graph/entities", params={"q": "e", "limit": 2}, headers=alice["headers"]).json()
    assert limited["total"] == 4 and [i["name"] for i in limited["items"]] == ["SCROOGE", "SCROOGE AND MARLEY"]
    bob = new_tenant(api, "bob")  # another tenant sees nothing of alice's graph
    assert api.get("/v1/graph/entities", params={"q": "scrooge"}, headers=bob["headers"]).json()["total"] == 0
    assert api.get("/v1/graph/entities", params={"q": ""}, headers=alice["headers"]).status_code == 422


def test_communities_by_level_with_their_reports(api, gw_redis, alice):
    _seed_graph(gw_redis, alice["id"])
    h = alice["headers"]
    level0 = api.get("/v1/graph/communities", params={"level": 0}, headers=h).json()
    assert level0["levels"] == {"0": 2, "1": 1} and level0["total"] == 2
    assert level0["items"][0] == {"id": "L0-0", "level": 0, "size": 2, "parent": None, "title": "Partners",
                                  "rating": 8.0}
    assert level0["items"][1]["title"] is None  # no report yet
    assert [c["id"] for c in api.get("/v1/graph/communities?level=1", headers=h).json()["items"]] == ["L1-0"]
    one = api.get("/v1/graph/communities/L0-0", headers=h).json()
    assert one["nodes"] == ["SCROOGE", "MARLEY"] and one["children"] == ["L1-0"]
    assert one["report"]["summary"] == "Scrooge and Marley"
    assert one["report"]["findings"] == [{"summary": "misers", "explanation": "both"}]
    assert api.get("/v1/graph/communities/L1-0", headers=h).json()["report"] is None
    missing = api.get("/v1/graph/communities/L9-9", headers=h)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    bob = new_tenant(api, "bob")
    assert api.get("/v1/graph/communities/L0-0", headers=bob["headers"]).status_code == 404


def test_jobs_list_newest_first_by_kind_status_and_tenant(api, gw_redis, alice):
    h = alice["headers"]
    first = ingest(api, alice, "Scrooge was a miser.").json()["job_id"]
    second = ingest(api, alice, "Marley was dead.").json()["job_id"]
    query = api.post("/v1/queries", json={"mode": "local", "query": "who is Scrooge?"}, headers=h).json()["query_id"]
    every = api.get("/v1/jobs", headers=h).json()
    assert (every["total"], every["offset"], every["limit"]) == (3, 0, 50)
    assert [j["job_id"] for j in every["items"]] == [query, second, first]
    assert every["items"][1]["kind"] == "ingest" and every["items"][1]["status"] == "queued"
    paged = api.get("/v1/jobs", params={"offset": 1, "limit": 1}, headers=h).json()
    assert [j["job_id"] for j in paged["items"]] == [second] and paged["total"] == 3
    ingests = api.get("/v1/jobs", params={"kind": ["ingest", "delete"]}, headers=h).json()
    assert [j["job_id"] for j in ingests["items"]] == [second, first] and ingests["total"] == 2
    assert [j["job_id"] for j in api.get("/v1/jobs?kind=ingest&limit=1", headers=h).json()["items"]] == [second]
    finish(gw_redis, alice["id"], first)
    done = api.get("/v1/jobs", params={"status": "succeeded"}, headers=h).json()
    assert [j["job_id"] for j in done["items"]] == [first] and done["total"] == 1
    assert api.get("/v1/jobs?kind=bogus", headers=h).status_code == 422
    bob = new_tenant(api, "bob")
    assert api.get("/v1/jobs", headers=bob["headers"]).json() == {"items": [], "total": 0, "offset": 0, "limit": 50}


def test_entity_has_its_description_parts_and_named_source_documents(api, gw_redis, alice):
    """Beside the ``<SEP>``-joined description (kept as it is), the distinct parts; beside the chunk ids, the
    documents by file name with the pages their passages quote; each neighbour's description split too."""
    seed_explorer_graph(gw_redis, alice["id"])
    body = api.get("/v1/graph/entities/fezziwig", headers=alice["headers"]).json()
    assert body["description"].count("<SEP>") == 2  # the stored field is a contract: unchanged
    parts = ["A jovial merchant.", "Scrooge's old master.", LONG_PART.strip()]  # "A jovial merchant." twice
    assert sorted(body["descriptions"]) == sorted(parts)  # each part once, in the stored order
    assert body["descriptions"] == [p.strip() for p in body["description"].split("<SEP>") if p.strip()]
    assert body["sources"] == {"chunks": ["chunk-ledger-1", "chunk-ledger-2"], "documents": [DOC_ID]}
    assert body["source_documents"] == [{"id": DOC_ID, "name": FILE_NAME, "pages": [2, 3, 4], "chunks": 2}]
    [neighbour] = body["neighbors"]
    assert neighbour["name"] == "DICK WILKINS" and "<SEP>" in neighbour["description"]
    assert sorted(neighbour["descriptions"]) == ["Dick is Fezziwig's apprentice.", "Fezziwig is kind to Dick."]
    from shared.infra.store.redis_graph import GraphStore  # a document deleted since: its id stands as its name
    GraphStore(gw_redis, alice["id"]).delete_document(DOC_ID)
    gone = api.get("/v1/graph/entities/BELLE", headers=alice["headers"]).json()
    assert gone["descriptions"] == [BELLE.strip()] and gone["neighbors"] == []
    assert gone["source_documents"] == [{"id": DOC_ID, "name": DOC_ID, "pages": [2], "chunks": 1}]
