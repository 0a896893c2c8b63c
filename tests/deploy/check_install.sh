#!/usr/bin/env bash
# `cmake --install` into a DESTDIR, as a packager runs it: the daemons land in sbin and run, the
# systemd units name the installed paths (and pass systemd-analyze verify when it is installed),
# the example configuration and the man pages are there, and nothing lands outside DESTDIR.
set -euo pipefail
build="${CDNCA_BUILD:?CDNCA_BUILD must name the build directory}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DESTDIR="$tmp/root" cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
root="$tmp/root"
for d in controld noded; do
  [ -x "$root/usr/sbin/$d" ] || fail "/usr/sbin/$d is not installed"
  "$root/usr/sbin/$d" --version >/dev/null || fail "the installed $d does not run"
  unit="$root/usr/lib/systemd/system/$d.service"
  [ -f "$unit" ] || fail "$d.service is not installed"
  grep -q "^ExecStart=/usr/sbin/$d " "$unit" || fail "$d.service does not start /usr/sbin/$d"
  if grep -q /usr/local/bin "$unit"; then fail "$d.service still names /usr/local/bin"; fi
  cmp -s "$root/usr/lib/systemd/system/$d.socket" "$top/deploy/$d.socket" ||
    fail "$d.socket is not installed as deploy/$d.socket"
done
for f in controld.json noded.json controld.env.example noded.env.example cdnca.logrotate; do
  [ -f "$root/usr/share/doc/cdnca/examples/$f" ] || fail "example $f is not installed"
done
for m in "$top"/docs/man/*.8; do
  [ -e "$m" ] || continue
  [ -f "$root/usr/share/man/man8/$(basename "$m")" ] || fail "man page $(basename "$m") is not installed"
done
# nothing but /usr under DESTDIR
others="$(cd "$root" && find . -mindepth 1 -maxdepth 1 ! -name usr)"
[ -z "$others" ] || fail "installed outside /usr: $others"
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -p "$tmp/units"
  for d in controld noded; do
    sed "s#/usr/sbin/$d#$root/usr/sbin/$d#g" "$root/usr/lib/systemd/system/$d.service" >"$tmp/units/$d.service"
  done
  out="$(cd "$tmp/units" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./controld.service ./noded.service 2>&1)" ||
    { echo "$out"; fail "systemd-analyze verify of the installed units"; }
  [ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify printed warnings"; }
fi
echo "PASS: cmake --install (DESTDIR, prefix /usr): daemons, units and socket units, examples, man pages"
