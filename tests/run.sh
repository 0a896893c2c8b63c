#!/usr/bin/env bash
# Build cdnca and run every test (unit + integration) with ctest.
#   tests/run.sh            plain build in ./build
#   tests/run.sh --asan     AddressSanitizer + UndefinedBehaviorSanitizer build in ./build-asan
#   tests/run.sh --tsan     ThreadSanitizer build in ./build-tsan (a race report fails the test)
#   tests/run.sh --pg       plain build in ./build, only the PostgreSQL tests (label pg): the
#                           integration suite again as pg.<name> on the run's one temporary
#                           PostgreSQL cluster (ctest fixture pg, tests/pg/pgctl.sh), each test
#                           on databases of its own (CDNCA_TEST_DB=pg, pgfixture.py)
#   tests/run.sh -L unit    extra arguments go to ctest (here: only unit tests)
#   tests/run.sh --asan --build-only   configure and build only (any mode; CI builds the next
#                           pass's tree beside the current one)
# Tests run in parallel (most of them wait on probe rounds and timeouts, not on the CPU): 6 at a
# time plainly and on PostgreSQL, 4 under ASan and TSan; CDNCA_TEST_JOBS=N overrides. A test
# that fails in the parallel run is run once more alone; the run passes only if it passes then,
# and every such test is listed as "flaky" at the end so it can be fixed. The longest tests start
# first (tests/costs.txt seeds ctest's timings in a new build directory).
# It first installs what is missing (deploy/deps.sh --build: build; tests/deps.sh: the test tools,
# the PostgreSQL, nginx and HAProxy binaries (no service enabled), chromium, Node.js and
# playwright-core for the browser test, promtool, systemd-analyze); CDNCA_NO_INSTALL=1 installs
# nothing. A test whose tools are missing is reported by ctest as skipped (exit code 77).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
dir="$top/build"
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDNCA_WERROR=ON)
pg=OFF
jobs=6
ctest_args=()
if [ "${1:-}" = "--pg" ]; then
  shift
  pg=ON
  ctest_args=(-L pg)
elif [ "${1:-}" = "--asan" ]; then
  shift
  dir="$top/build-asan"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DASAN=ON -DUBSAN=ON -DCDNCA_WERROR=ON)
  jobs=4
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
elif [ "${1:-}" = "--tsan" ]; then
  shift
  dir="$top/build-tsan"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DTSAN=ON -DCDNCA_WERROR=ON)
  jobs=4
  export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
fi
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  shift
  build_only=1
fi
"$top/deploy/deps.sh" --build
"$top/tests/deps.sh"
cmake -S "$top" -B "$dir" "${cmake_args[@]}" -DCDNCA_PG_TESTS="$pg" >/dev/null
cmake --build "$dir" -j"$(nproc)"
[ "$build_only" = 0 ] || exit 0
cd "$dir"
jobs="${CDNCA_TEST_JOBS:-$jobs}"
# A fresh build directory has no timings yet: seed ctest's cost data from tests/costs.txt so the
# longest tests start first (ctest orders a parallel run by cost).
costs="Testing/Temporary/CTestCostData.txt"
if [ ! -s "$costs" ]; then
  mkdir -p Testing/Temporary
  { awk '!/^#/ && NF == 2 {print $1, 1, $2}' "$top/tests/costs.txt"; echo ---; } >"$costs"
fi
if ctest --output-on-failure --timeout 600 -j"$jobs" "${ctest_args[@]}" "$@"; then
  exit 0
fi
failed="$(sed -n 's/^[0-9]*://p' Testing/Temporary/LastTestsFailed.log 2>/dev/null || true)"
if [ -z "$failed" ]; then
  exit 1
fi
echo "tests/run.sh: running the failed tests once more, one at a time:" $failed
# by name, not by number (--rerun-failed): a test's number is its place in the tree's test list
# when the rerun starts, and a build beside this one that configures the tree again (the
# packages) can renumber it, so a number could rerun another test and call this one flaky
names="$(printf '%s\n' $failed | sed 's/[][\.*^$+?(){}|]/\\&/g' | paste -sd'|')"
if ctest --output-on-failure --timeout 600 "${ctest_args[@]}" -R "^($names)\$"; then
  for t in $failed; do echo "tests/run.sh: flaky: $t failed in the parallel run and passed alone"; done
  exit 0
fi
exit 1
