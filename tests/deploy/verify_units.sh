#!/usr/bin/env bash
# The systemd units in deploy/ pass `systemd-analyze verify` (with the binaries of this build
# standing in for /usr/local/bin). Exit 77 (ctest SKIP) when systemd-analyze is not installed.
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
build="${CDNCA_BUILD:?CDNCA_BUILD must name the build directory}"
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for unit in controld noded; do
  grep -q '^Type=notify$' "$top/deploy/$unit.service" || { echo "FAIL: $unit.service is not Type=notify"; exit 1; }
  grep -q '^WatchdogSec=' "$top/deploy/$unit.service" || { echo "FAIL: $unit.service has no WatchdogSec"; exit 1; }
  grep -q '^ExecReload=' "$top/deploy/$unit.service" || { echo "FAIL: $unit.service has no ExecReload"; exit 1; }
  sed "s#/usr/local/bin/$unit#$build/$unit/$unit#g" "$top/deploy/$unit.service" >"$tmp/$unit.service"
done
cp "$top/deploy/controld.socket" "$top/deploy/noded.socket" "$tmp/"
out="$(cd "$tmp" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./controld.service ./noded.service ./controld.socket ./noded.socket 2>&1)" || {
  echo "FAIL: systemd-analyze verify:"; echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "FAIL: systemd-analyze verify printed warnings:"; echo "$out"; exit 1
fi
echo "PASS: systemd-analyze verify is clean for controld and noded (.service and .socket)"
