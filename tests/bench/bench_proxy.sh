#!/bin/sh
# bench_proxy.sh — the node proxy engine vs nginx (proxy_pass with keepalive), same origin, same run.
# usage: tests/bench/bench_proxy.sh BUILD_DIR   (needs bench_proxy_driver built there, nginx, wrk)
# Env: ROUNDS [3], DURATION [10s], CONNS [64], THREADS [2]. Builds nothing; runtime about 2 minutes.
set -eu
BUILD=${1:?usage: bench_proxy.sh BUILD_DIR}
DRIVER="$BUILD/tests/bench_proxy_driver"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$DRIVER" ] || { echo "missing $DRIVER (build target bench_proxy_driver)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk not found" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "nginx not found" >&2; exit 2; }

. "$(dirname "$0")/benchlib.sh"
bench_tmp bench_proxy
ORIGIN_PORT=$(freeport)
NGX_PORT=$(freeport)
NODE_PORT=$(freeport)

mkdir -p "$TMP/proxy"

origin_conf "$ORIGIN_PORT"

{ nginx_head "$TMP/proxy" "$THREADS"; cat <<CONF; } > "$TMP/proxy/nginx.conf"
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NGX_PORT;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
    }
  }
}
CONF

"$NGINX" -p "$TMP/origin" -c "$TMP/origin/nginx.conf" 2>"$TMP/origin/stderr" &
PIDS="$PIDS $!"
"$NGINX" -p "$TMP/proxy" -c "$TMP/proxy/nginx.conf" 2>"$TMP/proxy/stderr" &
PIDS="$PIDS $!"
"$DRIVER" --listen "127.0.0.1:$NODE_PORT" --origin-port "$ORIGIN_PORT" --threads "$THREADS" \
  >"$TMP/driver.out" 2>&1 &
PIDS="$PIDS $!"

wait_up() {
  i=0
  until curl -s -o /dev/null -H 'Host: bench.test' "http://127.0.0.1:$1/"; do
    i=$((i + 1)); [ $i -lt 50 ] || { echo "port $1 did not come up" >&2; cat "$TMP"/*/error.log "$TMP/driver.out" >&2 || true; exit 1; }
    sleep 0.1
  done
}
wait_up "$ORIGIN_PORT"; wait_up "$NGX_PORT"; wait_up "$NODE_PORT"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.test' "http://127.0.0.1:$NODE_PORT/")
[ "$code" = 200 ] || { echo "proxy answered $code" >&2; exit 1; }

run() {
  wrk -t2 -c"$CONNS" -d"$DURATION" --latency -H 'Host: bench.test' "http://127.0.0.1:$1/" >"$TMP/wrk.out" 2>&1
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$TMP/wrk.out")
  p99=$(awk '$1 == "99%" {print $2}' "$TMP/wrk.out" | to_us)
  echo "$rps $p99"
}

# warm up both
wrk -t2 -c"$CONNS" -d2s -H 'Host: bench.test' "http://127.0.0.1:$NGX_PORT/" >/dev/null 2>&1
wrk -t2 -c"$CONNS" -d2s -H 'Host: bench.test' "http://127.0.0.1:$NODE_PORT/" >/dev/null 2>&1

: >"$TMP/ngx"; : >"$TMP/node"
r=1
while [ $r -le "$ROUNDS" ]; do
  set -- $(run "$NGX_PORT");  echo "$1 $2" >>"$TMP/ngx";  echo "round $r nginx: $1 req/s, p99 $2 us"
  set -- $(run "$NODE_PORT"); echo "$1 $2" >>"$TMP/node"; echo "round $r node:  $1 req/s, p99 $2 us"
  r=$((r + 1))
done
NGX_RPS=$(awk '{print $1}' "$TMP/ngx" | median);  NGX_P99=$(awk '{print $2}' "$TMP/ngx" | median)
NODE_RPS=$(awk '{print $1}' "$TMP/node" | median); NODE_P99=$(awk '{print $2}' "$TMP/node" | median)
echo "median nginx: $NGX_RPS req/s, p99 $NGX_P99 us"
echo "median node:  $NODE_RPS req/s, p99 $NODE_P99 us"
awk -v a="$NODE_RPS" -v b="$NGX_RPS" -v c="$NODE_P99" -v d="$NGX_P99" 'BEGIN {
  printf "req/s ratio node/nginx: %.2f (goal >= 0.80)\np99 ratio node/nginx:   %.2f (goal <= 1.50)\n", a/b, c/d }'
