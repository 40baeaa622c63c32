"""What a global query keeps in Redis between its map and its reduce: the plan, the result before the
reduce, each map group's answer and when it ran. The query's status, params and final result are job
fields (``shared.infra.jobs.JobStore``)."""

from __future__ import annotations

import json

from shared.domain.query.context_global import GlobalPlan
from shared.domain.query.result import QueryResult
from shared.infra.keys import Keys
from shared.infra.redis_conn import to_str


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
