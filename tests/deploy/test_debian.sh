#!/usr/bin/env bash
# The Debian packages end to end (docs/design.md#debian-packages), as root on a machine without a
# cdnca installation (CI; .ci/run runs it after the plain tests, never ctest: it installs and
# purges system packages):
#   1. build them with dpkg-buildpackage -us -uc -b in a copy of the tree under a temporary
#      directory; lintian must report no error; the package version is CMake's project VERSION;
#   2. apt-get install both .deb files; the user cdnca, the directories and their modes, the
#      conffiles, the units and socket units (installed, not enabled), the logrotate files;
#   3. controld --check-config, as the unit runs it (user cdnca, its EnvironmentFile), refuses the
#      shipped placeholder admin token and accepts a token from openssl rand -hex 32;
#   4. controld and noded started as user cdnca with the units' command lines (systemd is not
#      PID 1 in CI) plus loopback ports; an enrolment key made with POST /v1/enrolment-keys
#      (max_uses 1) as CDNCA_ENROL_KEY in /etc/cdnca/noded.env: noded enrols at its first start
#      and keeps its node token in /var/lib/cdnca-node/node-token (600 cdnca:cdnca), the key is
#      used up; a site on a local origin (python3 -m http.server); one request proxied through
#      noded returns the origin's file; with the key line removed, noded starts again on the kept
#      token and proxies again;
#   5. a reinstall keeps the edited conffiles; apt-get remove keeps configuration and state;
#      apt-get purge removes /etc/cdnca, /var/lib/cdnca, /var/lib/cdnca-node and the logs.
# CDNCA_DEB_DIR=DIR takes the .deb and .changes files built there instead of building (step 1's
# build and lintian are then skipped).
# Fails (exit 1) on any difference, and when it cannot run (not root, tools missing, an
# installation present). Cleans up on every exit: processes, packages, the user cdnca if it made
# it, the temporary directory. Prints how long each step took.
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
t0=$SECONDS
step_t=$SECONDS
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { # what was done, with the time it took
  echo "test_debian: $* ($((SECONDS - step_t)) s)"
  step_t=$SECONDS
}

[ "$(id -u)" = 0 ] || fail "run as root: the test installs and purges packages"
for tool in dpkg-buildpackage dh lintian apt-get python3 curl openssl setpriv; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is missing (apt-get install dpkg-dev debhelper lintian python3 curl openssl)"
done
for p in cdnca-controld cdnca-noded; do
  if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
    fail "$p is installed here; this test installs and purges the packages: run it on a machine without cdnca"
  fi
done
for d in /etc/cdnca /var/lib/cdnca /var/lib/cdnca-node /var/log/cdnca /var/log/cdnca-node; do
  [ ! -e "$d" ] || fail "$d exists; this test would remove it: run it on a machine without cdnca"
done

tmp="$(mktemp -d /tmp/cdnca-deb.XXXXXX)"
made_user=0
getent passwd cdnca >/dev/null || made_user=1
pids=()
installed=0
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    for log in "$tmp"/*.log; do
      [ -f "$log" ] || continue
      echo "---- $(basename "$log") (last lines) ----" >&2
      tail -n 30 "$log" >&2
    done
  fi
  if [ "$installed" = 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq cdnca-controld cdnca-noded >/dev/null 2>&1 || true
  fi
  if [ "$made_user" = 1 ] && getent passwd cdnca >/dev/null; then
    deluser --quiet --system cdnca >/dev/null 2>&1 || true
    getent group cdnca >/dev/null && { delgroup --quiet --system cdnca >/dev/null 2>&1 || true; }
  fi
  rm -rf "$tmp"
  echo "test_debian: $([ "$rc" = 0 ] && echo PASS || echo FAIL) in $((SECONDS - t0)) s"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_http() { # url what
  for _ in $(seq 1 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.2; done
  fail "$2 did not answer on $1"
}
mode_owner() { stat -c '%a %U:%G' "$1"; }
# the unit's line KEY= of /lib/systemd/system/UNIT, split into words
unit_cmd() { sed -n "s/^$2=//p" "/lib/systemd/system/$1" | head -n 1; }
# exec_as_unit UNIT ARGS...: exec the command line ARGS as the unit runs it (user cdnca, its
# EnvironmentFile's KEY=VALUE lines in a clean environment, its WorkingDirectory). It replaces
# the calling shell: call it in ( ... ), so that ( ... ) & gives the daemon's own pid in $!.
exec_as_unit() {
  local unit="$1" envfile wd line envs=(PATH=/usr/sbin:/usr/bin:/sbin:/bin)
  shift
  envfile="$(unit_cmd "$unit" EnvironmentFile)"
  wd="$(unit_cmd "$unit" WorkingDirectory)"
  while IFS= read -r line; do
    [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && envs+=("$line")
  done <"$envfile"
  cd "$wd"
  exec env -i "${envs[@]}" setpriv --reuid=cdnca --regid=cdnca --init-groups -- "$@"
}
# stop PID NAME: SIGTERM, and the daemon must exit 0 within 30 s
stop() {
  local rc=0
  kill -TERM "$1"
  for _ in $(seq 1 150); do kill -0 "$1" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$1" 2>/dev/null && fail "$2 did not stop within 30 s of SIGTERM"
  wait "$1" || rc=$?
  [ "$rc" = 0 ] || fail "$2 exited $rc after SIGTERM"
}

# ---- 1. build ----
src="$tmp/src"
mkdir -p "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$top" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$src"
else
  tar -C "$top" --exclude='./build*' --exclude=node_modules --exclude=./demo-state -cf - . | tar -xf - -C "$src"
fi
version="$(cd "$src" && dpkg-parsechangelog -S Version)"
cmake_version="$(sed -n 's/^project(cdnca VERSION \([0-9.]*\) .*/\1/p' "$src/CMakeLists.txt")"
[ "$version" = "$cmake_version" ] ||
  fail "debian/changelog says $version, CMakeLists.txt's project VERSION $cmake_version"
debs="${CDNCA_DEB_DIR:-$tmp}"
if [ -z "${CDNCA_DEB_DIR:-}" ]; then
  echo "test_debian: building the packages $version (dpkg-buildpackage -us -uc -b)"
  (cd "$src" && nice dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$tmp/build.log" 2>&1) ||
    fail "dpkg-buildpackage failed (build.log above)"
  step "built"
fi
controld_deb="$debs/cdnca-controld_${version}_$(dpkg --print-architecture).deb"
noded_deb="$debs/cdnca-noded_${version}_$(dpkg --print-architecture).deb"
[ -f "$controld_deb" ] && [ -f "$noded_deb" ] || fail "no .deb files in $debs: $(ls "$debs")"
if [ -z "${CDNCA_DEB_DIR:-}" ]; then
  lintian --fail-on error "$debs"/cdnca_"${version}"_*.changes >"$tmp/lintian.out" 2>&1 || {
    cat "$tmp/lintian.out"
    fail "lintian reports errors"
  }
  grep -v 'running with root privileges' "$tmp/lintian.out" | sed 's/^/test_debian: lintian: /' || true
  step "lintian: no error"
fi

# ---- 2. install ----
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$controld_deb" "$noded_deb" >"$tmp/install.log" 2>&1 ||
  fail "apt-get install of the packages failed (install.log above)"
step "installed"
for p in cdnca-controld cdnca-noded; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p")" = installed ] || fail "$p is not installed"
done
getent passwd cdnca >/dev/null || fail "no user cdnca"
uid="$(id -u cdnca)"
[ "$uid" -lt 1000 ] || fail "cdnca is not a system user (uid $uid)"
[ "$(getent passwd cdnca | cut -d: -f7)" = /usr/sbin/nologin ] || fail "cdnca has a login shell"
for d in /var/lib/cdnca /var/lib/cdnca-node /var/log/cdnca /var/log/cdnca-node; do
  [ "$(mode_owner "$d")" = "750 cdnca:cdnca" ] || fail "$d is $(mode_owner "$d"), not 750 cdnca:cdnca"
done
for f in controld noded; do
  [ "$(mode_owner /etc/cdnca/$f.env)" = "600 root:root" ] || fail "/etc/cdnca/$f.env is $(mode_owner /etc/cdnca/$f.env)"
  [ "$(mode_owner /etc/cdnca/$f.json)" = "644 root:root" ] || fail "/etc/cdnca/$f.json is $(mode_owner /etc/cdnca/$f.json)"
  grep -qx "/etc/cdnca/$f.env" "/var/lib/dpkg/info/cdnca-$f.conffiles" || fail "/etc/cdnca/$f.env is not a conffile"
  grep -qx "/etc/cdnca/$f.json" "/var/lib/dpkg/info/cdnca-$f.conffiles" || fail "/etc/cdnca/$f.json is not a conffile"
  grep -q "^ExecStart=/usr/sbin/$f " "/lib/systemd/system/$f.service" || fail "$f.service does not start /usr/sbin/$f"
  [ ! -e "/etc/systemd/system/multi-user.target.wants/$f.service" ] || fail "$f.service is enabled"
  [ -f "/lib/systemd/system/$f.socket" ] || fail "$f.socket is not installed"
  [ ! -e "/etc/systemd/system/sockets.target.wants/$f.socket" ] || fail "$f.socket is enabled"
  if command -v systemctl >/dev/null 2>&1; then
    state="$(systemctl is-enabled "$f.service" 2>&1 || true)"
    [ "$state" = disabled ] || fail "systemctl is-enabled $f.service: $state, not disabled"
  fi
  [ -f "/etc/logrotate.d/cdnca-$f" ] || fail "no /etc/logrotate.d/cdnca-$f"
  if command -v logrotate >/dev/null 2>&1 || [ -x /usr/sbin/logrotate ]; then
    out="$("$(command -v logrotate || echo /usr/sbin/logrotate)" -d -s "$tmp/logrotate.state" "/etc/logrotate.d/cdnca-$f" 2>&1)" ||
      { echo "$out"; fail "logrotate -d /etc/logrotate.d/cdnca-$f"; }
    if echo "$out" | grep -qi '^error'; then echo "$out"; fail "logrotate -d /etc/logrotate.d/cdnca-$f reported errors"; fi
  fi
  man -w "$f" >/dev/null 2>&1 || [ -f "/usr/share/man/man8/$f.8.gz" ] || fail "no man page $f(8)"
done
step "checked what the packages installed"

# ---- 3. controld --check-config as the unit runs it ----
read -ra check_cmd <<<"$(unit_cmd controld.service ExecStartPre)"
[ "${check_cmd[1]:-}" = --check-config ] || fail "controld.service's ExecStartPre is not --check-config: ${check_cmd[*]}"
if (exec_as_unit controld.service "${check_cmd[@]}") >"$tmp/check.out" 2>&1; then
  cat "$tmp/check.out"
  fail "controld --check-config accepted the shipped placeholder admin token"
fi
grep -q 'CDNCA_ADMIN_TOKEN is refused' "$tmp/check.out" || { cat "$tmp/check.out"; fail "the refusal does not name CDNCA_ADMIN_TOKEN"; }
grep -q 'openssl rand -hex 32' "$tmp/check.out" || { cat "$tmp/check.out"; fail "the refusal does not say how to make a token"; }
admin_token="$(openssl rand -hex 32)"
sed -i "s/^CDNCA_ADMIN_TOKEN=.*/CDNCA_ADMIN_TOKEN=$admin_token/" /etc/cdnca/controld.env
(exec_as_unit controld.service "${check_cmd[@]}") >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; fail "controld --check-config with a strong token"; }
grep -q 'configuration OK' "$tmp/check.out" || { cat "$tmp/check.out"; fail "no 'configuration OK'"; }
step "controld --check-config refuses the placeholder, accepts a strong token"

# ---- 4. controld and noded as the units run them; one request through noded ----
cport="$(free_port)"
nport="$(free_port)"
aport="$(free_port)"
oport="$(free_port)"
api="http://127.0.0.1:$cport"
read -ra controld_cmd <<<"$(unit_cmd controld.service ExecStart)"
(exec_as_unit controld.service "${controld_cmd[@]}" --listen "127.0.0.1:$cport") >"$tmp/controld.log" 2>&1 &
controld_pid=$!
pids+=("$controld_pid")
wait_http "$api/healthz" controld
[ "$(stat -c %U /var/lib/cdnca/controld.db)" = cdnca ] || fail "controld.db is not owned by cdnca"
call() { # method path [json]
  curl -fsS -X "$1" -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
    "$api$2" ${3:+-d "$3"}
}
json_get() { # key: that member of the JSON object on stdin
  python3 -c 'import json,sys; v = json.load(sys.stdin)[sys.argv[1]]; print("" if v is None else v)' "$1"
}
# key_field FIELD: that field of the enrolment key "package-test" in GET /v1/enrolment-keys
key_field() {
  call GET /v1/enrolment-keys | python3 -c 'import json,sys
print([k for k in json.load(sys.stdin)["enrolment_keys"] if k["name"] == "package-test"][0][sys.argv[1]])' "$1"
}
enrol_key="$(call POST /v1/enrolment-keys '{"name":"package-test","max_uses":1}' | json_get key)"
[[ "$enrol_key" =~ ^[0-9a-f]{64}$ ]] || fail "POST /v1/enrolment-keys gave no key"
# the node token line of the shipped file becomes the key (a set CDNCA_NODE_TOKEN would win)
sed -i "s|^CDNCA_NODE_TOKEN=.*|CDNCA_ENROL_KEY=$enrol_key|" /etc/cdnca/noded.env
grep -qx "CDNCA_ENROL_KEY=$enrol_key" /etc/cdnca/noded.env || fail "no CDNCA_ENROL_KEY line in /etc/cdnca/noded.env"
! grep -q '^CDNCA_NODE_TOKEN=' /etc/cdnca/noded.env || fail "/etc/cdnca/noded.env still sets CDNCA_NODE_TOKEN"

mkdir -p "$tmp/www"
body="cdnca package test $(openssl rand -hex 8)"
echo "$body" >"$tmp/www/index.txt"
python3 -m http.server "$oport" --bind 127.0.0.1 --directory "$tmp/www" >"$tmp/origin.log" 2>&1 &
origin_pid=$!
pids+=("$origin_pid")
wait_http "http://127.0.0.1:$oport/index.txt" "the origin"
call POST /v1/sites "{\"name\":\"package-test\",\"hostnames\":[\"package-test.cdnca.test\"],
  \"origins\":[{\"level\":1,\"address\":\"127.0.0.1\",\"port\":$oport,\"scheme\":\"http\"}]}" >/dev/null

noded_args=(--controld "$api" --listen "127.0.0.1:$nport" --admin-listen "127.0.0.1:$aport"
  --name edge-package-test)
read -ra noded_check <<<"$(unit_cmd noded.service ExecStartPre)"
read -ra noded_cmd <<<"$(unit_cmd noded.service ExecStart)"
# start_noded LOG: noded --check-config, then noded, as the unit runs them; sets noded_pid
start_noded() {
  (exec_as_unit noded.service "${noded_check[@]}" "${noded_args[@]}") >"$tmp/noded-check.out" 2>&1 ||
    { cat "$tmp/noded-check.out"; fail "noded --check-config"; }
  (exec_as_unit noded.service "${noded_cmd[@]}" "${noded_args[@]}") >"$tmp/$1" 2>&1 &
  noded_pid=$!
  pids+=("$noded_pid")
  wait_http "http://127.0.0.1:$aport/healthz" "noded's admin listener"
}
proxied() { # a request through noded returns the origin's file
  local got=""
  for _ in $(seq 1 100); do
    got="$(curl -s -H 'Host: package-test.cdnca.test' "http://127.0.0.1:$nport/index.txt" || true)"
    [ "$got" = "$body" ] && return 0
    sleep 0.2
  done
  fail "through noded: got '$got', expected '$body'"
}
token_file=/var/lib/cdnca-node/node-token
[ ! -e "$token_file" ] || fail "$token_file exists before noded's first start"
start_noded noded.log
proxied
[ -n "$(find /var/lib/cdnca-node -mindepth 1 ! -name node-token -print -quit)" ] || fail "noded cached nothing in /var/lib/cdnca-node"
for pid in "$controld_pid" "$noded_pid"; do
  [ "$(stat -c %U "/proc/$pid")" = cdnca ] || fail "pid $pid does not run as cdnca"
done
# the enrolment: the node exists under its name, the key is used up, the token kept 0600
[ -f "$token_file" ] || fail "noded enrolled but wrote no $token_file"
[ "$(mode_owner "$token_file")" = "600 cdnca:cdnca" ] ||
  fail "$token_file is $(mode_owner "$token_file"), not 600 cdnca:cdnca"
node_token="$(cat "$token_file")"
[[ -n "$node_token" && "$node_token" != "$enrol_key" ]] || fail "$token_file holds no node token"
call GET /v1/nodes | python3 -c 'import json,sys
sys.exit(0 if [n for n in json.load(sys.stdin)["nodes"] if n["name"] == "edge-package-test"] else 1)' ||
  fail "GET /v1/nodes does not list edge-package-test"
[ "$(key_field uses)" = 1 ] || fail "the enrolment key has $(key_field uses) uses, not 1"
[ "$(key_field state)" = used_up ] || fail "the enrolment key is $(key_field state), not used_up"
if grep -qF -e "$enrol_key" -e "$node_token" "$tmp/noded.log"; then fail "noded logged the key or the token"; fi
grep -q 'enrolling as .edge-package-test.' "$tmp/noded.log" || fail "noded did not say it enrolled"
stop "$noded_pid" noded
step "noded enrolled with an enrolment key, its token in $token_file"
# the key is no longer needed: without it noded starts on the kept token
sed -i '/^CDNCA_ENROL_KEY=/d' /etc/cdnca/noded.env
start_noded noded-restart.log
proxied
if grep -q 'enrolling as' "$tmp/noded-restart.log"; then fail "noded enrolled again on its second start"; fi
[ "$(cat "$token_file")" = "$node_token" ] || fail "the second start changed $token_file"
stop "$noded_pid" noded
stop "$controld_pid" controld
kill "$origin_pid"
wait "$origin_pid" 2>/dev/null || true
pids=()
left="$(ps -u cdnca -o pid=,args= || true)"
[ -z "$left" ] || fail "processes of cdnca still running: $left"
step "restarted without the key on the kept token: a request proxied through noded again"

# ---- 5. reinstall, remove, purge ----
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$controld_deb" "$noded_deb" >"$tmp/install.log" 2>&1 ||
  fail "reinstalling the packages failed (install.log above)"
grep -qx "CDNCA_ADMIN_TOKEN=$admin_token" /etc/cdnca/controld.env || fail "a reinstall lost the admin token"
! grep -q '^CDNCA_\(NODE_TOKEN\|ENROL_KEY\)=' /etc/cdnca/noded.env || fail "a reinstall restored the shipped noded.env"
[ "$(cat "$token_file" 2>/dev/null)" = "$node_token" ] || fail "a reinstall lost $token_file"
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq cdnca-controld cdnca-noded >"$tmp/remove.log" 2>&1 ||
  fail "apt-get remove failed (remove.log above)"
[ ! -e /usr/sbin/controld ] && [ ! -e /usr/sbin/noded ] || fail "the daemons are still there after remove"
for f in /etc/cdnca/controld.env /etc/cdnca/noded.env /var/lib/cdnca/controld.db "$token_file"; do
  [ -e "$f" ] || fail "apt-get remove removed $f (only purge may)"
done
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq cdnca-controld cdnca-noded >"$tmp/purge.log" 2>&1 ||
  fail "apt-get purge failed (purge.log above)"
installed=0
for d in /etc/cdnca /var/lib/cdnca /var/lib/cdnca-node /var/log/cdnca /var/log/cdnca-node \
  /etc/logrotate.d/cdnca-controld /etc/logrotate.d/cdnca-noded /lib/systemd/system/controld.service \
  /lib/systemd/system/noded.socket; do
  [ ! -e "$d" ] || fail "$d is still there after purge"
done
for p in cdnca-controld cdnca-noded; do
  if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
    fail "$p is still known to dpkg after purge"
  fi
done
getent passwd cdnca >/dev/null || fail "purge removed the system user cdnca (Debian keeps it)"
step "reinstall kept the token and the edited files, remove kept configuration and state, purge removed them"
