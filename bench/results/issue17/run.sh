#!/bin/bash
# Issue 17 (behaviour-preserving refactor): /work/base = 9c94c24 (before), /work/main = the refactor
# (a git worktree each, its own .venv); the two alternated round by round, nothing else running.
# Then: .venv/bin/python -m bench.before_after bench/results/issue17 > bench/results/issue17/comparison.txt
for round in 1 2; do
  for side in base main; do
    cd /work/$side
    .venv/bin/python -m bench.ingest_bench --latency 0 200 --repeat 5 --processes 2 --out /tmp/bench_cmp/${side}_${round}_ingest.jsonl > /tmp/bench_cmp/${side}_${round}_ingest.log 2>&1
    .venv/bin/python -m bench.query_bench --repeat 3 --out /tmp/bench_cmp/${side}_${round}_query.jsonl > /tmp/bench_cmp/${side}_${round}_query.log 2>&1
  done
done
echo done > /tmp/bench_cmp/done
