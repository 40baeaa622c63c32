"""What a global query keeps in Redis between its map and its reduce: the plan, the result before the
reduce, each map group's answer and when it ran; and a query's stream events (``token``, ``map``), published
by the workers on the query's channel and read by the gateway (``QueryEvents``). The query's status, params
and final result are job fields (``shared.infra.jobs.JobStore``), the source of truth a stream re-reads."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from shared.domain.query.context_global import GlobalPlan
from shared.domain.query.result import QueryResult
from shared.infra.broker import CONSUMER_WINDOW_S
from shared.infra.keys import Keys, consumers_key
from shared.infra.redis_conn import to_str

log = logging.getLogger(__name__)
EVENT_LOG_TTL_S = 3600  # a query's event log outlives any stream of it
# append the event to the log and publish it with its position: a follower that read the log up to n skips the rest
_PUBLISH = """local n = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', ARGV[2], n .. ' ' .. ARGV[1])
return n"""


class QueryStore:
    def __init__(self, redis, tenant: str):
        self.redis = redis
        self.k = Keys(tenant)

    def save_plan(self, query_id: str, plan: GlobalPlan, partial: QueryResult) -> None:
        pipe = self.redis.pipeline()
        pipe.set(self.k.query_plan(query_id), plan.model_dump_json())
        pipe.set(self.k.query_partial(query_id), partial.model_dump_json())
        pipe.execute()

    def plan(self, query_id: str) -> GlobalPlan:
        return GlobalPlan.model_validate_json(self.redis.get(self.k.query_plan(query_id)))

    def partial(self, query_id: str) -> QueryResult:
        return QueryResult.model_validate_json(self.redis.get(self.k.query_partial(query_id)))

    def record_map(self, query_id: str, group: int, text: str, began: float, ended: float, worker: str) -> int:
        """Keep one map group's answer ("" when it failed) and when it ran; how many groups have answered."""
        pipe = self.redis.pipeline()
        pipe.hset(self.k.query_map_times(query_id), str(group), json.dumps([began, ended, worker]))
        pipe.hset(self.k.query_map_results(query_id), str(group), text)
        pipe.hlen(self.k.query_map_results(query_id))
        return int(pipe.execute()[-1])

    def map_answers(self, query_id: str) -> dict[int, str | None]:
        """Group index -> its answer (None when the group failed)."""
        raw = self.redis.hgetall(self.k.query_map_results(query_id))
        return {int(k): to_str(v) or None for k, v in raw.items()}

    def publish(self, query_id: str, event: str, data: dict) -> None:
        """One stream event for whoever follows the query; best effort: a lost event never fails the query
        (the stored status and result stay the source of truth)."""
        try:
            self.redis.eval(_PUBLISH, 1, self.k.query_event_log(query_id),
                            json.dumps({"event": event, "data": data}), self.k.query_events(query_id),
                            EVENT_LOG_TTL_S)
        except Exception as exc:  # noqa: BLE001 - streaming is a courtesy, the answer is not
            log.warning("query %s: event %s not published: %s", query_id, event, exc)

    def token_sink(self, query_id: str) -> Callable[[str], None]:
        """``on_token(text)`` publishing each answer token as a ``token`` event."""
        return lambda text: self.publish(query_id, "token", {"text": text})


class QueryEvents:
    """The gateway's side (asyncio Redis): subscribe to a query's events and its end, read its state."""

    def __init__(self, aredis, tenant: str, query_id: str):
        self.aredis, self.k, self.query_id = aredis, Keys(tenant), query_id
        self.pubsub = aredis.pubsub(ignore_subscribe_messages=True)
        self.events_channel = self.k.query_events(query_id)
        self.seen = 0  # events of the log already passed on

    async def subscribe(self) -> None:
        """Before the first read of the state: nothing published after it can be missed."""
        await self.pubsub.subscribe(self.events_channel, self.k.job_done_channel(self.query_id))

    async def state(self) -> tuple[str | None, str | None]:
        """(status, stage) of the query's job hash."""
        status, stage = await self.aredis.hmget(self.k.job(self.query_id), "status", "stage")
        return to_str(status) if status else None, to_str(stage) if stage else None

    async def logged(self) -> list[tuple[str, dict]]:
        """Every event published so far, in order (the log behind the channel)."""
        raw = await self.aredis.lrange(self.k.query_event_log(self.query_id), 0, -1)
        self.seen = len(raw)
        return [_event(item) for item in raw]

    async def consumed(self, queue: str) -> bool:
        """Whether a worker heartbeat for ``queue`` is recent (``shared.infra.broker``)."""
        seconds, micros = await self.aredis.time()
        now = seconds + micros / 1e6
        return bool(await self.aredis.zcount(consumers_key(queue), now - CONSUMER_WINDOW_S, "+inf"))

    async def next(self, timeout: float) -> tuple[str, dict] | None:
        """The next message: (event, data) of a stream event, ("end", {}) once the query ended, ("seen", {}) for an
        event already read from the log, or None."""
        message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
        if message is None or message.get("type") != "message":
            return None
        if to_str(message["channel"]) != self.events_channel:
            return "end", {}
        seq, _, payload = to_str(message["data"]).partition(" ")
        if int(seq) <= self.seen:  # already read from the log
            return "seen", {}
        self.seen = int(seq)
        return _event(payload)

    async def close(self) -> None:
        await self.pubsub.aclose()


def _event(raw) -> tuple[str, dict]:
    payload = json.loads(raw)
    return payload["event"], payload["data"]
