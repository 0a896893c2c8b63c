#!/usr/bin/env bash
# pgctl — a throwaway PostgreSQL cluster for the tests.
#   pgctl.sh start DIR [CONTROLD]  creates a cluster in DIR/data (initdb --no-sync -A trust,
#       superuser named after the caller), starts it with its Unix socket in DIR only (no TCP:
#       listen_addresses=''), fsync off and room for 400 connections, then prints the conninfo and
#       writes it to DIR/conninfo. With CONTROLD (the controld binary) it also makes the template
#       database cdnca_tpl: created empty, migrated by `CONTROLD --migrate`, then closed to
#       connections, so a test gets a migrated database with CREATE DATABASE x TEMPLATE cdnca_tpl.
#       When any step fails the server is stopped again (no server is left behind).
#   pgctl.sh stop DIR  stops it (fast, then immediate if that fails) and removes DIR/data.
# As root every server binary runs as the postgres user (initdb and postgres refuse root) with
# DIR chowned to it. The server binaries come from $CDNCA_PG_BIN, `pg_config --bindir` or
# /usr/lib/postgresql/*/bin; when they are missing this fails: the PostgreSQL tests must not pass
# silently on a machine without PostgreSQL.
set -euo pipefail

die() {
  echo "pgctl: $*" >&2
  exit 1
}

[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: pgctl.sh start DIR [CONTROLD] | stop DIR"
cmd=$1
dir=$2
controld=${3:-}

bindir=""
if [ -n "${CDNCA_PG_BIN:-}" ]; then
  [ -x "$CDNCA_PG_BIN/initdb" ] || die "CDNCA_PG_BIN=$CDNCA_PG_BIN has no initdb"
  bindir=$CDNCA_PG_BIN
fi
if [ -z "$bindir" ] && command -v pg_config >/dev/null 2>&1; then
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
[ -n "$bindir" ] || die "PostgreSQL server binaries (initdb, pg_ctl) not found via pg_config --bindir or /usr/lib/postgresql/*/bin; install the postgresql package (tests/deps.sh, or deploy/deps.sh --cluster)"

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
start)
  [ -z "$controld" ] || [ -x "$controld" ] || die "$controld is not an executable controld (build it first)"
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
  # generous: the machine may be busy (pg_ctl -w polls until the server accepts connections)
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
    -o "-c listen_addresses='' -k $dir -c fsync=off -c max_connections=400" start >/dev/null || {
    cat "$dir/server.log" >&2 || true
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    die "pg_ctl start failed"
  }
  if [ -n "$controld" ]; then
    # from here on a failure stops the server it started
    trap 'as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true' EXIT
    psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -d postgres)
    "${psql[@]}" -c "CREATE DATABASE cdnca_tpl" || die "CREATE DATABASE cdnca_tpl failed"
    "$controld" --migrate --log-level warn --db "host=$dir dbname=cdnca_tpl" >"$dir/migrate.log" 2>&1 || {
      cat "$dir/migrate.log" >&2
      die "$controld --migrate on cdnca_tpl failed"
    }
    # a template is copied only while nobody is connected to it
    "${psql[@]}" -c "ALTER DATABASE cdnca_tpl WITH IS_TEMPLATE true ALLOW_CONNECTIONS false" ||
      die "closing cdnca_tpl failed"
    trap - EXIT
  fi
  conninfo="host=$dir dbname=postgres"
  echo "$conninfo" >"$dir/conninfo"
  echo "$conninfo"
  ;;
stop)
  [ -d "$dir/data" ] || exit 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 90 stop >/dev/null; then
      pid="$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)"
      as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null ||
        { [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; } || # a stale pid file: nothing runs
        die "pg_ctl stop failed (see $dir/server.log)"
    fi
  fi
  rm -rf "$dir/data" "$dir/conninfo"
  ;;
*)
  die "usage: pgctl.sh start DIR [CONTROLD] | stop DIR"
  ;;
esac
