"""The Lua scripts of ``shared.infra.jobs.JobStore`` (each reads and writes keys of one job: one slot)."""

# Whether chunks are unfinished: O(1) while fewer are done than planned, one SDIFF at the end (was an SDIFF
# per finished chunk, O(n^2) per job: 80 % of the state Redis's time at 10k chunks, bench/capacity.py).
MISSING = """
if redis.call('SCARD', KEYS[2]) < redis.call('SCARD', KEYS[1]) then return 1 end
return #redis.call('SDIFF', KEYS[1], KEYS[2])
"""

# HSET while the job exists and has not ended: a cancel is never overwritten by a worker, whoever wins.
SET_IF_ACTIVE = """
local s = redis.call('HGET', KEYS[1], 'status')
if (not s) or s == 'succeeded' or s == 'failed' or s == 'canceled' then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


MARK_RUNNING = """
local s = redis.call('HGET', KEYS[1], 'status')
if (not s) or s == 'succeeded' or s == 'failed' or s == 'canceled' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'running', 'stage', ARGV[1], 'updated_at', ARGV[2])
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
return 1
"""
