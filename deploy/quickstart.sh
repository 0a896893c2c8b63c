#!/usr/bin/env bash
# cdnca quick start: build, then run controld (embedded SQLite), one noded and two demo
# origins on loopback, create a demo site with two levels, and print what to try.
# Everything stays on 127.0.0.1 and stops on Ctrl-C.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
build="${CDNCA_BUILD:-$top/build}"   # CDNCA_BUILD: use an existing build, build nothing
state="${CDNCA_DEMO_DIR:-$top/demo-state}"
api_port="${CDNCA_DEMO_API_PORT:-7400}"
node_port="${CDNCA_DEMO_NODE_PORT:-7480}"
node_admin_port="${CDNCA_DEMO_NODE_ADMIN_PORT:-7401}"
o1_port="${CDNCA_DEMO_ORIGIN1_PORT:-7501}"
o2_port="${CDNCA_DEMO_ORIGIN2_PORT:-7502}"

[ -n "${CDNCA_BUILD:-}" ] || "$top/deploy/deps.sh" --build --demo

# every port must be free: on a taken one the demo would talk to whatever answers there
taken="$(python3 - "$api_port" "$node_port" "$node_admin_port" "$o1_port" "$o2_port" <<'PY'
import socket, sys
ports = [("API", "controld's API"), ("NODE", "noded's visitor port"),
         ("NODE_ADMIN", "noded's admin port"), ("ORIGIN1", "the primary demo origin"),
         ("ORIGIN2", "the backup demo origin")]
for (var, what), port in zip(ports, sys.argv[1:]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(port)))
    except OSError as e:
        print("  port %s (%s): %s; stop what holds it or set CDNCA_DEMO_%s_PORT"
              % (port, what, e.strerror, var))
    finally:
        s.close()
PY
)"
if [ -n "$taken" ]; then
  echo "quickstart: a port the demo needs is taken (another program, or a demo still running):" >&2
  echo "$taken" >&2
  exit 1
fi

if [ -z "${CDNCA_BUILD:-}" ]; then
  cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
mkdir -p "$state"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT  # exit at once (the EXIT trap stops everything), not after wait -n
trap 'exit 143' TERM

token_file="$state/admin-token"
if [ ! -s "$token_file" ]; then
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_file"
  chmod 600 "$token_file"
fi
ADMIN_TOKEN="$(cat "$token_file")"
api="http://127.0.0.1:$api_port"

call() { # method path [json]
  if [ $# -ge 3 ]; then
    curl -sS -X "$1" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' "$api$2" -d "$3"
  else
    curl -sS -X "$1" -H "Authorization: Bearer $ADMIN_TOKEN" "$api$2"
  fi
}
wait_http() { # url what
  for _ in $(seq 1 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "quickstart: $2 did not come up ($1)" >&2
  exit 1
}
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

python3 "$top/tests/integration/origin.py" --port "$o1_port" --name primary >"$state/origin1.log" 2>&1 &
pids+=($!)
python3 "$top/tests/integration/origin.py" --port "$o2_port" --name backup >"$state/origin2.log" 2>&1 &
pids+=($!)

CDNCA_ADMIN_TOKEN="$ADMIN_TOKEN" "$build/controld/controld" --listen "127.0.0.1:$api_port" \
  --db "$state/controld.db" --probe-interval-ms 2000 >"$state/controld.log" 2>&1 &
pids+=($!)
wait_http "$api/healthz" controld
wait_http "http://127.0.0.1:$o1_port/__stats" "origin 1"
wait_http "http://127.0.0.1:$o2_port/__stats" "origin 2"

if [ ! -s "$state/node-token" ]; then
  call POST /v1/nodes '{"name":"edge-demo-1"}' | jget 'd["token"]' >"$state/node-token"
  chmod 600 "$state/node-token"
fi
CDNCA_NODE_TOKEN="$(cat "$state/node-token")" "$build/noded/noded" --controld "$api" \
  --listen "127.0.0.1:$node_port" --admin-listen "127.0.0.1:$node_admin_port" \
  --state-dir "$state/noded" --name edge-demo-1 >"$state/noded.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$node_admin_port/healthz" noded

site_id="$(call GET '/v1/sites?limit=1000' | jget '[s["id"] for s in d["sites"] if s["name"]=="demo"][0] if any(s["name"]=="demo" for s in d["sites"]) else ""')"
if [ -z "$site_id" ]; then
  site_id="$(call POST /v1/sites "{\"name\":\"demo\",\"hostnames\":[\"demo.cdnca.test\"],\"failback\":\"auto\",
    \"health_check\":{\"enabled\":true,\"path\":\"/healthz\",\"timeout_ms\":1000},
    \"origins\":[{\"level\":1,\"address\":\"127.0.0.1\",\"port\":$o1_port,\"scheme\":\"http\"},
                 {\"level\":2,\"address\":\"127.0.0.1\",\"port\":$o2_port,\"scheme\":\"http\"}]}" | jget 'd["id"]')"
fi

cat <<MSG

cdnca demo is running (logs and state in $state):
  controld API   $api            admin token in $token_file
  dashboard      $api/ui/        (paste the admin token)
  noded proxy    http://127.0.0.1:$node_port   (site "demo", Host demo.cdnca.test)
  origins        primary 127.0.0.1:$o1_port (level 1), backup 127.0.0.1:$o2_port (level 2)

Try:
  curl -H 'Host: demo.cdnca.test' http://127.0.0.1:$node_port/            # served by "primary"
  curl -X POST -d '{"status":503}' http://127.0.0.1:$o1_port/__ctl        # break the primary
  curl -H "Authorization: Bearer \$(cat $token_file)" $api/v1/sites/$site_id/status
      # after 3 failed rounds (~6 s here) current_level is 2; requests go to "backup"
  curl -X POST -d '{"status":200}' http://127.0.0.1:$o1_port/__ctl        # repair: auto failback
  curl -H "Authorization: Bearer \$(cat $token_file)" $api/v1/sites/$site_id/messages

Ctrl-C stops everything.
MSG
wait -n "${pids[@]}" || true
echo "quickstart: a process exited; see logs in $state" >&2
exit 1
