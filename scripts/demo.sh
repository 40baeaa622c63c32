#!/usr/bin/env bash
# Install, then run the main job: start the embedded stack, ingest the bundled Christmas Carol,
# answer one query in each mode, print answers, budget reports and usage, and stop.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/graphfleet demo "$@"
