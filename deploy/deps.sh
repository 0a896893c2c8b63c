#!/usr/bin/env bash
# The Debian packages cdnca runs and builds with. Installs the missing ones with apt-get when run
# as root, else prints the apt-get line and exits 1 (CDNCA_NO_INSTALL=1: only check).
#
#   deploy/deps.sh            the daemons' run-time libraries (what the .deb packages depend on)
#   deploy/deps.sh --build    and the compiler, cmake and the -dev packages (controld with its
#                             PostgreSQL driver: libpq-dev)
#   deploy/deps.sh --demo     and what deploy/quickstart.sh and the shell examples of README.md
#                             and docs/ use: python3 (the demo origins), curl, jq
#   deploy/deps.sh --cluster  and HAProxy and the PostgreSQL server binaries, for
#                             deploy/cluster/demo.sh (it runs its own PostgreSQL and HAProxy)
#
# Options combine (quickstart.sh: --build --demo). No service is started or enabled: a server
# package installed here is there for its binaries (deploy/pkgs.sh). What only the tests need
# is in tests/deps.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=deploy/pkgs.sh
. "$here/pkgs.sh"

pkgs=(libmicrohttpd12 libsqlite3-0 libcurl4 libcjson1 libssl3 libsystemd0 libpq5 ca-certificates)
what="run-time libraries"
for arg in "$@"; do
  case "$arg" in
  --build)
    pkgs+=(build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev
           libcjson-dev libssl-dev libsystemd-dev libpq-dev)
    what+=", build tools" ;;
  --demo)
    pkgs+=(python3 curl jq)
    what+=", the demo's tools" ;;
  --cluster)
    pkgs+=(haproxy postgresql)
    what+=", HAProxy and PostgreSQL" ;;
  *)
    echo "usage: deploy/deps.sh [--build] [--demo] [--cluster]" >&2
    exit 2 ;;
  esac
done
pkgs_install "$what" "${pkgs[@]}"
