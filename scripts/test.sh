#!/usr/bin/env bash
# Run the whole test suite (unit + integration with real Redis, Celery workers and the LLM simulator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
