#!/usr/bin/env bash
# Run the whole test suite (unit + integration with real Redis, Celery workers and the LLM simulator) in the single
# backend layout, then in the cluster layout the tests that a layout reaches (tests/conftest.py):
#   single            one Redis holds state and broker (what `graphfleet up` runs): every test
#   cluster-rabbitmq  state on a 3-master Redis Cluster (with replicas), RabbitMQ as the broker (docs/scaling.md):
#                     the tests marked `backend` (they use the session's state Redis or broker; marked from their
#                     fixtures), not those that touch neither or start every server they test (own_servers)
# GRAPHFLEET_TEST_LAYOUTS picks the layouts (default: both; e.g. GRAPHFLEET_TEST_LAYOUTS=single for a quick run).
# Each layout runs in GRAPHFLEET_TEST_WORKERS processes (pytest-xdist; default 2, the cores of the CI machine:
# most tests wait on servers they started, so two processes halve the wall time; 1 runs one plain pytest
# process), a test module per process at a time (--dist loadfile: a module's stack fixtures start once); then
# the tests marked `serial` (they disturb what the others share) alone.
# Arguments go to pytest (a path, -k, -x ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# system tools some tests drive (promtool, amtool, docker-compose, chromium, jq, curl: .ci/apt-packages);
# without root or sudo they are not installed and those tests skip (CI installs them: .ci/run)
bash scripts/ci_tools.sh || echo "note: could not install the tools in .ci/apt-packages; the tests needing them skip" >&2
.venv/bin/ruff check .
# the image-install tests' venvs, installed in the first layout and used again in the next (same declarations)
GRAPHFLEET_TEST_VENV_CACHE=$(mktemp -d)
export GRAPHFLEET_TEST_VENV_CACHE
trap 'rm -rf "$GRAPHFLEET_TEST_VENV_CACHE"' EXIT
# RabbitMQ (both layouts have tests on a vhost of it) started, or repaired, before the machine is busy
bash scripts/ci_services.sh || true
for layout in ${GRAPHFLEET_TEST_LAYOUTS:-single cluster-rabbitmq}; do
  case "$layout" in
    single) state=single broker=redis ;;
    cluster-rabbitmq)
      state=cluster broker=rabbitmq
      # RabbitMQ installed and running (root or password-less sudo); else the cluster layout with a Redis broker
      bash scripts/ci_services.sh || true
      if ! (exec 3<>/dev/tcp/127.0.0.1/5672) >/dev/null 2>&1; then
        echo "note: RabbitMQ is not available here: running the cluster layout with a Redis broker" >&2
        broker=redis
      fi ;;
    cluster-redis) state=cluster broker=redis ;;
    *) echo "unknown layout $layout (single, cluster-rabbitmq, cluster-redis)" >&2; exit 2 ;;
  esac
  echo "== test layout: state=$state broker=$broker"
  # every test in the single layout; in a cluster layout only the tests it reaches (--only-backend)
  only=(); [ "$layout" = single ] || only=(--only-backend)
  parallel=(); [ "${GRAPHFLEET_TEST_WORKERS:-2}" -gt 1 ] && parallel=(-n "${GRAPHFLEET_TEST_WORKERS:-2}" --dist loadfile)
  GRAPHFLEET_TEST_STATE=$state GRAPHFLEET_TEST_BROKER=$broker .venv/bin/python -m pytest -q -p no:cacheprovider \
    "${only[@]}" "${parallel[@]}" --serial=without "$@"
  # exit status 5: no serial test among those chosen (a layout or the arguments leave none)
  GRAPHFLEET_TEST_STATE=$state GRAPHFLEET_TEST_BROKER=$broker .venv/bin/python -m pytest -q -p no:cacheprovider \
    "${only[@]}" --serial=only "$@" || [ $? -eq 5 ]
done
