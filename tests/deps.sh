#!/usr/bin/env bash
# What the tests need beyond the build (deploy/deps.sh --build). Installs the missing packages
# with apt-get when run as root (deploy/pkgs.sh: no service is started or enabled), else prints
# the commands; never installs with CDNCA_NO_INSTALL=1.
#   required (exit 1 when missing: the tests fail without them, they do not skip): python3,
#     python3-jsonschema (every answer is checked against controld/openapi.json), curl, jq (the
#     shell examples of README.md and docs/), openssl (the tests' TLS certificates), libcmocka-dev
#     (the unit tests), python3-aiosmtpd (the email channel's SMTP server, run by python3 or
#     /usr/bin/python3)
#   optional (the tests that need one report themselves as skipped, and CI (.ci/run) fails on any
#     skipped test): the PostgreSQL server binaries for the pg tests' own clusters, nginx (the
#     edge differential test's reference proxy), HAProxy (the cluster demo's test), Debian's
#     chromium, Node.js and npm with playwright-core from npm in tests/integration/ui (the
#     dashboard's browser test), promtool (package prometheus) for the alert rules,
#     systemd-analyze (systemd) for the units, logrotate, groff (the man pages render cleanly).
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
ui="$top/tests/integration/ui"
# shellcheck source=deploy/pkgs.sh
. "$top/deploy/pkgs.sh"
no_install="${CDNCA_NO_INSTALL:-0}"
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
# checked by what the tests run (a tool may come from elsewhere than Debian, Node.js for one)
required=()
have python3 || required+=(python3)
python3 -c 'import jsonschema' >/dev/null 2>&1 || required+=(python3-jsonschema)
have curl || required+=(curl)
have jq || required+=(jq)
have openssl || required+=(openssl)
pkg-config --exists cmocka 2>/dev/null || required+=(libcmocka-dev)
{ python3 -c 'import aiosmtpd' || /usr/bin/python3 -c 'import aiosmtpd'; } >/dev/null 2>&1 ||
  required+=(python3-aiosmtpd)
optional=()
# the PostgreSQL tests start their own cluster (tests/pg/pgctl.sh): initdb, pg_ctl, postgres
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || optional+=(postgresql)
have nginx || optional+=(nginx)
have haproxy || optional+=(haproxy)
have chromium || optional+=(chromium)
have node || optional+=(nodejs)
have npm || optional+=(npm)
have promtool || optional+=(prometheus)
have systemd-analyze || optional+=(systemd)
have logrotate || optional+=(logrotate)
have groff || optional+=(groff-base)
rc=0
[ "${#required[@]}" = 0 ] || pkgs_install "the tests' tools" "${required[@]}" || rc=1
if [ "${#optional[@]}" -gt 0 ]; then
  pkgs_install "the tools some tests need (without them they are skipped)" "${optional[@]}" ||
    echo "cdnca tests: the tests that need what is missing will be skipped" >&2
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
exit "$rc"
