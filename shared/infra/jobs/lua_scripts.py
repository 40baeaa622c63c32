"""The Lua scripts of ``shared.infra.jobs.store.JobStore`` (each reads and writes keys of one job: one slot), and the
shape of an admission's answer."""

from typing import NamedTuple


class Admission(NamedTuple):
    """``JobStore.admit``'s answer (``ADMIT``): deliveries so far, whether the task may run, the job fields read."""

    count: int
    admitted: bool
    fields: dict[str, str | None]


# Whether chunks are unfinished: O(1) while fewer are done than planned, one SDIFF at the end (an SDIFF per
# finished chunk would be O(n^2) per job, most of the state Redis's time on a large job).
MISSING = """
if redis.call('SCARD', KEYS[2]) < redis.call('SCARD', KEYS[1]) then return 1 end
return #redis.call('SDIFF', KEYS[1], KEYS[2])
"""


MARK_RUNNING = """
local s = redis.call('HGET', KEYS[1], 'status')
if (not s) or s == 'succeeded' or s == 'failed' or s == 'canceled' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'running', 'stage', ARGV[1], 'updated_at', ARGV[2])
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
return 1
"""


# A job's end in one round trip (was six: a status read, a set-if-active script, the end-of-job PUBLISH, the
# metrics claim, two field reads): the final fields set unless the job already ended (a cancel is never
# overwritten by a worker, whoever wins), then, in the same step, the publish that wakes its waiters (a waiter
# that reads the status on waking finds it final) and, when ARGV[3] is '1', the once-per-job metrics claim
# (HSETNX on the flags hash), and the job leaves its tenant's concurrent-job quota set (``shared.infra.tenancy.quotas``:
# a slot frees when the job ends, not when the next submission reads every job's status). Returns {ended, claimed,
# kind, created_at} ({0} when the job had ended or does not exist). KEYS[1] the job hash, KEYS[2] its flags,
# KEYS[3] the tenant's quota set; ARGV[1] its done channel, ARGV[2] the final status, ARGV[3] claim metrics,
# ARGV[4] the job's member of the quota set, ARGV[5..] field, value pairs.
FINISH = """
local s = redis.call('HGET', KEYS[1], 'status')
if (not s) or s == 'succeeded' or s == 'failed' or s == 'canceled' then return {0} end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('PUBLISH', ARGV[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[4])
local claimed = 0
if ARGV[3] == '1' then claimed = redis.call('HSETNX', KEYS[2], 'metrics:finished', ARGV[2]) end
return {1, claimed, redis.call('HGET', KEYS[1], 'kind') or '', redis.call('HGET', KEYS[1], 'created_at') or ''}
"""


# A task's admission in one round trip (was two or three: the delivery count, a status read for the guard, the
# mark): count one more delivery of (task, item) in the job's deliveries hash (kept ARGV[2] seconds); past
# ARGV[3] deliveries the item is poison and nothing else happens. Else the guard ARGV[4]: 'canceled' refuses a
# canceled job, 'ended' an ended one, 'running' one not running, 'active' one that cannot be marked running
# (ended or missing); '' none. Then, with a stage ARGV[5] ('' none), the job is marked running at it (first
# start times kept) unless it ended or does not exist. Returns {deliveries, admitted}, and when admitted the job
# hash's fields named in ARGV[7..] after them (what the task's body reads first: a query's parameters), so the
# body does not read them in another round trip. KEYS[1] the deliveries hash, KEYS[2] the job hash, KEYS[3] its
# stage times; ARGV[1] the delivery's field, ARGV[6] the time.
ADMIT = """
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('EXPIRE', KEYS[1], ARGV[2])
if n > tonumber(ARGV[3]) then return {n, 0} end
local s = redis.call('HGET', KEYS[2], 'status')
local ended = s == 'succeeded' or s == 'failed' or s == 'canceled'
local guard = ARGV[4]
if (guard == 'canceled' and s == 'canceled') or (guard == 'ended' and ended)
   or (guard == 'running' and s ~= 'running') then return {n, 0} end
local marked = 0
if ARGV[5] ~= '' and s and not ended then
  redis.call('HSET', KEYS[2], 'status', 'running', 'stage', ARGV[5], 'updated_at', ARGV[6])
  redis.call('HSETNX', KEYS[2], 'started_at', ARGV[6])
  redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6])
  marked = 1
end
local admitted = 1
if guard == 'active' then admitted = marked end
if admitted == 1 and #ARGV >= 7 then return {n, 1, unpack(redis.call('HMGET', KEYS[2], unpack(ARGV, 7)))} end
return {n, admitted}
"""
