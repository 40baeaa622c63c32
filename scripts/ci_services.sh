#!/usr/bin/env bash
# Make sure the broker services the test suite drives are installed and running on this machine: RabbitMQ
# (apt package rabbitmq-server) listening on localhost:5672, for tests/brokers.py (rabbit_vhost) and the
# GRAPHFLEET_TEST_BROKER=rabbitmq layout. Redis Sentinel needs nothing more than redis-server
# (scripts/ci_tools.sh). Idempotent and quiet: does nothing when RabbitMQ already answers.
# Needs root (or password-less sudo); otherwise says so and exits 0, and the RabbitMQ tests report the cause.
set -uo pipefail

listening() { (exec 3<>/dev/tcp/127.0.0.1/5672) >/dev/null 2>&1; }

if listening; then
  exit 0
fi
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
fi
# a service manager when there is one (systemd, sysvinit's `service`), else the server detached
# (bounded: an init script can wait forever, e.g. for a pid file the running node never wrote)
timeout 120 $SUDO service rabbitmq-server start >/dev/null 2>&1 || timeout 60 $SUDO rabbitmq-server -detached >/dev/null 2>&1
timeout 130 $SUDO rabbitmqctl -q await_startup --timeout 120 >/dev/null 2>&1 || true
for _ in $(seq 1 120); do
  if listening; then
    echo "ci_services: RabbitMQ running on localhost:5672"
    exit 0
  fi
  sleep 1
done
echo "ci_services: RabbitMQ did not start; see /var/log/rabbitmq/" >&2
exit 1
