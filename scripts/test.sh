#!/usr/bin/env bash
# Run the whole test suite (unit + integration with real Redis, Celery workers and the LLM simulator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# system tools some tests drive (promtool, amtool, docker-compose, chromium, jq, curl: .ci/apt-packages);
# without root or sudo they are not installed and those tests skip (CI installs them: .ci/run)
bash scripts/ci_tools.sh || echo "note: could not install the tools in .ci/apt-packages; the tests needing them skip" >&2
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
