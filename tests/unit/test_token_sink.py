"""Answer tokens of a query nobody follows are written in batches; once a stream follows (its subscribe marks the
query), each token goes out as it comes; either way the event log holds every token, in order, once flushed."""

from __future__ import annotations

import asyncio
import json

from shared.infra.jobs.query_state import QueryEvents, QueryStore, TokenSink
from shared.infra.redis.conn import aconnect


def _logged(redis_client, store: QueryStore, query_id: str) -> list[str]:
    return [json.loads(x)["data"]["text"] for x in redis_client.lrange(store.k.query_event_log(query_id), 0, -1)]


def test_unfollowed_tokens_are_batched_and_all_logged_in_order_by_flush(redis_client, tenant):
    store = QueryStore(redis_client, tenant)
    sink = TokenSink(store, "q1", batch_s=3600)  # no time-based write during the test
    for piece in ["Bob", " is", " a", " clerk", "."]:
        sink(piece)
    assert _logged(redis_client, store, "q1") == ["Bob"]  # the first token goes at once, the rest wait
    sink.flush()
    assert _logged(redis_client, store, "q1") == ["Bob", " is", " a", " clerk", "."]
    assert not sink.followed


def test_a_followed_query_gets_each_token_as_it_comes(redis_server, redis_client, tenant):
    store = QueryStore(redis_client, tenant)

    async def follow() -> list:
        client = aconnect(redis_server.url)
        feed = QueryEvents(client, tenant, "q2")
        try:
            await feed.subscribe()  # marks the query as followed
            sink = TokenSink(store, "q2", batch_s=3600)
            sink("Bob")  # the first write learns that a stream follows
            sink(" is")
            sink(" here")
            seen = []
            while len(seen) < 3:
                message = await feed.next(5)
                if message is not None:
                    seen.append(message)
            return seen
        finally:
            await feed.close()
            await client.aclose()

    seen = asyncio.run(follow())
    assert [data["text"] for event, data in seen] == ["Bob", " is", " here"]  # no flush needed
    assert _logged(redis_client, store, "q2") == ["Bob", " is", " here"]
