#!/usr/bin/env bash
# deploy/cdnca.logrotate parses cleanly (`logrotate -d`, nothing rotated, paths moved into a
# temporary directory). Exit 77 (ctest SKIP) when logrotate is not installed.
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v logrotate >/dev/null 2>&1 && [ ! -x /usr/sbin/logrotate ]; then
  echo "SKIP: logrotate is not installed (apt-get install logrotate)"
  exit 77
fi
lr="$(command -v logrotate || echo /usr/sbin/logrotate)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cdnca" "$tmp/cdnca-node"
: >"$tmp/cdnca/controld.log"
sed "s#/var/log/#$tmp/#g" "$top/deploy/cdnca.logrotate" >"$tmp/conf"
grep -q "$tmp/cdnca/controld.log" "$tmp/conf" || { echo "FAIL: unexpected paths in cdnca.logrotate"; exit 1; }
if ! out="$("$lr" -d -s "$tmp/state" "$tmp/conf" 2>&1)"; then
  echo "FAIL: logrotate -d:"; echo "$out"; exit 1
fi
if echo "$out" | grep -qi '^error'; then
  echo "FAIL: logrotate -d reported errors:"; echo "$out"; exit 1
fi
echo "PASS: deploy/cdnca.logrotate parses"
