#!/usr/bin/env bash
# cdnca cluster demo (docs/design.md#cluster-mode) in one command, everything on loopback: a throwaway
# PostgreSQL 15 in a temp dir (Unix socket there, no TCP port), 3 controld replicas sharing its
# database, HAProxy in front of them for the API and the dashboard (health-checking GET /healthz),
# 2 noded nodes given all three replica URLs, two demo origins, and a demo site with a primary and
# a backup level. Prints what to try; Ctrl-C stops every process it started and removes the dir.
#
#   deploy/cluster/demo.sh               run until Ctrl-C (or SIGTERM)
#   deploy/cluster/demo.sh --duration S  run S seconds, then stop and clean up (exit 0)
#   deploy/cluster/demo.sh --check       start, check the API through HAProxy and a visitor
#                                        request through each node, stop and clean up (exit 0/1)
#
# CDNCA_BUILD=DIR uses an existing build (else it builds ./build first, as quickstart.sh does).
# Ports (all on 127.0.0.1) and timings can be changed with CDNCA_CLUSTER_DEMO_<NAME>, see below.
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
build="${CDNCA_BUILD:-$top/build}"

e() { # setting NAME, default: $CDNCA_CLUSTER_DEMO_NAME or the default
  local v="CDNCA_CLUSTER_DEMO_$1"
  printf %s "${!v:-$2}"
}
lb_port="$(e LB_PORT 7600)"                 # HAProxy: the API and the dashboard
stats_port="$(e STATS_PORT 7609)"           # HAProxy's own status page
cp_ports=("$(e CP1_PORT 7611)" "$(e CP2_PORT 7612)" "$(e CP3_PORT 7613)")
node_ports=("$(e NODE1_PORT 7681)" "$(e NODE2_PORT 7682)")          # visitors
node_admin_ports=("$(e NODE1_ADMIN_PORT 7691)" "$(e NODE2_ADMIN_PORT 7692)")
o1_port="$(e ORIGIN1_PORT 7651)"
o2_port="$(e ORIGIN2_PORT 7652)"
ttl_ms="$(e TTL_MS 6000)"                   # --lease-ttl-ms: a dead engine is replaced in ~8 s
probe_ms="$(e PROBE_MS 2000)"               # --probe-interval-ms

usage() {
  echo "usage: $0 [--duration SECONDS | --check]" >&2
  exit 2
}
mode=run
duration=0
while [ $# -gt 0 ]; do
  case "$1" in
  --duration)
    [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || usage
    mode=duration
    duration=$2
    shift 2
    ;;
  --check)
    mode=check
    shift
    ;;
  -h | --help) usage ;;
  *) usage ;;
  esac
done

say() { echo "cluster-demo: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if [ -z "${CDNCA_BUILD:-}" ]; then
  "$top/deploy/deps.sh" --build --demo --cluster
  cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
controld_bin="$build/controld/controld"
noded_bin="$build/noded/noded"
[ -x "$controld_bin" ] && [ -x "$noded_bin" ] || die "no controld/noded in $build"
haproxy_bin="$(command -v haproxy || echo /usr/sbin/haproxy)"
[ -x "$haproxy_bin" ] || die "HAProxy is needed (Debian package haproxy; deploy/deps.sh --cluster installs it)"
pgctl="$top/tests/pg/pgctl.sh"
# every port must be free: another server answering there would be taken for ours
for port in "$lb_port" "$stats_port" "${cp_ports[@]}" "${node_ports[@]}" "${node_admin_ports[@]}" \
  "$o1_port" "$o2_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "127.0.0.1:$port is in use (another demo?); choose ports with CDNCA_CLUSTER_DEMO_*_PORT"
  fi
done

# --- cleanup: every process started here, then PostgreSQL, then the directory ---------------
dir=""
pg_started=0
pg_pid=""
pids=()
stopping=0
cleanup() {
  [ "$stopping" = 1 ] && return
  stopping=1
  trap '' INT TERM
  local p left deadline
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # bounded: whatever has not stopped 10 s after SIGTERM (e.g. a SIGSTOPped replica) gets SIGKILL
  deadline=$((SECONDS + 10))
  while :; do
    left=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left+=("$p"); done
    [ ${#left[@]} -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "SIGKILL to ${left[*]} (still running 10 s after SIGTERM)"
      kill -CONT "${left[@]}" 2>/dev/null || true
      kill -KILL "${left[@]}" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$pg_started" = 1 ]; then
    "$pgctl" stop "$dir/pg" >/dev/null 2>&1 || true
    # pg_ctl detaches the server: wait (bounded) until its postmaster is really gone
    deadline=$((SECONDS + 60))
    while [ -n "$pg_pid" ] && kill -0 "$pg_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
    if [ -n "$pg_pid" ] && kill -0 "$pg_pid" 2>/dev/null; then
      say "PostgreSQL (pid $pg_pid) did not stop; SIGKILL"
      kill -KILL "$pg_pid" 2>/dev/null || true
    fi
  fi
  [ -n "$dir" ] && rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT # exit at once; the EXIT trap stops everything
trap 'exit 143' TERM

dir="$(mktemp -d "${TMPDIR:-/tmp}/cdnca-cluster.XXXXXX")"
# as root the PostgreSQL server runs as the postgres user and must reach $dir/pg
chmod 755 "$dir"
[ "${#dir}" -le 80 ] || die "$dir is too long for PostgreSQL's Unix socket; set TMPDIR shorter"

wait_http() { # url what [pid]: until it answers 200 (while pid runs), for 90 s at most
  local deadline=$((SECONDS + 90))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ -z "${3:-}" ] || kill -0 "$3" 2>/dev/null || die "$2 exited; see $dir/$2.log"
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1")" = 200 ] && return 0
    sleep 0.1
  done
  die "$2 did not come up ($1); logs in $dir"
}
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# --- PostgreSQL 15 (tests/pg/pgctl.sh: initdb --no-sync -A trust, socket in $dir/pg only) -----
say "starting PostgreSQL in $dir/pg"
"$pgctl" start "$dir/pg" >/dev/null || die "PostgreSQL did not start"
pg_started=1
pg_pid="$(head -1 "$dir/pg/data/postmaster.pid" 2>/dev/null || true)"
pgbin="$(command -v pg_config >/dev/null 2>&1 && pg_config --bindir || true)"
[ -x "$pgbin/psql" ] || pgbin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
"$pgbin/psql" -X -q -h "$dir/pg" -d postgres -c "CREATE DATABASE cdnca" || die "CREATE DATABASE failed"
db="host=$dir/pg dbname=cdnca"

admin_token="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
token_file="$dir/admin-token"
(umask 077 && echo "$admin_token" >"$token_file")
api="http://127.0.0.1:$lb_port"

# --- demo origins (the same as quickstart.sh) --------------------------------------------
python3 "$top/tests/integration/origin.py" --port "$o1_port" --name primary >"$dir/origin-1.log" 2>&1 &
o1_pid=$!
pids+=($!)
python3 "$top/tests/integration/origin.py" --port "$o2_port" --name backup >"$dir/origin-2.log" 2>&1 &
o2_pid=$!
pids+=($!)

# --- 3 controld replicas on one database -----------------------------------------------------
cp_pids=()
start_replica() { # index 0..2
  local i=$1 name="cp$(($1 + 1))"
  CDNCA_ADMIN_TOKEN="$admin_token" "$controld_bin" --listen "127.0.0.1:${cp_ports[$i]}" \
    --db "$db" --replica-name "$name" --lease-ttl-ms "$ttl_ms" --probe-interval-ms "$probe_ms" \
    >>"$dir/$name.log" 2>&1 &
  cp_pids[$i]=$!
  pids+=($!)
  echo "$!" >"$dir/$name.pid"
}
say "starting 3 controld replicas"
start_replica 0 # the first one migrates the new database; the others find it done
wait_http "http://127.0.0.1:${cp_ports[0]}/healthz" cp1 "${cp_pids[0]}"
start_replica 1
start_replica 2
wait_http "http://127.0.0.1:${cp_ports[1]}/healthz" cp2 "${cp_pids[1]}"
wait_http "http://127.0.0.1:${cp_ports[2]}/healthz" cp3 "${cp_pids[2]}"

# --- HAProxy in front of the replicas -------------------------------------------------------
cat >"$dir/haproxy.cfg" <<CFG
# cdnca cluster demo: only a replica whose GET /healthz answers 200 gets traffic
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client  60s
    timeout server  60s
    retries 2
    option redispatch
frontend cdnca
    bind 127.0.0.1:$lb_port
    default_backend controld
backend controld
    balance leastconn
    option httpchk GET /healthz
    http-check expect status 200
    # which replica answered, for the demo
    http-response set-header X-Cdnca-Replica %[srv_name]
    default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
    server cp1 127.0.0.1:${cp_ports[0]} check
    server cp2 127.0.0.1:${cp_ports[1]} check
    server cp3 127.0.0.1:${cp_ports[2]} check
listen stats
    bind 127.0.0.1:$stats_port
    stats enable
    stats uri /
    stats refresh 2s
CFG
"$haproxy_bin" -c -q -f "$dir/haproxy.cfg" || die "HAProxy refused $dir/haproxy.cfg"
"$haproxy_bin" -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
pids+=($!)
wait_http "$api/healthz" haproxy $!

call() { # method path [json]: the API through HAProxy
  if [ $# -ge 3 ]; then
    curl -sS --max-time 10 -X "$1" -H "Authorization: Bearer $admin_token" \
      -H 'Content-Type: application/json' "$api$2" -d "$3"
  else
    curl -sS --max-time 10 -X "$1" -H "Authorization: Bearer $admin_token" "$api$2"
  fi
}

# --- the demo site and 2 nodes, each given every replica ---------------------------------------
wait_http "http://127.0.0.1:$o1_port/__stats" origin-1 "$o1_pid"
wait_http "http://127.0.0.1:$o2_port/__stats" origin-2 "$o2_pid"
site_id="$(call POST /v1/sites "{\"name\":\"demo\",\"hostnames\":[\"demo.cdnca.test\"],\"failback\":\"auto\",
  \"health_check\":{\"enabled\":true,\"path\":\"/healthz\",\"timeout_ms\":1000},
  \"origins\":[{\"level\":1,\"address\":\"127.0.0.1\",\"port\":$o1_port,\"scheme\":\"http\"},
               {\"level\":2,\"address\":\"127.0.0.1\",\"port\":$o2_port,\"scheme\":\"http\"}]}" |
  jget 'd["id"]')" || die "creating the demo site failed"
controld_list="http://127.0.0.1:${cp_ports[0]},http://127.0.0.1:${cp_ports[1]},http://127.0.0.1:${cp_ports[2]}"
for i in 0 1; do
  name="edge-$((i + 1))"
  token="$(call POST /v1/nodes "{\"name\":\"$name\"}" | jget 'd["token"]')" || die "enrolling $name failed"
  CDNCA_NODE_TOKEN="$token" "$noded_bin" --controld "$controld_list" \
    --listen "127.0.0.1:${node_ports[$i]}" --admin-listen "127.0.0.1:${node_admin_ports[$i]}" \
    --state-dir "$dir/$name" --name "$name" >"$dir/$name.log" 2>&1 &
  pids+=($!)
  echo "$!" >"$dir/$name.pid"
done
wait_http "http://127.0.0.1:${node_admin_ports[0]}/healthz" edge-1 "$(cat "$dir/edge-1.pid")"
wait_http "http://127.0.0.1:${node_admin_ports[1]}/healthz" edge-2 "$(cat "$dir/edge-2.pid")"

# role of each replica, from its own /healthz: "engine", "replica" or "down"
role() {
  local r
  r="$(curl -s --max-time 1 "http://127.0.0.1:$1/healthz" |
    sed -n 's/.*"role": *"\([a-z]*\)".*/\1/p')" || true
  echo "${r:-down}"
}
roles() {
  local i out=""
  for i in 0 1 2; do out+="cp$((i + 1))=$(role "${cp_ports[$i]}") "; done
  echo "${out% }"
}

if [ "$mode" = check ]; then
  # the API through HAProxy, and a visitor request through each node reaching the primary
  call GET '/v1/sites?limit=100' | jget '[s["name"] for s in d["sites"]]' | grep -q demo ||
    die "check: the API through HAProxy does not list the demo site"
  for i in 0 1; do
    ok=0
    deadline=$((SECONDS + 90))
    while [ "$SECONDS" -lt "$deadline" ]; do
      if curl -s --max-time 2 -H 'Host: demo.cdnca.test' "http://127.0.0.1:${node_ports[$i]}/" |
        grep -q '"origin": *"primary"'; then
        ok=1
        break
      fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || die "check: edge-$((i + 1)) did not reach the primary origin"
  done
  echo "check: ok ($(roles))"
  exit 0
fi

cat <<MSG

cdnca cluster demo is running (state and logs in $dir, removed on exit):
  PostgreSQL     $db          (Unix socket only)
  replicas       cp1 http://127.0.0.1:${cp_ports[0]}  pid ${cp_pids[0]}
                 cp2 http://127.0.0.1:${cp_ports[1]}  pid ${cp_pids[1]}
                 cp3 http://127.0.0.1:${cp_ports[2]}  pid ${cp_pids[2]}
                 lease ttl ${ttl_ms} ms, probe rounds every ${probe_ms} ms
  HAProxy        API $api   admin token in $token_file
  dashboard      $api/ui/   (paste the admin token)
  HAProxy status http://127.0.0.1:$stats_port/
  nodes          edge-1 http://127.0.0.1:${node_ports[0]}, edge-2 http://127.0.0.1:${node_ports[1]}
                 (each given --controld $controld_list)
  origins        primary 127.0.0.1:$o1_port (level 1), backup 127.0.0.1:$o2_port (level 2)
  roles now      $(roles)

Try:
  curl -s -D - -o /dev/null $api/healthz | grep -i x-cdnca-replica     # which replica answered
  curl -H "Authorization: Bearer \$(cat $token_file)" $api/v1/sites/$site_id/status
  curl -H 'Host: demo.cdnca.test' http://127.0.0.1:${node_ports[0]}/          # served by "primary"
  curl -H 'Host: demo.cdnca.test' http://127.0.0.1:${node_ports[1]}/
  for p in ${cp_ports[*]}; do curl -s http://127.0.0.1:\$p/healthz; echo; done   # who is the engine
  kill -9 \$(cat $dir/cp1.pid)       # kill a replica (the engine, say): within ~$((ttl_ms * 4 / 3000 + 1)) s another one
      # is the engine (this script prints it), HAProxy drops the dead one, the nodes move on
  curl -X POST -d '{"status":503}' http://127.0.0.1:$o1_port/__ctl        # break the primary
      # the new engine switches the site to level 2; requests go to "backup"
  curl -X POST -d '{"status":200}' http://127.0.0.1:$o1_port/__ctl        # repair: auto failback
  curl -H "Authorization: Bearer \$(cat $token_file)" -H 'Content-Type: application/json' -X PATCH $api/v1/sites/$site_id -d '{"hostnames":["demo.cdnca.test","www.cdnca.test"]}'
  curl -H 'Host: www.cdnca.test' http://127.0.0.1:${node_ports[1]}/           # the change reached the nodes

Ctrl-C stops everything.
MSG

# Watch the replicas and say when the engine or a replica's state changes (until Ctrl-C, or the
# --duration). A replica killed by hand is not restarted: the demo shows the others carrying on.
start_s=$SECONDS
last="$(roles)"
while [ "$mode" = run ] || [ $((SECONDS - start_s)) -lt "$duration" ]; do
  sleep 1 &
  wait $! || true
  now="$(roles)"
  if [ "$now" != "$last" ]; then
    echo "$(date -u +%H:%M:%S) roles: $now"
    last=$now
  fi
done
exit 0
