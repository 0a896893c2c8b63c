# shellcheck shell=bash
# Sourced by deploy/deps.sh and tests/deps.sh: install Debian packages without starting or
# enabling the services they ship.
#
#   pkgs_missing PKG...   prints the ones that are not installed (dpkg-query), one a line
#   pkgs_install WHAT PKG...
#       installs the missing ones with apt-get when run as root (CDNCA_NO_INSTALL=1: never),
#       else prints the apt-get line; 0 when all are installed afterwards, else 1.
#
# A server package installed here (PKGS_SERVICES: postgresql, nginx, haproxy, prometheus) is
# neither started nor enabled: apt-get runs under a policy-rc.d that refuses every start (unless
# the system has a policy-rc.d of its own), and the units of such a package that this call
# installed are disabled afterwards. A server that was installed before is left as it was. The
# tests start their own instances (a PostgreSQL cluster in a temporary directory, nginx and
# HAProxy with a configuration of their own) and need only the binaries.

# package -> the units its installation enables
declare -A PKGS_SERVICES=(
  [postgresql]="postgresql.service"
  [nginx]="nginx.service"
  [haproxy]="haproxy.service"
  [prometheus]="prometheus.service"
)

pkgs_missing() {
  local p
  for p in "$@"; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
      echo "$p"
    fi
  done
}

# disable an enabled unit (systemctl works without systemd running; without systemd installed,
# deb-systemd-helper keeps the links a later systemd would follow); 0 when it was enabled
pkgs_disable() {
  if command -v systemctl >/dev/null 2>&1; then
    systemctl is-enabled --quiet "$1" 2>/dev/null && { systemctl disable --quiet "$1" 2>/dev/null || true; }
  else
    deb-systemd-helper --quiet is-enabled "$1" 2>/dev/null && { deb-systemd-helper disable "$1" >/dev/null 2>&1 || true; }
  fi
}

pkgs_install() {
  local what="$1" p unit policy=/usr/sbin/policy-rc.d ours=0 rc=0
  shift
  local missing servers=()
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "cdnca: not a Debian system; make sure these ($what) are installed: $*" >&2
    return 0
  fi
  mapfile -t missing < <(pkgs_missing "$@")
  [ "${#missing[@]}" -gt 0 ] || return 0
  if [ "${CDNCA_NO_INSTALL:-0}" = 1 ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "cdnca: missing $what; install them with:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    return 1
  fi
  for p in "${missing[@]}"; do
    [ -n "${PKGS_SERVICES[$p]:-}" ] && servers+=("$p")
  done
  echo "cdnca: installing $what: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [ "${#servers[@]}" -gt 0 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# cdnca deps: no service starts while packages are installed\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    ours=1
  fi
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } || rc=1
  [ "$ours" = 0 ] || rm -f "$policy"
  for p in "${servers[@]}"; do
    for unit in ${PKGS_SERVICES[$p]}; do
      pkgs_disable "$unit" &&
        echo "cdnca: $p is installed for its binaries only: $unit is not enabled (systemctl enable --now $unit to run it)" >&2
    done
  done
  [ "$rc" = 0 ] && [ -z "$(pkgs_missing "${missing[@]}")" ]
}
