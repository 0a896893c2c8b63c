#!/usr/bin/env bash
# bench_api — REST API read throughput of controld against a bare libmicrohttpd baseline.
#
#   tests/bench/bench_api.sh BUILD_DIR [ROUNDS [DURATION]]
#
# Starts controld (fresh database in a temp dir, one site with two origins) and hello_mhd (the
# same libmicrohttpd set-up answering a fixed JSON body of about the same size), then runs wrk
# (-t2 -c32, DURATION [10s]) ROUNDS [3] times against each, alternating, in the same run:
# GET /v1/sites/{id} with the admin token, and GET / on hello_mhd. Prints req/s and p99 per
# round, the medians, and the ratio controld/hello_mhd of the median req/s (goal >= 0.5).
# Builds nothing: BUILD_DIR must hold controld/controld and tests/hello_mhd. Needs wrk, curl,
# python3 (for a free port).
set -euo pipefail

build="${1:?usage: bench_api.sh BUILD_DIR [ROUNDS [DURATION]]}"
rounds="${2:-3}"
duration="${3:-10s}"
controld="$build/controld/controld"
hello="$build/tests/hello_mhd"
for b in "$controld" "$hello"; do
  [ -x "$b" ] || { echo "bench_api: $b not found (build it first)" >&2; exit 2; }
done
for t in wrk curl python3; do
  command -v "$t" >/dev/null || { echo "bench_api: $t is needed" >&2; exit 2; }
done

tmp="$(mktemp -d /tmp/cdnca-bench-api.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url [header]
  for _ in $(seq 1 100); do
    if curl -sf -o /dev/null ${2:+-H "$2"} "$1"; then return 0; fi
    sleep 0.1
  done
  echo "bench_api: $1 did not answer" >&2
  exit 1
}

token="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
auth="Authorization: Bearer $token"
cport="$(free_port)"
hport="$(free_port)"

CDNCA_ADMIN_TOKEN="$token" "$controld" --listen "127.0.0.1:$cport" --db "$tmp/bench.db" \
  --log-level warn >"$tmp/controld.log" 2>&1 &
pids+=($!)
"$hello" "$hport" 2 >"$tmp/hello.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$cport/healthz"
wait_http "http://127.0.0.1:$hport/"

site="$(curl -sf -H "$auth" -H 'Content-Type: application/json' \
  -d '{"name":"bench","hostnames":["bench.example.com","www.bench.example.com"],
       "origins":[{"address":"10.0.0.1"},{"address":"10.0.0.2","scheme":"http","level":2}]}' \
  "http://127.0.0.1:$cport/v1/sites")"
id="$(printf '%s' "$site" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
curl_size() { curl -s -o /dev/null -w '%{size_download}' ${2:+-H "$2"} "$1"; }
csize="$(curl_size "http://127.0.0.1:$cport/v1/sites/$id" "$auth")"
hsize="$(curl_size "http://127.0.0.1:$hport/")"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$auth" "http://127.0.0.1:$cport/v1/sites/$id")" = 200 ] ||
  { echo "bench_api: GET /v1/sites/$id is not 200" >&2; exit 1; }

# run_wrk URL [HEADER] -> "reqs_per_s p99_ms"
run_wrk() {
  local out
  out="$(wrk -t2 -c32 -d"$duration" --latency ${2:+-H "$2"} "$1")"
  printf '%s\n' "$out" >>"$tmp/wrk.log"
  printf '%s\n' "$out" | awk '
    /Requests\/sec:/ { rps = $2 }
    /^ +99%/ { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
               ms = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : (u == "m") ? v * 60000 : v }
    /Non-2xx or 3xx responses:/ { bad = $5 }
    /Socket errors:/ { err = $0 }
    END { if (bad != "") { print "non-2xx: " bad > "/dev/stderr" }
          if (err != "") { print err > "/dev/stderr" }
          printf "%s %.3f\n", rps, ms }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "controld: GET /v1/sites/$id ($csize bytes)   hello_mhd: GET / ($hsize bytes)"
echo "wrk -t2 -c32 -d$duration, $rounds rounds alternating; $(nproc) CPUs, $(uname -r)"
printf '%-6s %-10s %12s %10s\n' round server req/s p99_ms
c_rps=() c_p99=() h_rps=() h_p99=()
for r in $(seq 1 "$rounds"); do
  read -r rps p99 < <(run_wrk "http://127.0.0.1:$cport/v1/sites/$id" "$auth")
  c_rps+=("$rps") c_p99+=("$p99")
  printf '%-6s %-10s %12s %10s\n' "$r" controld "$rps" "$p99"
  read -r rps p99 < <(run_wrk "http://127.0.0.1:$hport/")
  h_rps+=("$rps") h_p99+=("$p99")
  printf '%-6s %-10s %12s %10s\n' "$r" hello_mhd "$rps" "$p99"
done
mc="$(median "${c_rps[@]}")" mh="$(median "${h_rps[@]}")"
pc="$(median "${c_p99[@]}")" ph="$(median "${h_p99[@]}")"
printf 'median controld:  %10.0f req/s  p99 %8.3f ms\n' "$mc" "$pc"
printf 'median hello_mhd: %10.0f req/s  p99 %8.3f ms\n' "$mh" "$ph"
awk -v a="$mc" -v b="$mh" 'BEGIN { r = a / b; ok = (r >= 0.5) ? "met" : "NOT met"; printf "ratio controld/hello_mhd: %.2f (goal >= 0.50: %s)\n", r, ok }'
