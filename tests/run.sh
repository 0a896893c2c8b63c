#!/usr/bin/env bash
# Build cdnca and run every test (unit + integration) with ctest.
#   tests/run.sh            plain build in ./build
#   tests/run.sh --asan     AddressSanitizer + UndefinedBehaviorSanitizer build in ./build-asan
#   tests/run.sh --tsan     ThreadSanitizer build in ./build-tsan (a race report fails the test)
#   tests/run.sh --pg       plain build in ./build, only the PostgreSQL tests (label pg): the
#                           integration suite again as pg.<name> on a temporary PostgreSQL
#                           cluster (CDNCA_TEST_DB=pg, tests/integration/pgfixture.py)
#   tests/run.sh -L unit    extra arguments go to ctest (here: only unit tests)
# It first installs what is missing (deploy/deps.sh: build; tests/deps.sh: chromium, Node.js and
# playwright-core for the browser test, promtool, systemd-analyze); CDNCA_NO_INSTALL=1 installs
# nothing. A test whose tools are missing is reported by ctest as skipped (exit code 77).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
dir="$top/build"
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
pg=OFF
ctest_args=()
if [ "${1:-}" = "--pg" ]; then
  shift
  pg=ON
  ctest_args=(-L pg)
elif [ "${1:-}" = "--asan" ]; then
  shift
  dir="$top/build-asan"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DASAN=ON -DUBSAN=ON)
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
elif [ "${1:-}" = "--tsan" ]; then
  shift
  dir="$top/build-tsan"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DTSAN=ON)
  export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
fi
"$top/deploy/deps.sh"
"$top/tests/deps.sh"
cmake -S "$top" -B "$dir" "${cmake_args[@]}" -DCDNCA_PG_TESTS="$pg" >/dev/null
cmake --build "$dir" -j"$(nproc)"
cd "$dir"
ctest --output-on-failure --timeout 600 "${ctest_args[@]}" "$@"
