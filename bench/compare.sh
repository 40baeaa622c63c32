#!/usr/bin/env bash
# The side-by-side benchmark in one command: installs the project (if needed) and nano-graphrag +
# LightRAG into their own venv (.bench/peers-venv), then runs graphfleet, nano-graphrag and LightRAG
# on the Christmas Carol against the project's LLM simulator at 0 and 200 ms, the retrieval-quality
# evaluation (graphfleet and its baselines on the public dev sets, 4,000-token budget), graphfleet's
# scaling bench (1/2/4 processes, the Carol and a 20x corpus), hierarchical
# Leiden vs graspologic (10k/100k/500k-edge power-law graphs), issue 21's cost and latency table
# (bench.suites.cost_table: every row in one run), and renders bench/results/*.jsonl into docs/benchmarks.md.
#   bash bench/compare.sh                 # everything (about two hours on 2 cores)
#   REPEAT=1 bash bench/compare.sh        # one run per figure instead of 3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/python ] || bash scripts/install.sh
PEERS_PY="$(bash bench/harness/peers/setup.sh | tail -n 1)"
REPEAT="${REPEAT:-3}"
R=bench/results
.venv/bin/python -m bench.suites.compare --repeat "$REPEAT" --peers-python "$PEERS_PY" --out $R/compare.jsonl
# graphfleet and the baselines on every public dev set, with the simulator and without an LLM
.venv/bin/python -m bench.suites.retrieval --llm both --out $R/retrieval.jsonl
.venv/bin/python -m bench.suites.walk --out $R/walk.jsonl
.venv/bin/python -m bench.suites.scaling --repeat "$REPEAT" --out $R/scaling.jsonl
.venv/bin/python -m bench.suites.clustering --repeat "$REPEAT" --graspologic-python "$PEERS_PY" --out $R/clustering.jsonl
# issue 21's table in one run: ingestion at 0 / 200 ms and 12.5 ms per completion token (1 and 2 processes),
# answers, the gateway's p50 / p95 and first query, global tokens and coverage, the context build
.venv/bin/python -m bench.suites.cost_table --repeat "$REPEAT" --peers-python "$PEERS_PY" --out-dir $R
.venv/bin/python -m bench.report
