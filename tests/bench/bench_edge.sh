#!/bin/sh
# bench_edge.sh — the real noded binary (enrolled with controld, one site) vs nginx proxy_pass and
# HAProxy, same origin, same run: req/s, p99 and CPU per request as medians over interleaved wrk
# rounds, for a 1 KiB and a 1 MiB response; each round also the TCP segments and context switches
# per request (the whole machine's) and, pinned, the load core's busy time per request;
# optionally system calls per request (strace -c); then RSS of each proxy while it holds IDLE
# idle visitor connections.
# usage: tests/bench/bench_edge.sh BUILD_DIR   (needs controld and noded built there, nginx,
# haproxy, wrk; strace for SYSCALLS=on)
# Env: PIN [on]: each proxy under test runs alone on core PROXY_CPU [1] (taskset; nginx with
# worker_processes THREADS, HAProxy with nbthread THREADS, noded with --proxy-threads THREADS,
# THREADS [1]), wrk (WRK_THREADS [1]), the origin and controld on core LOAD_CPU [0]; PIN=off:
# nothing pinned, THREADS [2] and WRK_THREADS [2] (the older mode, everything shares all cores).
# PROXIES ["nginx haproxy noded"; add noded-cache for noded behind an nginx cache over its Unix
# socket, deploy/edge/nginx-cdnca.conf's settings, every request a miss: a unique URI, nothing
# stored; the CPU counted is noded's alone, the cache runs on the load core; nginx-cache: the
# nginx proxy in noded's place behind the same cache], SIZES ["1k 1m"] (the response bodies: 1 KiB, 1 MiB),
# ROUNDS [5], DURATION [10s], CONNS [64], IDLE [10000] (0: skip that part), ACCESS_LOG [off] (on:
# each proxy writes one access line per request to a file; off: none does -- noded runs with
# --log-level warn), SYSCALLS [off] (on: after the timed rounds, strace -c -f on each proxy during
# one SYSCALL_DURATION [5s] wrk run per size, system calls per request printed per call),
# PACE_MS [0] (> 0: each connection waits on average that long between its requests, so the
# offered rate is at most CONNS * 1000 / PACE_MS req/s: below the load core's limit, p99 is the path's latency
# rather than the load generator's queue), CPU_QUOTA [0] (1-100: each proxy under test -- every
# process and thread of it -- may use at most that percent of one core, a cgroup of its own with
# CFS bandwidth control, root only; below what a proxy would use, req/s and MiB/s are then the
# throughput at equal CPU, and p99 the quota's 100 ms periods rather than the path).
# Builds nothing; runtime about ROUNDS * (number of PROXIES) * (number of SIZES) * DURATION + 40 s.
set -eu
BUILD=${1:?usage: bench_edge.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
PIN=${PIN:-on}
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
if [ "$PIN" = on ]; then
  THREADS=${THREADS:-1}; WRK_THREADS=${WRK_THREADS:-1}
  command -v taskset >/dev/null || { echo "taskset not found (util-linux)" >&2; exit 2; }
  ON_PROXY="taskset -c $PROXY_CPU"; ON_LOAD="taskset -c $LOAD_CPU"
else
  THREADS=${THREADS:-2}; WRK_THREADS=${WRK_THREADS:-2}
  ON_PROXY=""; ON_LOAD=""
fi
IDLE=${IDLE:-10000}
ACCESS_LOG=${ACCESS_LOG:-off}
PROXIES=${PROXIES:-nginx haproxy noded}
SIZES=${SIZES:-1k 1m}
SYSCALLS=${SYSCALLS:-off}
SYSCALL_DURATION=${SYSCALL_DURATION:-5s}
PACE_MS=${PACE_MS:-0}
case "$PACE_MS" in ''|*[!0-9]*) echo "PACE_MS: a whole number of milliseconds" >&2; exit 2 ;; esac
CPU_QUOTA=${CPU_QUOTA:-0}
case "$CPU_QUOTA" in ''|*[!0-9]*) echo "CPU_QUOTA: a whole percent of one core, 1 to 100" >&2; exit 2 ;; esac
[ "$CPU_QUOTA" -le 100 ] || { echo "CPU_QUOTA: a whole percent of one core, 1 to 100" >&2; exit 2; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
for b in "$BUILD/controld/controld" "$BUILD/noded/noded"; do
  [ -x "$b" ] || { echo "missing $b (build it first)" >&2; exit 2; }
done
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "nginx not found (apt-get install nginx)" >&2; exit 2; }
case " $PROXIES " in *" haproxy "*)
  [ -x "$HAPROXY" ] || { echo "haproxy not found (apt-get install haproxy, or PROXIES without it)" >&2; exit 2; } ;;
esac
[ "$SYSCALLS" != on ] || command -v strace >/dev/null || { echo "strace not found (apt-get install strace)" >&2; exit 2; }
for z in $SIZES; do
  case "$z" in 1k|1m) ;; *) echo "SIZES: 1k and/or 1m, not $z" >&2; exit 2 ;; esac
done
# the proxies and the idle-connection client need descriptors for IDLE connections
ulimit -n $((IDLE * 2 + 1024)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# HAProxy needs two descriptors per connection and refuses to start with fewer
HAP_MAXCONN=$((IDLE + 1024)); [ $((($(ulimit -n) - 64) / 2)) -ge "$HAP_MAXCONN" ] || HAP_MAXCONN=$((($(ulimit -n) - 64) / 2))

. "$(dirname "$0")/benchlib.sh"
bench_tmp bench_edge
ORIGIN_PORT=$(freeport); NGX_PORT=$(freeport); NODE_PORT=$(freeport); NODE_ADMIN=$(freeport)
HAP_PORT=$(freeport); CACHE_PORT=$(freeport); CACHE_NGX_PORT=$(freeport)
CTL_PORT=$(freeport)
TOKEN="adm-bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"

if [ "$ACCESS_LOG" = on ]; then
  NGX_ACCESS="access_log $TMP/proxy/access.log;"; NODE_LOG_LEVEL=info
  HAP_LOG="log stdout format raw local0"; HAP_HTTPLOG="option httplog"
else
  NGX_ACCESS="access_log off;"; NODE_LOG_LEVEL=warn
  HAP_LOG=""; HAP_HTTPLOG="option dontlog-normal"
fi
mkdir -p "$TMP/proxy" "$TMP/node" "$TMP/haproxy" "$TMP/cache/store"
head -c 1048576 /dev/zero | tr '\0' 'x' > "$TMP/origin/www/1m.bin"

origin_conf "$ORIGIN_PORT"

cat > "$TMP/proxy/nginx.conf" <<CONF
worker_processes $THREADS;
daemon off;
pid $TMP/proxy/nginx.pid;
error_log $TMP/proxy/error.log warn;
worker_rlimit_nofile $((IDLE * 2 + 1024));
events { worker_connections $((IDLE + 1024)); }
http {
  $NGX_ACCESS
  client_body_temp_path $TMP/proxy; proxy_temp_path $TMP/proxy;
  fastcgi_temp_path $TMP/proxy; uwsgi_temp_path $TMP/proxy; scgi_temp_path $TMP/proxy;
  keepalive_requests 1000000;
  # idle origin connections: 256 per worker here, --origin-keepalive 256 per thread for noded
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NGX_PORT backlog=4096;
    $( case " $PROXIES " in *" nginx-cache "*) echo "listen unix:$TMP/proxy/nginx.sock;" ;; esac )
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

# HAProxy as nginx above: one process, THREADS threads, keep-alive both sides, idle origin
# connections shared by all visitors (http-reuse always), X-Forwarded-For added
cat > "$TMP/haproxy/haproxy.cfg" <<CONF
global
  nbthread $THREADS
  maxconn $HAP_MAXCONN
  $HAP_LOG
defaults
  mode http
  log global
  $HAP_HTTPLOG
  option forwardfor
  http-reuse always
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend fe
  bind 127.0.0.1:$HAP_PORT
  default_backend origin
backend origin
  server o1 127.0.0.1:$ORIGIN_PORT
CONF

$ON_LOAD "$NGINX" -p "$TMP/origin" -c "$TMP/origin/nginx.conf" 2>"$TMP/origin/stderr" &
PIDS="$PIDS $!"
# noded-cache and nginx-cache: an nginx cache in front of noded's Unix socket, as
# deploy/edge/nginx-cdnca.conf (keep-alive to noded, the visitor in X-Forwarded-For), and the
# same cache in front of the nginx proxy above on a Unix socket of its own (nginx in noded's
# place: the same offered rate). Misses only: the wrk script below makes every URI unique and
# proxy_no_cache keeps the store from filling the disk. The cache runs on the load core.
NODE_SOCK="$TMP/node/noded.sock"; NGX_SOCK="$TMP/proxy/nginx.sock"
NODE_UNIX=""; CACHE=""; NGX_UNIX=""
case " $PROXIES " in *" noded-cache "*|*" nginx-cache "*) CACHE=on ;; esac
case " $PROXIES " in *" nginx-cache "*) NGX_UNIX="listen unix:$NGX_SOCK;" ;; esac
# mode 0666: the cache's workers run as another user (root starts nginx here)
[ -z "$CACHE" ] || NODE_UNIX="--listen unix:$NODE_SOCK,mode=0666 --trusted-proxies unix"
cache_server() {  # PORT SOCKET NAME
  cat <<CONF
  upstream $3 { server unix:$2 max_fails=0; keepalive 256; }
  server {
    listen 127.0.0.1:$1 backlog=4096;
    location / {
      proxy_pass http://$3;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$remote_addr;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_cache cdnca;
      proxy_cache_key \$scheme\$host\$request_uri;
      proxy_cache_valid 200 1m;
      proxy_no_cache 1;
      proxy_next_upstream off;
      add_header X-Cache-Status \$upstream_cache_status always;
    }
  }
CONF
}
if [ -n "$CACHE" ]; then
  {
    nginx_head "$TMP/cache" 1
    cat <<CONF
  proxy_cache_path $TMP/cache/store levels=1:2 keys_zone=cdnca:8m max_size=64m use_temp_path=off;
CONF
    cache_server "$CACHE_PORT" "$NODE_SOCK" to_noded
    [ -z "$NGX_UNIX" ] || cache_server "$CACHE_NGX_PORT" "$NGX_SOCK" to_nginx
    echo "}"
  } > "$TMP/cache/nginx.conf"
  # one URI per request: the thread's number and a counter
  cat > "$TMP/cache/miss.lua" <<'LUA'
local tid = 0
local n = 0
setup = function(thread) tid = tid + 1; thread:set("tid", tid) end
request = function()
  n = n + 1
  return wrk.format(nil, wrk.path .. "?miss=" .. tostring(tid) .. "-" .. tostring(n))
end
LUA
  $ON_LOAD "$NGINX" -p "$TMP/cache" -c "$TMP/cache/nginx.conf" 2>"$TMP/cache/stderr" &
  PIDS="$PIDS $!"
fi
$ON_PROXY "$NGINX" -p "$TMP/proxy" -c "$TMP/proxy/nginx.conf" 2>"$TMP/proxy/stderr" &
NGX_PID=$!
PIDS="$PIDS $NGX_PID"
HAP_PID=""
case " $PROXIES " in *" haproxy "*)
  # -db: foreground, no daemon; the access lines (ACCESS_LOG=on) go to its stdout, a file
  $ON_PROXY "$HAPROXY" -db -f "$TMP/haproxy/haproxy.cfg" >"$TMP/haproxy/access.log" 2>"$TMP/haproxy/stderr" &
  HAP_PID=$!
  PIDS="$PIDS $HAP_PID" ;;
esac
CDNCA_ADMIN_TOKEN="$TOKEN" $ON_LOAD "$BUILD/controld/controld" --listen "127.0.0.1:$CTL_PORT" \
  --db "$TMP/controld.db" >"$TMP/controld.log" 2>&1 &
PIDS="$PIDS $!"

wait_url() {  # URL [HOST]
  i=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: ${2:-bench.test}" "$1")" = 200 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "$1 did not answer 200" >&2; tail -n 20 "$TMP"/*.log "$TMP"/*/error.log >&2 || true; exit 1; }
    sleep 0.1
  done
}
wait_url "http://127.0.0.1:$CTL_PORT/healthz"
api() {  # METHOD PATH JSON
  curl -s -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data "$3" "http://127.0.0.1:$CTL_PORT$2"
}
api POST /v1/sites "{\"name\":\"bench\",\"hostnames\":[\"bench.test\"],\"origins\":[{\"level\":1,\"address\":\"127.0.0.1\",\"port\":$ORIGIN_PORT,\"scheme\":\"http\"}]}" >/dev/null
NODE_TOKEN=$(api POST /v1/nodes '{"name":"bench-node"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
# the same idle origin connections as nginx's keepalive 256 (older builds: their fixed 32)
NODE_KEEPALIVE=""
if "$BUILD/noded/noded" --help 2>&1 | grep -q -- --origin-keepalive; then
  NODE_KEEPALIVE="--origin-keepalive 256"
fi
CDNCA_NODE_TOKEN="$NODE_TOKEN" $ON_PROXY "$BUILD/noded/noded" --controld "http://127.0.0.1:$CTL_PORT" \
  --listen "127.0.0.1:$NODE_PORT" --admin-listen "127.0.0.1:$NODE_ADMIN" \
  --state-dir "$TMP/node" --name bench-node --proxy-threads "$THREADS" $NODE_KEEPALIVE $NODE_UNIX \
  --log-level "$NODE_LOG_LEVEL" --log-file "$TMP/noded.log" >"$TMP/noded.out" 2>&1 &
NODE_PID=$!
PIDS="$PIDS $NODE_PID"
wait_url "http://127.0.0.1:$ORIGIN_PORT/"; wait_url "http://127.0.0.1:$NGX_PORT/"
wait_url "http://127.0.0.1:$NODE_PORT/"
[ -z "$HAP_PID" ] || wait_url "http://127.0.0.1:$HAP_PORT/"
[ -z "$CACHE" ] || wait_url "http://127.0.0.1:$CACHE_PORT/"
[ -z "$NGX_UNIX" ] || wait_url "http://127.0.0.1:$CACHE_NGX_PORT/"
port_of() { case "$1" in nginx) echo "$NGX_PORT" ;; haproxy) echo "$HAP_PORT" ;; noded) echo "$NODE_PORT" ;; noded-cache) echo "$CACHE_PORT" ;; nginx-cache) echo "$CACHE_NGX_PORT" ;; esac; }
pid_of() { case "$1" in nginx|nginx-cache) echo "$NGX_PID" ;; haproxy) echo "$HAP_PID" ;; noded|noded-cache) echo "$NODE_PID" ;; esac; }
# the wrk script of a proxy: unique URIs (all misses) through the cache
# PACE_MS > 0: each wrk connection waits between its requests (wrk's delay()) a random time of
# mean PACE_MS (uniform, 0 to twice it, so that the connections do not send in step)
if [ "$PACE_MS" -gt 0 ]; then
  echo "function delay() return math.random(0, 2 * $PACE_MS) end" >"$TMP/pace.lua"
  [ ! -f "$TMP/cache/miss.lua" ] || cat "$TMP/pace.lua" >>"$TMP/cache/miss.lua"
fi
script_of() {
  case "$1" in
    *-cache) echo "-s $TMP/cache/miss.lua" ;;
    *) [ "$PACE_MS" -eq 0 ] || echo "-s $TMP/pace.lua" ;;
  esac
}
path_of() { case "$1" in 1k) echo / ;; 1m) echo /1m.bin ;; esac; }
bytes_of() { case "$1" in 1k) echo 1024 ;; 1m) echo 1048576 ;; esac; }
for who in $PROXIES; do
  case "$who" in nginx|haproxy|noded|noded-cache|nginx-cache) ;; *) echo "PROXIES: nginx, haproxy, noded, noded-cache, nginx-cache, not $who" >&2; exit 2 ;; esac
  for z in $SIZES; do  # each proxy passes each body whole
    got=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -H 'Host: bench.test' "http://127.0.0.1:$(port_of "$who")$(path_of "$z")")
    [ "$got" = "200 $(bytes_of "$z")" ] || { echo "$who $(path_of "$z"): got $got" >&2; exit 1; }
  done
done
for who in $PROXIES; do  # through the cache, one URI asked twice is a miss both times
  case "$who" in *-cache) ;; *) continue ;; esac
  for i in 1 2; do
    st=$(curl -s -o /dev/null -D - -H 'Host: bench.test' "http://127.0.0.1:$(port_of "$who")/?miss=check" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-cache-status" {print $2}')
    [ "$st" = MISS ] || { echo "$who: request $i of one URI was $st, not MISS" >&2; exit 1; }
  done
done

# CPU ticks (user + system; SYS=1: system only) of a process and its children (nginx: master +
# workers)
cpu_ticks() {
  t=0
  for p in $1 $(pgrep -P "$1" | tr '\n' ' '); do
    v=$(awk -v s="${SYS:-0}" '{sub(/.*\) /, ""); print s ? $13 : $12 + $13}' "/proc/$p/stat" 2>/dev/null || echo 0)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
HZ=$(getconf CLK_TCK)
# busy and total jiffies of one core (all processes on it, ours and anybody else's)
core_ticks() {
  awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat
}
# TCP segments sent on this host so far (every loopback segment is sent once and received once),
# and context switches on every core so far
tcp_segs() {
  awk '$1 == "Tcp:" && $2 ~ /^[0-9]+$/ {print $12}' /proc/net/snmp
}
ctxt() {
  awk '$1 == "ctxt" {print $2}' /proc/stat
}
run() {  # PORT PID PATH NAME -> "req/s p99_us cpu_us_per_request proxy_busy_percent kernel_percent segments/switches_per_request [cores busy, load core us per request]"
  scr=$(script_of "$4")
  c0=$(cpu_ticks "$2"); k0=$(SYS=1 cpu_ticks "$2"); t0=$(date +%s%N); url="http://127.0.0.1:$1$3"
  g0=$(tcp_segs); x0=$(ctxt)
  if [ "$PIN" = on ]; then set -- "$1" "$2" $(core_ticks "$PROXY_CPU") $(core_ticks "$LOAD_CPU"); fi
  $ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d"$DURATION" --latency -H 'Host: bench.test' $scr "$url" >"$TMP/wrk.out" 2>&1
  c1=$(cpu_ticks "$2"); k1=$(SYS=1 cpu_ticks "$2"); t1=$(date +%s%N); g1=$(tcp_segs); x1=$(ctxt)
  n=$(awk '/requests in/ {print $1}' "$TMP/wrk.out")
  cores=""
  if [ "$PIN" = on ]; then
    # the load core's busy time per request: what the proxy's way of sending costs wrk and the
    # origin (on loopback a receiver's TCP work runs in its sender's system call)
    cores=$(echo "$3 $4 $5 $6 $(core_ticks "$PROXY_CPU") $(core_ticks "$LOAD_CPU")" |
      awk -v hz="$HZ" -v n="$n" '{printf "cores busy: proxy %.0f%%, load %.0f%% (%.2f us per request)", ($5 - $1) * 100 / ($6 - $2 + 1e-9), ($7 - $3) * 100 / ($8 - $4 + 1e-9), ($7 - $3) * 1000000 / hz / n}')
  fi
  segs=$(awk -v a="$g0" -v b="$g1" -v c="$x0" -v d="$x1" -v n="$n" 'BEGIN {printf "%.2f/%.2f", (b - a) / n, (d - c) / n}')
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$TMP/wrk.out")
  p99=$(awk '$1 == "99%" {print $2}' "$TMP/wrk.out" | to_us)
  cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v n="$n" 'BEGIN {printf "%.2f", (b - a) * 1000000 / hz / n}')
  # the proxy's CPU time over the wall time of the round: 100 = one core kept busy
  busy=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v t="$((t1 - t0))" 'BEGIN {printf "%.0f", (b - a) / hz * 1e11 / t}')
  errs=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' "$TMP/wrk.out")
  [ -z "$errs" ] || echo "  ($1: $errs)" >&2
  kern=$(awk -v a="$c0" -v b="$c1" -v c="$k0" -v d="$k1" 'BEGIN {printf "%.0f", (d - c) * 100 / (b - a + 1e-9)}')
  echo "$rps $p99 $cpu $busy $kern $segs $cores"
}

if [ "$CPU_QUOTA" -gt 0 ]; then  # each proxy process (nginx: master and worker) in its own group
  capped=""
  for who in $PROXIES; do
    pid=$(pid_of "$who")
    case " $capped " in *" $pid "*) continue ;; esac
    cpu_cap "cdnca-bench-$$-$pid" "$CPU_QUOTA" $pid $(pgrep -P "$pid" | tr '\n' ' ') ||
      { echo "CPU_QUOTA: could not cap $who's CPU (root and a cgroup cpu controller needed)" >&2; exit 2; }
    capped="$capped $pid"
  done
fi
echo "mode: PIN=$PIN (proxies on ${ON_PROXY:-any core}, wrk/origin/controld on ${ON_LOAD:-any core}), proxy threads $THREADS, wrk -t$WRK_THREADS -c$CONNS -d$DURATION, ROUNDS=$ROUNDS, ACCESS_LOG=$ACCESS_LOG, CPU_QUOTA=$CPU_QUOTA"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for who in $PROXIES; do
  $ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d2s -H 'Host: bench.test' "http://127.0.0.1:$(port_of "$who")/" >/dev/null 2>&1
done

for z in $SIZES; do
  for who in $PROXIES; do : >"$TMP/$who.$z.txt"; done
  r=1
  while [ $r -le "$ROUNDS" ]; do
    # rotate which one goes first, so none always runs on a warmer machine
    order=$(echo $PROXIES | awk -v r="$r" '{for (i = 0; i < NF; i++) printf "%s ", $((i + r - 1) % NF + 1)}')
    for who in $order; do
      set -- $(run "$(port_of "$who")" "$(pid_of "$who")" "$(path_of "$z")" "$who")
      echo "$1 $2 $3 $5" >>"$TMP/$who.$z.txt"
      mib=$(awk -v r="$1" -v b="$(bytes_of "$z")" 'BEGIN {printf "%.0f", r * b / 1048576}')
      echo "$z round $r $who: $1 req/s ($mib MiB/s of bodies), p99 $2 us, $3 us CPU per request ($5% in the kernel), proxy busy $4% of a core, TCP segments/context switches per request $6${7:+, $7 $8 $9 ${10} ${11} ${12} ${13} ${14} ${15} ${16}} (load $(cut -d' ' -f1 /proc/loadavg))"
    done
    r=$((r + 1))
  done
  : >"$TMP/med.$z.txt"
  for who in $PROXIES; do
    rps=$(awk '{print $1}' "$TMP/$who.$z.txt" | median); p99=$(awk '{print $2}' "$TMP/$who.$z.txt" | median)
    cpu=$(awk '{print $3}' "$TMP/$who.$z.txt" | median); kern=$(awk '{print $4}' "$TMP/$who.$z.txt" | median)
    echo "$who $rps $p99 $cpu" >>"$TMP/med.$z.txt"
    echo "$z median $who: $rps req/s ($(awk -v r="$rps" -v b="$(bytes_of "$z")" 'BEGIN {printf "%.0f", r * b / 1048576}') MiB/s), p99 $p99 us, $cpu us CPU per request, $kern% of it in the kernel"
  done
  # noded against the better of the others on each figure (higher req/s, lower p99 and CPU)
  awk -v z="$z" -v q="$CPU_QUOTA" '$1 == "noded" {n = 1; r = $2; p = $3; c = $4; next}
    $1 == "noded-cache" {m = 1; mc = $4; next}
    $1 == "nginx-cache" {gcc = $4; next}
    $1 == "nginx" {gc = $4}
    {if (!o || $2 > br) {br = $2; brw = $1} if (!o || $3 < bp) {bp = $3; bpw = $1}
     if (!o || $4 < bc) {bc = $4; bcw = $1} o = 1}
    END {if (!n || !o) exit
      printf "%s ratios of medians, noded / the better of the others:\n", z
      printf "  req/s %.2f (vs %s; goal >= 1.0)\n  p99 %.2f (vs %s; goal <= 1.0)\n", r / br, brw, p / bp, bpw
      if (q > 0) printf "  (each proxy capped at %d%% of a core: req/s is the throughput at equal CPU, p99 the cap'"'"'s 100 ms periods)\n", q
      printf "  CPU per request %.2f (vs %s; goal <= 0.75 at 1k; the figure least moved by other load)\n", c / bc, bcw
      if (m && gc) printf "  noded-cache: CPU per miss behind the cache %.2f of nginx proxying directly (goal <= 1.0)\n", mc / gc
      if (m && gcc) printf "  noded-cache: CPU per miss %.2f of nginx in its place behind the same cache\n", mc / gcc}' "$TMP/med.$z.txt"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# System calls per request: strace -c -f on the whole proxy process (all threads; nginx: the
# worker) during one wrk run, divided by the requests wrk counted. strace slows the proxy down
# many times over, so this run's req/s mean nothing; the counts per request are the figure.
syscalls() {  # NAME SIZE
  pid=$(pid_of "$1"); case "$1" in nginx*) pid=$(pgrep -P "$NGX_PID" | head -n 1) ;; esac
  strace -c -f -p "$pid" -o "$TMP/strace.$1.$2" 2>/dev/null &
  st=$!
  sleep 1  # attached to every thread
  $ON_LOAD wrk -t"$WRK_THREADS" -c"$CONNS" -d"$SYSCALL_DURATION" -H 'Host: bench.test' "http://127.0.0.1:$(port_of "$1")$(path_of "$2")" >"$TMP/wrk.out" 2>&1
  kill -INT "$st"; wait "$st" 2>/dev/null || true
  n=$(awk '/requests in/ {print $1}' "$TMP/wrk.out")
  echo "$2 $1: system calls per request over $n requests (strace -c -f):"
  awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" {c = $4; name = $NF; tot += c; line[name] = c}
    END {for (k in line) if (line[k] / n >= 0.005) printf "    %-16s %8.3f\n", k, line[k] / n
         printf "    %-16s %8.3f\n", "total", tot / n}' "$TMP/strace.$1.$2" | sort -k2 -rn
}
if [ "$SYSCALLS" = on ]; then
  for z in $SIZES; do
    for who in $PROXIES; do syscalls "$who" "$z"; done
  done
fi

# RSS (kB) of a process and its children (nginx: master + workers)
rss_tree() {
  pids="$1 $(pgrep -P "$1" | tr '\n' ' ')"
  t=0
  for p in $pids; do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# Hold IDLE idle connections to a port for a moment, print how many are still open then.
hold_idle() {  # PORT PID NAME
  python3 - "$1" "$2" "$3" "$IDLE" "$(rss_tree "$2")" <<'PY'
import resource, socket, subprocess, sys, time
port, pid, name, n, before = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
socks, failed = [], 0
deadline = time.monotonic() + 60
for _ in range(n):
    if time.monotonic() > deadline:
        break
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    except OSError:
        failed += 1
time.sleep(3)
def rss():
    out = subprocess.run(["sh", "-c", "p=%s; for c in $p $(pgrep -P $p); do awk '/^VmRSS:/ {print $2}' /proc/$c/status; done" % pid],
                         capture_output=True, text=True).stdout.split()
    return sum(int(x) for x in out)
after = rss()
# how many are still open (not closed by the server): a non-blocking peek
import select
open_n = 0
for s in socks:
    s.setblocking(False)
    try:
        open_n += s.recv(1, socket.MSG_PEEK) is None
    except BlockingIOError:
        open_n += 1
    except OSError:
        pass
print("%s: %d idle connections opened (%d failed), %d still open after 3 s; RSS %.1f MiB before, %.1f MiB with them (+%.1f KiB per connection)"
      % (name, len(socks), failed, open_n, before / 1024, after / 1024, (after - before) / max(1, len(socks))))
for s in socks:
    s.close()
PY
}
[ "$IDLE" -gt 0 ] || exit 0  # IDLE=0: no idle-connection part
for who in $PROXIES; do
  case "$who" in *-cache) continue ;; esac  # the idle connections would be the cache's
  hold_idle "$(port_of "$who")" "$(pid_of "$who")" "$who"
  sleep 1
done
