#!/usr/bin/env bash
# What the tests need beyond the build (deploy/deps.sh): the PostgreSQL server for the pg tests'
# clusters, the dashboard's browser test (Debian's
# chromium, Node.js and npm, playwright-core from npm in tests/integration/ui), promtool (Debian
# package prometheus) for the alert rules, systemd-analyze (systemd) for the units, logrotate. Installs
# what is missing with apt-get/npm when run as root, else prints the exact commands; never
# installs with CDNCA_NO_INSTALL=1. Returns 0 even when something is missing: the tests that
# need it then report themselves as skipped, and CI (.ci/run) fails on any skipped test.
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
ui="$top/tests/integration/ui"
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
[ -x /usr/sbin/logrotate ] || command -v logrotate >/dev/null 2>&1 || missing+=(logrotate)
# the PostgreSQL tests start their own cluster (tests/pg/pgctl.sh): initdb, pg_ctl, postgres
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
no_install="${CDNCA_NO_INSTALL:-0}"
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$no_install" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "cdnca tests: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      echo "cdnca tests: apt-get install ${missing[*]} failed; the tests that need them will be skipped" >&2
  else
    echo "cdnca tests: missing ${missing[*]}; tests that need them will be skipped. Install with:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
  fi
fi
if [ ! -d "$ui/node_modules/playwright-core" ]; then
  if [ "$no_install" != 1 ] && command -v npm >/dev/null 2>&1; then
    echo "cdnca tests: npm install in tests/integration/ui (playwright-core)" >&2
    (cd "$ui" && npm install --no-audit --no-fund --no-package-lock --loglevel=error) ||
      echo "cdnca tests: npm install failed; the browser test will be skipped" >&2
  else
    echo "cdnca tests: playwright-core missing; the browser test will be skipped. Install with:" >&2
    echo "  (cd tests/integration/ui && npm install --no-package-lock)" >&2
  fi
fi
exit 0
