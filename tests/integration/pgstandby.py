#!/usr/bin/env python3
"""pgstandby — a PostgreSQL primary with a streaming standby, for database-failover tests
(Python 3 stdlib only; the same recipe as pgfixture.py: temp directories, Unix sockets only,
no TCP, never the system cluster; as root every server binary runs as the postgres user).

    pair = pgstandby.Pair(sync=True).start()
    pair.conninfo()            # "host=<primary dir>,<standby dir> dbname=t_1
                               #  target_session_attrs=read-write"
    pair.crash_primary()       # pg_ctl stop -m immediate (a crash: no shutdown checkpoint)
    pair.promote()             # pg_ctl promote -w on the standby

- The primary is a pgfixture.Cluster (tests/pg/pgctl.sh: initdb --no-sync -A trust, whose
  pg_hba.conf already has `local replication all trust`; wal_level=replica and max_wal_senders
  are PostgreSQL 15's defaults), with the migrated template and one test database.
- The standby is `pg_basebackup -R -X stream` of it over the primary's Unix socket (-R writes
  primary_conninfo and standby.signal), started on a socket in its own temp directory with
  cluster_name=standby1, which its WAL receiver uses as application_name.
- sync=True then sets, on the primary only (ALTER SYSTEM after the base backup, so the promoted
  standby does not inherit it and can commit alone): synchronous_standby_names='standby1' and
  synchronous_commit=on. With `on` a commit returns only once the standby has flushed its WAL;
  promotion replays every flushed record before the server accepts writes, so every
  acknowledged commit is in the promoted server. remote_apply (wait for replay as well) would
  only add read-your-writes on the standby, which nothing here reads.
"""

import atexit
import os
import pwd
import subprocess
import time

import pgfixture

STANDBY_NAME = "standby1"


class Pair:
    """A primary (.primary, a pgfixture.Cluster) and a streaming standby (.standby, the same
    class, started from a base backup), with one test database (.dbname)."""

    def __init__(self, sync=True):
        self.sync = sync
        self.primary = pgfixture.Cluster()
        self.standby = pgfixture.Cluster()
        self.dbname = None
        atexit.register(self.stop)

    def _as_owner(self, argv):
        return ["runuser", "-u", "postgres", "--"] + argv if os.geteuid() == 0 else argv

    def start(self):
        self.primary.start()
        self.dbname = self.primary.new_database()
        sb = self.standby
        if os.geteuid() == 0:
            os.chown(sb.dir, *_postgres_ids())
        argv = self._as_owner([os.path.join(sb.bin, "pg_basebackup"), "-h", self.primary.dir,
                               "-U", _superuser(), "-D", os.path.join(sb.dir, "data"), "-R", "-X", "stream",
                               "-c", "fast", "--no-sync"])
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        if p.returncode != 0:
            raise pgfixture.PgError("pg_basebackup failed: %s" % p.stdout.decode(errors="replace"))
        with open(os.path.join(sb.dir, "data", "postgresql.conf"), "a") as f:
            f.write("\ncluster_name = '%s'\n" % STANDBY_NAME)
        sb.server_start()
        sb.started = True
        sb._watchdog()  # stops it and removes its directory once this process is gone
        self.wait_streaming(120)
        if self.sync:
            self.primary.psql("postgres", "ALTER SYSTEM SET synchronous_standby_names = '%s'"
                              % STANDBY_NAME)
            self.primary.psql("postgres", "ALTER SYSTEM SET synchronous_commit = 'on'")
            self.primary.psql("postgres", "SELECT pg_reload_conf()")
            self.wait_sync_state("sync", 60)
        return self

    def replication(self):
        """[(application_name, state, sync_state)] of the primary's WAL senders."""
        return [tuple(r) for r in self.primary.psql(
            "postgres", "SELECT application_name, state, sync_state FROM pg_stat_replication")]

    def wait_streaming(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(r[0] == STANDBY_NAME and r[1] == "streaming" for r in self.replication()):
                return
            time.sleep(0.2)
        raise pgfixture.PgError("the standby is not streaming after %d s: %s\n%s"
                                % (timeout, self.replication(), self.standby.log_tail()))

    def wait_sync_state(self, want, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(r[0] == STANDBY_NAME and r[2] == want for r in self.replication()):
                return
            time.sleep(0.2)
        raise pgfixture.PgError("the standby's sync_state is not %s after %d s: %s"
                                % (want, timeout, self.replication()))

    def conninfo(self, dbname=None, attrs="read-write"):
        """Both servers' socket directories, primary first, one port each (the same number:
        each socket is in its own directory), and target_session_attrs."""
        return ("host=%s,%s port=5432,5432 dbname=%s target_session_attrs=%s"
                % (self.primary.dir, self.standby.dir, dbname or self.dbname, attrs))

    def crash_primary(self):
        """The primary stops like a crash (no shutdown checkpoint, clients cut at once)."""
        self.primary.server_stop("immediate")

    def promote(self, timeout=120):
        """The standby becomes a primary; returns once it accepts writes."""
        self.standby._pg_ctl(["-w", "-t", str(timeout), "promote"], timeout=timeout + 30)

    def in_recovery(self, cluster):
        return cluster.psql("postgres", "SELECT pg_is_in_recovery()")[0][0] == "t"

    def psql(self, cluster, sql):
        return cluster.psql(self.dbname, sql)

    def print_logs(self, lines=40):
        """The servers' log tails (for a failed test)."""
        for name, c in (("primary", self.primary), ("standby", self.standby)):
            print("---- PostgreSQL %s log (last %d lines) ----\n%s" % (name, lines,
                                                                     c.log_tail(lines)))

    def stop(self):
        for c in (self.standby, self.primary):
            try:
                c.stop()
            except Exception:  # noqa: BLE001 - a server already stopped by the test
                pass


def _postgres_ids():
    pw = pwd.getpwnam("postgres")
    return pw.pw_uid, pw.pw_gid


def _superuser():
    """The clusters' superuser: named after the user running the tests (tests/pg/pgctl.sh)."""
    return pwd.getpwuid(os.geteuid()).pw_name


if __name__ == "__main__":
    # a manual check: start a pair, show replication, crash, promote, show the promoted state
    pair = Pair(sync=True).start()
    print("conninfo:", pair.conninfo())
    print("replication:", pair.replication())
    pair.psql(pair.primary, "CREATE TABLE k (v int); INSERT INTO k VALUES (1)")
    pair.crash_primary()
    t0 = time.monotonic()
    pair.promote()
    print("promoted in %.2f s; in recovery: %s; rows: %s"
          % (time.monotonic() - t0, pair.in_recovery(pair.standby),
             pair.psql(pair.standby, "SELECT v FROM k")))
    pair.stop()
