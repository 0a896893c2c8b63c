#!/bin/sh
# bench_failover.sh — visitor errors through a real noded while one level-1 origin fails.
# usage: tests/bench/bench_failover.sh BUILD_DIR   (needs controld and noded built there, nginx,
# wrk, curl, python3). Scenarios under wrk load: `refused` (the origin is killed and
# restarted), `status502` (the origin answers 502 for a while), both with two level-1 origins
# and a level-2 one; and `backup`: a single-origin primary level and a backup level, controld's
# default 30 s rounds, BK_DURATION s cut in 10 s wrk segments, the primary answering 502 from
# BK_FAIL_AT s on (health check included) until the end: visitor errors, p99 per segment and
# through controld's switch, and what the backup level served before and after the switch.
# Builds nothing; runtime about 50 s for the first two (plus up to SKIP_MS between them) and
# BK_DURATION for backup.
# Env: DURATION [20] s per scenario, FAIL_AT [5] s, BACK_AT [10] s, CONNS [32], THREADS [2],
# SKIP_MS [3000] (the site's node_retry.skip_ms, so half-open trials happen during the run),
# RETRIES [2] (node_retry.retries; 0 shows what the visitors would see without retries),
# SCENARIOS ["refused status502 backup"], BK_DURATION [120] s (a multiple of 10), BK_FAIL_AT [10]
# s (a multiple of 10), BACKUP_LEVELS [true] (node_retry.backup_levels of the backup site;
# false shows the errors visitors get until controld switches).
# shellcheck disable=SC2154 # the R_* variables are set by an eval of wrk's RESULT line
set -eu
BUILD=${1:?usage: bench_failover.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
CONTROLD="$BUILD/controld/controld"
NODED="$BUILD/noded/noded"
DURATION=${DURATION:-20}
FAIL_AT=${FAIL_AT:-5}
BACK_AT=${BACK_AT:-10}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
SKIP_MS=${SKIP_MS:-3000}
RETRIES=${RETRIES:-2}
SCENARIOS=${SCENARIOS:-refused status502 backup}
BK_DURATION=${BK_DURATION:-120}
BK_FAIL_AT=${BK_FAIL_AT:-10}
BACKUP_LEVELS=${BACKUP_LEVELS:-true}
BK_HOST=bench-backup.test
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HOSTNAME_=bench-failover.test
for b in "$CONTROLD" "$NODED"; do
  [ -x "$b" ] || { echo "missing $b (build controld and noded first)" >&2; exit 2; }
done
for t in wrk curl python3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 2; }
done
[ -x "$NGINX" ] || { echo "nginx not found" >&2; exit 2; }
if [ "$FAIL_AT" -ge "$BACK_AT" ] || [ "$BACK_AT" -ge "$DURATION" ]; then
  echo "need FAIL_AT < BACK_AT < DURATION" >&2; exit 2
fi
if [ $((BK_DURATION % 10)) -ne 0 ] || [ $((BK_FAIL_AT % 10)) -ne 0 ] ||
  [ "$BK_FAIL_AT" -lt 10 ] || [ "$BK_FAIL_AT" -ge "$BK_DURATION" ]; then
  echo "need BK_FAIL_AT and BK_DURATION multiples of 10, 10 <= BK_FAIL_AT < BK_DURATION" >&2
  exit 2
fi

TMP=$(mktemp -d /tmp/bench_failover.XXXXXX)
chmod 755 "$TMP"
PIDS=""       # long-lived children (controld, noded, origins b and c)
A_PID=""      # origin a, restarted during the run
WRK_PID=""
cleanup() {
  for p in $WRK_PID $A_PID $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $WRK_PID $A_PID $PIDS; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

freeport() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1]); s.close()'
}
# wait_http URL [HOST]: until the URL answers 200 (bounded: 30 s).
wait_http() {
  i=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: ${2:-localhost}" "$1" || true)" \
    = 200 ]; do
    i=$((i + 1))
    if [ $i -ge 300 ]; then
      echo "$1 did not answer 200 within 30 s" >&2
      tail -n 20 "$TMP"/*.log "$TMP"/*/error.log >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.1
  done
}
# json_get KEY: read a JSON object on stdin, print its KEY.
json_get() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# One nginx origin: a single process (master_process off), so kill -9 closes its listener at
# once. While $TMP/NAME/fail exists every request is answered 502 (the second scenario).
origin_conf() { # NAME PORT
  mkdir -p "$TMP/$1/www"
  head -c 1024 /dev/zero | tr '\0' 'x' >"$TMP/$1/www/index.html"
  cat >"$TMP/$1/nginx.conf" <<CONF
master_process off;
daemon off;
worker_processes 1;
pid $TMP/$1/nginx.pid;
error_log $TMP/$1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $TMP/$1; proxy_temp_path $TMP/$1;
  fastcgi_temp_path $TMP/$1; uwsgi_temp_path $TMP/$1; scgi_temp_path $TMP/$1;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:$2;
    root $TMP/$1/www;
    location / {
      if (-f $TMP/$1/fail) { return 502; }
    }
  }
}
CONF
}
origin_start() { # NAME -> pid in $!
  "$NGINX" -p "$TMP/$1" -c "$TMP/$1/nginx.conf" >>"$TMP/$1/stderr" 2>&1 &
}

A_PORT=$(freeport); B_PORT=$(freeport); C_PORT=$(freeport)
P_PORT=$(freeport); K_PORT=$(freeport)
CTL_PORT=$(freeport); NODE_PORT=$(freeport); ADMIN_PORT=$(freeport)
origin_conf a "$A_PORT"; origin_conf b "$B_PORT"; origin_conf c "$C_PORT"
origin_conf p "$P_PORT"; origin_conf k "$K_PORT"
origin_start a; A_PID=$!
origin_start b; PIDS="$PIDS $!"
origin_start c; PIDS="$PIDS $!"
origin_start p; PIDS="$PIDS $!"
origin_start k; PIDS="$PIDS $!"
wait_http "http://127.0.0.1:$A_PORT/"; wait_http "http://127.0.0.1:$B_PORT/"
wait_http "http://127.0.0.1:$C_PORT/"; wait_http "http://127.0.0.1:$P_PORT/"
wait_http "http://127.0.0.1:$K_PORT/"

TOKEN="adm-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
CTL="http://127.0.0.1:$CTL_PORT"
CDNCA_ADMIN_TOKEN=$TOKEN "$CONTROLD" --listen "127.0.0.1:$CTL_PORT" --db "$TMP/controld.db" \
  --log-level warn >"$TMP/controld.log" 2>&1 &
PIDS="$PIDS $!"
wait_http "$CTL/healthz"
api() { # METHOD PATH [BODY]
  curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "$CTL$2"
}
NODE_TOKEN=$(api POST /v1/nodes '{"name": "bench-edge"}' | json_get token)
SITE_ID=$(api POST /v1/sites "{\"name\": \"bench\", \"hostnames\": [\"$HOSTNAME_\"],
  \"node_retry\": {\"retries\": $RETRIES, \"retry_budget_ms\": 15000, \"fail_count\": 3,
                   \"fail_window_ms\": 10000, \"skip_ms\": $SKIP_MS},
  \"origins\": [
    {\"level\": 1, \"address\": \"127.0.0.1\", \"port\": $A_PORT, \"scheme\": \"http\"},
    {\"level\": 1, \"address\": \"127.0.0.1\", \"port\": $B_PORT, \"scheme\": \"http\"},
    {\"level\": 2, \"address\": \"127.0.0.1\", \"port\": $C_PORT, \"scheme\": \"http\"}]}" |
  json_get id)
# the backup scenario's site: primary p alone on level 1, backup k on level 2, health checks
# on (two origins) at controld's default 30 s rounds
BK_SITE_ID=$(api POST /v1/sites "{\"name\": \"bench-backup\", \"hostnames\": [\"$BK_HOST\"],
  \"node_retry\": {\"backup_levels\": $BACKUP_LEVELS},
  \"origins\": [
    {\"level\": 1, \"address\": \"127.0.0.1\", \"port\": $P_PORT, \"scheme\": \"http\"},
    {\"level\": 2, \"address\": \"127.0.0.1\", \"port\": $K_PORT, \"scheme\": \"http\"}]}" |
  json_get id)
mkdir -p "$TMP/noded-state"
CDNCA_NODE_TOKEN=$NODE_TOKEN "$NODED" --controld "$CTL" --listen "127.0.0.1:$NODE_PORT" \
  --admin-listen "127.0.0.1:$ADMIN_PORT" --state-dir "$TMP/noded-state" --name bench-edge \
  --proxy-threads "$THREADS" --log-level warn >"$TMP/noded.log" 2>&1 &
PIDS="$PIDS $!"
wait_http "http://127.0.0.1:$NODE_PORT/" "$HOSTNAME_"
wait_http "http://127.0.0.1:$NODE_PORT/" "$BK_HOST"
echo "controld :$CTL_PORT, noded :$NODE_PORT (admin :$ADMIN_PORT), site $SITE_ID;" \
  "level 1: a :$A_PORT, b :$B_PORT; level 2: c :$C_PORT; skip_ms $SKIP_MS, retries $RETRIES"

# Per-origin counters of the node (GET /status), one line per origin:
# port state requests failures skips.
node_origins() {
  curl -sf "http://127.0.0.1:$ADMIN_PORT/status" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sites"]:
    for o in s.get("origins", []):
        print(o["port"], o.get("state"), o.get("requests", 0), o.get("failures", 0),
              o.get("skips", 0))'
}
node_metric() { # NAME-with-labels -> value (0 when absent)
  curl -sf "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk -v k="$1" '$1 == k {v = $2} END {print v + 0}'
}
# Failed origin attempts by result, one line: connect_error=N io_error=N ...
node_attempts() {
  curl -sf "http://127.0.0.1:$ADMIN_PORT/metrics" | awk -F'[{}"= ]+' '
    $1 == "cdnca_node_origin_attempts_total" && $3 != "success" {printf "%s=%s ", $3, $4}'
}
attempts_delta() { # BEFORE AFTER
  for kv in $2; do
    k=${kv%%=*}; v=${kv#*=}; v0=0
    for kv0 in $1; do [ "${kv0%%=*}" = "$k" ] && v0=${kv0#*=}; done
    [ $((v - v0)) -eq 0 ] || printf ' %s %d,' "$k" $((v - v0))
  done
}
origin_label() {
  case "$1" in "$A_PORT") echo a ;; "$B_PORT") echo b ;; "$C_PORT") echo c ;;
  "$P_PORT") echo p ;; "$K_PORT") echo k ;; *) echo "$1" ;; esac
}
report_origins() { # BEFORE_FILE AFTER_FILE
  while read -r port state req fail skips; do
    prev=$(awk -v p="$port" '$1 == p {print $3, $4, $5}' "$1")
    req0=${prev%% *}; fail0=${prev#* }; fail0=${fail0%% *}; skips0=${prev##* }
    echo "  origin $(origin_label "$port"): $((req - ${req0:-0})) attempts," \
      "$((fail - ${fail0:-0})) failures, $((skips - ${skips0:-0})) skips, now $state"
  done <"$2"
}

wrk -t"$THREADS" -c"$CONNS" -d2s -H "Host: $HOSTNAME_" "http://127.0.0.1:$NODE_PORT/" >/dev/null 2>&1

# scenario NAME: wrk for DURATION s; at FAIL_AT the origin a fails (NAME's way), at BACK_AT it
# is back. Prints the figures and a verdict line; adds the failed requests to FAILED_TOTAL.
FAILED_TOTAL=0
scenario() {
  node_origins >"$TMP/before"
  r0=$(node_metric cdnca_node_retries_total); f0=$(node_metric cdnca_node_fail_open_total)
  a0=$(node_attempts)
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$HERE/failover.lua" \
    -H "Host: $HOSTNAME_" "http://127.0.0.1:$NODE_PORT/" >"$TMP/wrk-$1.out" 2>&1 &
  WRK_PID=$!
  sleep "$FAIL_AT"
  case "$1" in
  refused) kill -9 "$A_PID"; wait "$A_PID" 2>/dev/null || true; A_PID="" ;;
  status502) : >"$TMP/a/fail" ;;
  esac
  sleep $((BACK_AT - FAIL_AT))
  case "$1" in
  refused) origin_start a; A_PID=$! ;;
  status502) rm -f "$TMP/a/fail" ;;
  esac
  wait "$WRK_PID" || { echo "wrk failed:" >&2; cat "$TMP/wrk-$1.out" >&2; exit 1; }
  WRK_PID=""
  node_origins >"$TMP/after"
  r1=$(node_metric cdnca_node_retries_total); f1=$(node_metric cdnca_node_fail_open_total)
  a1=$(node_attempts)
  line=$(grep '^RESULT ' "$TMP/wrk-$1.out") || { cat "$TMP/wrk-$1.out" >&2; exit 1; }
  # the line is key=number pairs (failover.lua); refuse anything else before eval
  echo "$line" | grep -Eq '^RESULT( [a-z0-9_]+=[0-9.]+)+$' || { echo "bad: $line" >&2; exit 1; }
  eval "$(echo "$line" | sed 's/^RESULT //' | tr ' ' '\n' | sed 's/^/R_/')"
  failed=$((R_s4xx + R_s5xx + R_err_connect + R_err_read + R_err_write + R_err_timeout))
  FAILED_TOTAL=$((FAILED_TOTAL + failed))
  echo "scenario $1: origin a fails at ${FAIL_AT}s, back at ${BACK_AT}s," \
    "wrk -t$THREADS -c$CONNS -d${DURATION}s"
  echo "  requests $R_requests, $R_rps req/s, p50 ${R_p50_us} us, p99 ${R_p99_us} us," \
    "max ${R_max_us} us"
  echo "  statuses 2xx $R_s2xx, 3xx $R_s3xx, 4xx $R_s4xx, 5xx $R_s5xx" \
    "(502 $R_s502, 503 $R_s503, 504 $R_s504)"
  echo "  socket errors connect $R_err_connect, read $R_err_read, write $R_err_write," \
    "timeout $R_err_timeout"
  echo "  node: $((r1 - r0)) retries, $((f1 - f0)) fail-open picks;" \
    "failed attempts:$(attempts_delta "$a0" "$a1" | sed "s/,$//")"
  report_origins "$TMP/before" "$TMP/after"
  echo "  FAILED visitor requests: $failed"
}

run_pair() {
  scenario refused
  # let origin a finish its skip and win its half-open trial before the next scenario
  i=0
  until node_origins | awk -v p="$A_PORT" '$1 == p && $2 == "healthy" {ok = 1} END {exit !ok}'; do
    i=$((i + 1))
    [ $i -lt $((SKIP_MS / 100 + 100)) ] || { echo "origin a is not healthy" >&2; break; }
    curl -s -o /dev/null -H "Host: $HOSTNAME_" "http://127.0.0.1:$NODE_PORT/" || true
    sleep 0.1
  done
  scenario status502
}

# k_counts: "requests backup_picks" of origin k at the node (GET /status).
k_counts() {
  curl -sf "http://127.0.0.1:$ADMIN_PORT/status" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sites"]:
    for o in s.get("origins", []):
        if o["port"] == int(sys.argv[1]):
            print(o.get("requests", 0), o.get("backup_picks", 0))' "$K_PORT"
}
site_level() { api GET "/v1/sites/$BK_SITE_ID" | json_get current_level; }

# backup: wrk in 10 s segments over BK_DURATION s; p fails (502, health check included) at
# BK_FAIL_AT s and stays down. A watcher notes when controld switches the site to level 2 and
# what k had served by then (as a backup pick of the node, before the switch).
backup_scenario() {
  segs=$((BK_DURATION / 10)); fail_seg=$((BK_FAIL_AT / 10)); seg=0; errs=0
  steady_p99=0; worst_p99=0; switch_seg=""
  rm -f "$TMP/switch"
  t0=$(date +%s)
  (
    while [ $(($(date +%s) - t0)) -le "$BK_DURATION" ]; do
      if [ "$(site_level)" = 2 ]; then
        echo "$(($(date +%s) - t0)) $(k_counts)" >"$TMP/switch"; exit 0
      fi
      sleep 0.2
    done
  ) &
  WATCH_PID=$!
  PIDS="$PIDS $WATCH_PID"
  k0=$(k_counts)
  echo "scenario backup: p alone on level 1, k on level 2, backup_levels $BACKUP_LEVELS," \
    "p answers 502 from ${BK_FAIL_AT}s to the end, wrk -t$THREADS -c$CONNS in 10 s segments"
  echo "  segment | requests | p50 us | p99 us | max us | failed | level at end"
  while [ $seg -lt $segs ]; do
    [ $seg -eq "$fail_seg" ] && : >"$TMP/p/fail"
    wrk -t"$THREADS" -c"$CONNS" -d10s --latency -s "$HERE/failover.lua" \
      -H "Host: $BK_HOST" "http://127.0.0.1:$NODE_PORT/" >"$TMP/wrk-backup-$seg.out" 2>&1 ||
      { cat "$TMP/wrk-backup-$seg.out" >&2; exit 1; }
    line=$(grep '^RESULT ' "$TMP/wrk-backup-$seg.out") || exit 1
    echo "$line" | grep -Eq '^RESULT( [a-z0-9_]+=[0-9.]+)+$' || { echo "bad: $line" >&2; exit 1; }
    eval "$(echo "$line" | sed 's/^RESULT //' | tr ' ' '\n' | sed 's/^/R_/')"
    failed=$((R_s4xx + R_s5xx + R_err_connect + R_err_read + R_err_write + R_err_timeout))
    errs=$((errs + failed))
    lvl=$(site_level)
    if [ -z "$switch_seg" ] && [ "$lvl" = 2 ]; then switch_seg=$seg; fi
    [ $seg -lt "$fail_seg" ] && [ "$R_p99_us" -gt "$steady_p99" ] && steady_p99=$R_p99_us
    if [ $seg -ge "$fail_seg" ] && { [ -z "$switch_seg" ] || [ "$switch_seg" = $seg ]; } &&
      [ "$R_p99_us" -gt "$worst_p99" ]; then worst_p99=$R_p99_us; fi
    echo "  $((seg * 10))-$((seg * 10 + 10)) s | $R_requests | $R_p50_us | $R_p99_us |" \
      "$R_max_us | $failed | $lvl"
    seg=$((seg + 1))
  done
  rm -f "$TMP/p/fail"
  wait "$WATCH_PID" 2>/dev/null || true
  k1=$(k_counts)
  if [ -s "$TMP/switch" ]; then
    read -r wt kreq kpick <"$TMP/switch"
    echo "  controld switched to level 2 at about $wt s ($((wt - BK_FAIL_AT)) s after the failure)"
    echo "  k served before the switch: $((kreq - ${k0%% *})) requests" \
      "($((kpick - ${k0##* })) backup picks); after it: $((${k1%% *} - kreq)) requests" \
      "($((${k1##* } - kpick)) backup picks)"
  else
    echo "  controld did not switch within the run; k served $((${k1%% *} - ${k0%% *}))" \
      "requests ($((${k1##* } - ${k0##* })) backup picks)"
  fi
  echo "  p99 steady (before the failure) $steady_p99 us; worst p99 from the failure through" \
    "the switch $worst_p99 us (ratio $(awk -v a="$worst_p99" -v b="$steady_p99" \
    'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'), goal <= 2)"
  echo "  FAILED visitor requests: $errs"
  FAILED_TOTAL=$((FAILED_TOTAL + errs))
}

case " $SCENARIOS " in *" refused "*|*" status502 "*) run_pair ;; esac
case " $SCENARIOS " in *" backup "*) backup_scenario ;; esac
if grep -qi 'warn\|error' "$TMP/noded.log"; then
  echo "noded warnings/errors (last 10):"
  grep -i 'warn\|error' "$TMP/noded.log" | tail -n 10
fi
echo "total failed visitor requests: $FAILED_TOTAL (goal 0)"
[ "$FAILED_TOTAL" -eq 0 ]
