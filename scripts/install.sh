#!/usr/bin/env bash
# Create .venv and install graphfleet with its test dependencies and the embedded Redis (`graphfleet up`),
# at the versions pinned in constraints.txt (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,embedded]" -c constraints.txt
