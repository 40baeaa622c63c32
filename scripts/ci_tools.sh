#!/usr/bin/env bash
# Install the system tools the test suite drives (Debian packages), only those missing; needs root or sudo.
# The list is .ci/apt-packages: one "command package" pair per line.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
while read -r cmd pkg; do
  [ -z "${cmd:-}" ] || [ "${cmd:0:1}" = "#" ] && continue
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done < .ci/apt-packages
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo -n"  # never prompt: fail, and the caller says which tests skip
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"
