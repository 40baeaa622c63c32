"""A global query's map progress events: recorded with the answers they count, so their log is in order."""

import json
import threading

from shared.infra.jobs.query_state import QueryStore
from shared.infra.redis.keys import Keys


def test_map_progress_counts_up_in_the_log_whichever_group_finishes_first(redis_client):
    store, total = QueryStore(redis_client, "t-progress"), 12
    start = threading.Barrier(total)

    def answer(group: int) -> None:
        start.wait()
        store.record_map("q1", group, f"points of {group}", 1.0, 2.0, f"w{group}", total)

    threads = [threading.Thread(target=answer, args=(g,)) for g in range(total)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = [json.loads(x) for x in redis_client.lrange(Keys("t-progress").query_event_log("q1"), 0, -1)]
    assert [e["event"] for e in log] == ["map"] * total
    assert [e["data"] for e in log] == [{"done": i, "total": total} for i in range(1, total + 1)]
    assert store.map_answers("q1") == {g: f"points of {g}" for g in range(total)}
