#!/usr/bin/env bash
# deploy/prometheus/alerts.yml: `promtool check rules`, `promtool test rules alerts_test.yml`,
# and every alert has a unit test and a runbook section in docs/operations.md.
# Exit 77 (ctest SKIP) when promtool is not installed (Debian package prometheus).
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$top/deploy/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIP: promtool is not installed (apt-get install prometheus)"
  exit 77
fi
promtool check rules "$dir/alerts.yml"
(cd "$dir" && promtool test rules alerts_test.yml)
fail=0
for a in $(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$dir/alerts.yml"); do
  grep -q "alertname: $a\$" "$dir/alerts_test.yml" || { echo "FAIL: alert $a has no promtool test"; fail=1; }
  grep -q "^### $a\$" "$top/docs/operations.md" || { echo "FAIL: alert $a has no runbook section '### $a' in docs/operations.md"; fail=1; }
  grep -q "runbook: \"docs/operations.md#${a,,}\"" "$dir/alerts.yml" || { echo "FAIL: alert $a does not point at its runbook"; fail=1; }
done
[ "$fail" = 0 ] && echo "PASS: alert rules checked and unit-tested; every alert has a runbook"
exit "$fail"
