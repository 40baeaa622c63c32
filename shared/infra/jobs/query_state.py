"""What a global query keeps in Redis between its map and its reduce: the plan, the result before the
reduce, each map group's answer and when it ran; and a query's stream events (``token``, ``map``), published
by the workers on the query's channel and read by the gateway (``QueryEvents``). The query's status, params
and final result are job fields (``shared.infra.jobs.store.JobStore``), the source of truth a stream re-reads."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from contextlib import AsyncExitStack

from shared.domain.query.context_global import GlobalPlan
from shared.domain.query.result import QueryResult
from shared.infra.messaging.channel_listener import LOST, ChannelListener
from shared.infra.messaging.consumers import CONSUMER_WINDOW_S
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys, consumers_key

log = logging.getLogger(__name__)
EVENT_LOG_TTL_S = 3600  # a query's event log outlives any stream of it
# append the event to the log and publish it with its position: a follower that read the log up to n skips the rest
_PUBLISH = """local n = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', ARGV[2], n .. ' ' .. ARGV[1])
return n"""
# the same for several events in order (ARGV[3..]); returns whether a stream follows the query
_PUBLISH_MANY = """for i = 3, #ARGV do
  local n = redis.call('RPUSH', KEYS[1], ARGV[i])
  redis.call('PUBLISH', ARGV[1], n .. ' ' .. ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return redis.call('EXISTS', KEYS[2])"""
# a map group's answer, the count of groups answered and its "map" progress event in one step, so the event log
# holds the counts in order whichever worker finishes first
_RECORD_MAP = """redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local done = redis.call('HLEN', KEYS[2])
local event = cjson.encode({event = 'map', data = {done = done, total = tonumber(ARGV[6])}})
local n = redis.call('RPUSH', KEYS[3], event)
redis.call('EXPIRE', KEYS[3], ARGV[5])
redis.call('PUBLISH', ARGV[4], n .. ' ' .. event)
return done"""
TOKEN_BATCH_S = 0.05  # unfollowed answer tokens are written at most this often (and when the answer ends)


class QueryStore:
    def __init__(self, redis, tenant: str):
        self.redis = redis
        self.k = Keys(tenant)

    def save_plan(self, query_id: str, plan: GlobalPlan, partial: QueryResult) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(self.k.query_plan(query_id), plan.model_dump_json())
        pipe.set(self.k.query_partial(query_id), partial.model_dump_json())
        pipe.execute()

    def plan(self, query_id: str) -> GlobalPlan:
        return GlobalPlan.model_validate_json(self.redis.get(self.k.query_plan(query_id)))

    def partial(self, query_id: str) -> QueryResult:
        return QueryResult.model_validate_json(self.redis.get(self.k.query_partial(query_id)))

    def record_map(self, query_id: str, group: int, text: str, began: float, ended: float, worker: str,
                   total: int) -> int:
        """Keep one map group's answer ("" when it failed) and when it ran, and publish the ``map`` progress event
        (``done`` of ``total``) in the same step; how many groups have answered."""
        return int(self.redis.eval(
            _RECORD_MAP, 3, self.k.query_map_times(query_id), self.k.query_map_results(query_id),
            self.k.query_event_log(query_id), str(group), json.dumps([began, ended, worker]), text,
            self.k.query_events(query_id), EVENT_LOG_TTL_S, total))

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

    def token_sink(self, query_id: str) -> TokenSink:
        """``on_token(text)`` publishing each answer token as a ``token`` event (see :class:`TokenSink`)."""
        return TokenSink(self, query_id)

    def publish_many(self, query_id: str, events: list[str]) -> bool:
        """Log and publish ``events`` (JSON, in order) in one round trip; whether a stream follows the query."""
        k = self.k
        return bool(self.redis.eval(_PUBLISH_MANY, 2, k.query_event_log(query_id), k.query_followed(query_id),
                                    k.query_events(query_id), EVENT_LOG_TTL_S, *events))


class TokenSink:
    """``on_token`` of an answer: every token becomes a ``token`` event, logged and published in order, as
    ``QueryStore.publish`` does. While no stream follows the query (``QueryEvents.subscribe`` marks it) the
    tokens are written in batches, at most every ``TOKEN_BATCH_S`` (one round trip instead of one per token);
    once one follows, each token goes out as it comes. ``flush()`` writes what is left: the caller flushes
    when the answer ends, before the query is finished, so a stream that starts later replays every token.
    Best effort, like ``publish``: a lost write never fails the query."""

    def __init__(self, queries: QueryStore, query_id: str, batch_s: float = TOKEN_BATCH_S):
        self.queries, self.query_id, self.batch_s = queries, query_id, batch_s
        self.pending: list[str] = []
        self.followed = False
        self.written_at: float | None = None  # None: nothing written yet (the first token goes at once)

    def __call__(self, text: str) -> None:
        self.pending.append(json.dumps({"event": "token", "data": {"text": text}}))
        now = time.monotonic()
        if self.followed or self.written_at is None or now - self.written_at >= self.batch_s:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if not self.pending:
            return
        events, self.pending = self.pending, []
        self.written_at = time.monotonic() if now is None else now
        try:
            self.followed = self.queries.publish_many(self.query_id, events)
        except Exception as exc:  # noqa: BLE001 - streaming is a courtesy, the answer is not
            log.warning("query %s: %d token events not published: %s", self.query_id, len(events), exc)


class QueryEvents:
    """The gateway's side (asyncio Redis): listen to a query's events and its end (the client's one shared
    subscription, ``channel_listener``), read its state."""

    def __init__(self, aredis, tenant: str, query_id: str):
        self.aredis, self.k, self.query_id = aredis, Keys(tenant), query_id
        self.events_channel = self.k.query_events(query_id)
        self.seen = 0  # events of the log already passed on
        self._exits = AsyncExitStack()
        self._box = None
        self._replayed: deque[tuple[str, dict]] = deque()  # read again from the log after a lost subscription

    async def subscribe(self) -> None:
        """Before the first read of the state: nothing published after it can be missed. Marks the query as
        followed, so the worker sends each answer token as it comes instead of in batches."""
        listener = ChannelListener.of(self.aredis)
        self._box = await self._exits.enter_async_context(
            listener.watch(self.events_channel, self.k.job_done_channel(self.query_id)))
        await self.aredis.set(self.k.query_followed(self.query_id), "1", ex=EVENT_LOG_TTL_S)

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
        """Whether a worker heartbeat for ``queue`` is recent (``shared.infra.messaging.consumers``)."""
        seconds, micros = await self.aredis.time()
        now = seconds + micros / 1e6
        return bool(await self.aredis.zcount(consumers_key(queue), now - CONSUMER_WINDOW_S, "+inf"))

    async def next(self, timeout: float) -> tuple[str, dict] | None:
        """The next message: (event, data) of a stream event, ("end", {}) once the query ended, ("seen", {}) for an
        event already read from the log, or None. After the subscription was lost and made again, the events
        logged meanwhile come from the log first."""
        if self._replayed:
            return self._replayed.popleft()
        message = await self._box.get(timeout)
        if message == LOST:
            await self._replay()
            return self._replayed.popleft() if self._replayed else None
        if message is None:
            return None
        channel, data = message
        if channel != self.events_channel:
            return "end", {}
        seq, _, payload = data.partition(" ")
        if int(seq) <= self.seen:  # already read from the log
            return "seen", {}
        self.seen = int(seq)
        return _event(payload)

    async def unread(self) -> list[tuple[str, dict]]:
        """The events of the log not passed on yet, in order; the channel's copies of them are skipped after."""
        await self._replay()
        rest = list(self._replayed)
        self._replayed.clear()
        return rest

    async def _replay(self) -> None:
        raw = await self.aredis.lrange(self.k.query_event_log(self.query_id), self.seen, -1)
        self.seen += len(raw)
        self._replayed.extend(_event(item) for item in raw)

    async def close(self) -> None:
        await self._exits.aclose()


def _event(raw) -> tuple[str, dict]:
    payload = json.loads(raw)
    return payload["event"], payload["data"]
