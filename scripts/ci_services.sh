#!/usr/bin/env bash
# Make sure the broker services the test suite drives are installed and running on this machine: RabbitMQ
# (apt package rabbitmq-server) listening on localhost:5672, for tests/brokers.py (rabbit_vhost, which runs this
# script when the port is closed) and the GRAPHFLEET_TEST_BROKER=rabbitmq layout. Redis Sentinel needs nothing
# more than redis-server (scripts/ci_tools.sh). Idempotent: does nothing when RabbitMQ already answers.
# A node that runs with its application stopped (the port closed; `await_startup` then waits forever) gets the
# application started; a node that still does not answer is stopped (killed if it must be) and started afresh.
# Needs root (or password-less sudo); otherwise says so and exits 0, and the RabbitMQ tests report the cause.
set -uo pipefail

listening() { (exec 3<>/dev/tcp/127.0.0.1/5672) >/dev/null 2>&1; }
wait_listening() {  # seconds
  for _ in $(seq 1 "$1"); do listening && return 0; sleep 1; done
  return 1
}
up() { echo "ci_services: RabbitMQ running on localhost:5672 ($1)"; exit 0; }

listening && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "ci_services: not root and no password-less sudo: RabbitMQ not installed/started (its tests will fail" \
         "to reach localhost:5672)" >&2
    exit 0
  fi
fi
if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null \
    || { echo "ci_services: apt-get install rabbitmq-server failed" >&2; exit 1; }
  wait_listening 60 && up "installed"
fi
ctl() { timeout "$1" $SUDO rabbitmqctl -q "${@:2}" >/dev/null 2>&1; }

if ctl 30 ping; then
  # the node runs but does not listen: its application is stopped or still booting
  ctl 120 start_app
  wait_listening 60 && up "application started"
  echo "ci_services: the running node did not start its application; restarting it" >&2
fi
# no node (or a stuck one): stop what is left of it, then start it (bounded: the init script waits for a pid file
# the node may never write, and can wait forever)
if ctl 10 ping; then ctl 60 stop || true; fi
$SUDO pkill -KILL -u rabbitmq -f beam.smp 2>/dev/null || true
timeout 120 $SUDO service rabbitmq-server start >/dev/null 2>&1 || timeout 60 $SUDO rabbitmq-server -detached >/dev/null 2>&1
ctl 130 await_startup --timeout 120 || true
wait_listening 120 && up "started"
echo "ci_services: RabbitMQ did not start; last lines of its log:" >&2
tail -n 20 /var/log/rabbitmq/*.log >&2 2>/dev/null || true
exit 1
