#!/bin/bash
# Debian's chromium for the browser tests (memlab.testing.browser): installed with apt when missing.
# As root with apt-get only; otherwise it says so and the browser tests skip (fail under CI=true).
set -euo pipefail
bin=${MEMLAB_CHROMIUM:-/usr/bin/chromium}
[ -x "$bin" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "ensure-chromium: installing Debian chromium for the browser tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends chromium >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
else
  echo "ensure-chromium: no $bin, and this shell cannot install it (needs root and apt-get); the browser tests will skip" >&2
fi
