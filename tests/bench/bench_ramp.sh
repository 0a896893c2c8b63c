#!/bin/sh
# bench_ramp.sh — the node proxy's CPU per request with a failback ramp running vs none
# (docs/design.md, Failback ramp), side by side in one run: two bench_proxy_driver processes with
# the same two-level site on level 2, one of them carrying a ramp back to level 1 whose first
# step (SHARE % of new requests) lasts an hour, so the split runs on every request of the bench.
# Both forward to nginx origins on loopback (level 1 and level 2 on two ports of one nginx).
# Interleaved wrk rounds (the order alternates), CPU of each driver from /proc/<pid>/task/*/stat
# (user + system), per request; prints each round, the medians and the ratio ramp / none.
# usage: tests/bench/bench_ramp.sh BUILD_DIR   (needs bench_proxy_driver built there, nginx, wrk)
# Env: ROUNDS [7], DURATION [8s], CONNS [32], SHARE [50], PIN [on]: both drivers on core
# PROXY_CPU [1] with THREADS [1] proxy threads, wrk (1 thread) and the origin on core LOAD_CPU
# [0] (taskset); PIN=off: nothing pinned, THREADS [2], wrk -t2.
set -eu
BUILD=${1:?usage: bench_ramp.sh BUILD_DIR}
DRIVER="$BUILD/tests/bench_proxy_driver"
ROUNDS=${ROUNDS:-7}
DURATION=${DURATION:-8s}
CONNS=${CONNS:-32}
SHARE=${SHARE:-50}
PIN=${PIN:-on}
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
if [ "$PIN" = on ]; then
  THREADS=${THREADS:-1}; WRK_THREADS=1
  command -v taskset >/dev/null || { echo "taskset not found (util-linux)" >&2; exit 2; }
  ON_PROXY="taskset -c $PROXY_CPU"; ON_LOAD="taskset -c $LOAD_CPU"
else
  THREADS=${THREADS:-2}; WRK_THREADS=2
  ON_PROXY=""; ON_LOAD=""
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$DRIVER" ] || { echo "missing $DRIVER (build target bench_proxy_driver)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk not found" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "nginx not found" >&2; exit 2; }

. "$(dirname "$0")/benchlib.sh"
bench_tmp bench_ramp
O1_PORT=$(freeport); O2_PORT=$(freeport); NONE_PORT=$(freeport); RAMP_PORT=$(freeport)

origin_conf "$O1_PORT=1" "$O2_PORT=2"

$ON_LOAD "$NGINX" -p "$TMP/origin" -c "$TMP/origin/nginx.conf" 2>"$TMP/origin/stderr" &
PIDS="$PIDS $!"
$ON_PROXY "$DRIVER" --listen "127.0.0.1:$NONE_PORT" --origin-port "$O1_PORT" --origin2-port "$O2_PORT" \
  --threads "$THREADS" --ramp-share 0 >"$TMP/none.out" 2>&1 &
NONE_PID=$!
PIDS="$PIDS $NONE_PID"
$ON_PROXY "$DRIVER" --listen "127.0.0.1:$RAMP_PORT" --origin-port "$O1_PORT" --origin2-port "$O2_PORT" \
  --threads "$THREADS" --ramp-share "$SHARE" >"$TMP/ramp.out" 2>&1 &
RAMP_PID=$!
PIDS="$PIDS $RAMP_PID"

wait_up() {
  i=0
  until curl -s -o /dev/null -H 'Host: bench.test' "http://127.0.0.1:$1/"; do
    i=$((i + 1)); [ $i -lt 50 ] || { echo "port $1 did not come up" >&2; cat "$TMP"/*.out "$TMP/origin/error.log" >&2 || true; exit 1; }
    sleep 0.1
  done
}
wait_up "$O1_PORT"; wait_up "$O2_PORT"; wait_up "$NONE_PORT"; wait_up "$RAMP_PORT"
# the ramp is live: its driver sends some of 200 requests to level 1, the other none
levels() {
  i=0; while [ $i -lt 200 ]; do
    curl -s -D - -o /dev/null -H 'Host: bench.test' "http://127.0.0.1:$1/" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-level" {print $2}'
    i=$((i + 1))
  done | sort | uniq -c | awk '{printf "level %s: %s  ", $2, $1}'
}
NONE_LEVELS=$(levels "$NONE_PORT"); RAMP_LEVELS=$(levels "$RAMP_PORT")
echo "200 requests each: none: $NONE_LEVELS| ramp ($SHARE %): $RAMP_LEVELS"
case "$NONE_LEVELS" in *"level 1"*) echo "the driver without a ramp sent requests to level 1" >&2; exit 1 ;; esac
case "$RAMP_LEVELS" in *"level 1"*) ;; *) echo "the ramp driver sent nothing to level 1" >&2; exit 1 ;; esac

# CPU time (ns) of a process from its threads' schedstat (time on a CPU)
cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{t += $1} END {printf "%.0f", t}'
}
run() {  # PORT PID -> "req/s cpu_ns_per_request"
  c0=$(cpu_ns "$2")
  $ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d"$DURATION" -H 'Host: bench.test' "http://127.0.0.1:$1/" >"$TMP/wrk.out" 2>&1
  c1=$(cpu_ns "$2")
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$TMP/wrk.out")
  n=$(awk '/requests in/ {print $1}' "$TMP/wrk.out")
  errs=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' "$TMP/wrk.out")
  [ -z "$errs" ] || echo "  ($1: $errs)" >&2
  awk -v a="$c0" -v b="$c1" -v n="$n" -v r="$rps" 'BEGIN {printf "%s %.1f\n", r, (b - a) / n}'
}

echo "mode: PIN=$PIN (drivers on ${ON_PROXY:-any core}, wrk and origin on ${ON_LOAD:-any core}), proxy threads $THREADS, wrk -t$WRK_THREADS -c$CONNS -d$DURATION, ROUNDS=$ROUNDS, SHARE=$SHARE"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
$ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d2s -H 'Host: bench.test' "http://127.0.0.1:$NONE_PORT/" >/dev/null 2>&1
$ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d2s -H 'Host: bench.test' "http://127.0.0.1:$RAMP_PORT/" >/dev/null 2>&1
: >"$TMP/none.txt"; : >"$TMP/ramp.txt"
r=1
while [ $r -le "$ROUNDS" ]; do
  if [ $((r % 2)) = 1 ]; then order="none ramp"; else order="ramp none"; fi
  for who in $order; do
    if [ "$who" = none ]; then set -- $(run "$NONE_PORT" "$NONE_PID"); else set -- $(run "$RAMP_PORT" "$RAMP_PID"); fi
    echo "$1 $2" >>"$TMP/$who.txt"
    echo "round $r $who: $1 req/s, $2 ns CPU per request (load $(cut -d' ' -f1 /proc/loadavg))"
  done
  r=$((r + 1))
done
NONE_RPS=$(awk '{print $1}' "$TMP/none.txt" | median); RAMP_RPS=$(awk '{print $1}' "$TMP/ramp.txt" | median)
NONE_CPU=$(awk '{print $2}' "$TMP/none.txt" | median); RAMP_CPU=$(awk '{print $2}' "$TMP/ramp.txt" | median)
echo "median none: $NONE_RPS req/s, $NONE_CPU ns CPU per request"
echo "median ramp: $RAMP_RPS req/s, $RAMP_CPU ns CPU per request"
# the per-round ratios too: each pair ran back to back, so drift of the machine cancels in it
paste "$TMP/ramp.txt" "$TMP/none.txt" | awk '{print $2 / $4}' > "$TMP/pairs.txt"
PAIR=$(median < "$TMP/pairs.txt")
awk -v a="$RAMP_CPU" -v b="$NONE_CPU" -v p="$PAIR" -v lo="$(sort -n "$TMP/pairs.txt" | head -1)" \
  -v hi="$(sort -n "$TMP/pairs.txt" | tail -1)" 'BEGIN {
  printf "CPU per request ramp/none: %.3f (ratio of medians; goal <= 1.02)\n", a / b
  printf "median of the per-round ratios: %.3f (range %.3f to %.3f)\n", p, lo, hi }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
