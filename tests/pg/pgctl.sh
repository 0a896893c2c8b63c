#!/usr/bin/env bash
# pgctl — a throwaway PostgreSQL cluster for the tests: `pgctl.sh start DIR` creates a cluster in
# DIR/data (initdb --no-sync -A trust, superuser named after the caller), starts it with its
# Unix socket in DIR only (no TCP: listen_addresses=''), fsync off and room for 300 connections,
# then prints the conninfo and writes it to DIR/conninfo. `pgctl.sh stop DIR` stops it and removes
# DIR/data. As root every server binary runs as the postgres user (initdb and postgres refuse
# root) with DIR chowned to it. The server binaries come from `pg_config --bindir` or
# /usr/lib/postgresql/*/bin; when they are missing this fails: the PostgreSQL tests must not pass
# silently on a machine without PostgreSQL.
set -euo pipefail

die() {
  echo "pgctl: $*" >&2
  exit 1
}

[ $# -eq 2 ] || die "usage: pgctl.sh start|stop DIR"
cmd=$1
dir=$2

bindir=""
if command -v pg_config >/dev/null 2>&1; then
  b="$(pg_config --bindir 2>/dev/null || true)"
  [ -n "$b" ] && [ -x "$b/initdb" ] && bindir=$b
fi
if [ -z "$bindir" ]; then
  for b in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$b/initdb" ]; then
      bindir=$b
      break
    fi
  done
fi
[ -n "$bindir" ] || die "PostgreSQL server binaries (initdb, pg_ctl) not found via pg_config --bindir or /usr/lib/postgresql/*/bin; install the postgresql package (deploy/deps.sh, tests/deps.sh)"

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
start)
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  # a Unix socket path is limited to 107 bytes: DIR/.s.PGSQL.5432 must fit
  [ "${#dir}" -le 90 ] || die "$dir is too long for a Unix socket directory (90 bytes at most)"
  if [ -f "$dir/data/postmaster.pid" ]; then # a cluster left by an interrupted run
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir/data" "$dir/conninfo" "$dir/server.log"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the postgres user (package postgresql)"
    chown postgres: "$dir"
  fi
  user="$(id -un)"
  as_owner "$bindir/initdb" --no-sync -A trust -U "$user" -E UTF8 --locale=C -D "$dir/data" \
    >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    die "initdb failed"
  }
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k $dir -c fsync=off -c max_connections=300" start >/dev/null || {
    cat "$dir/server.log" >&2 || true
    die "pg_ctl start failed"
  }
  conninfo="host=$dir dbname=postgres"
  echo "$conninfo" >"$dir/conninfo"
  echo "$conninfo"
  ;;
stop)
  [ -d "$dir/data" ] || exit 0
  as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null ||
    die "pg_ctl stop failed (see $dir/server.log)"
  rm -rf "$dir/data" "$dir/conninfo"
  ;;
*)
  die "usage: pgctl.sh start|stop DIR"
  ;;
esac
