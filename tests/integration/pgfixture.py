#!/usr/bin/env python3
"""pgfixture — a throwaway PostgreSQL cluster for the integration tests (Python 3 stdlib only).

One cluster per test process, started on first use and stopped when the process exits:

    import pgfixture
    conninfo = pgfixture.new_database()      # "host=<dir> dbname=t_<n>", a copy of cdnca_tpl
    rows = pgfixture.psql(conninfo, "SELECT count(*) FROM sites")

- tests/pg/pgctl.sh (the same recipe as the ctest fixture) in a temp directory: initdb
  --no-sync -A trust, the server on a Unix socket in that directory only (listen_addresses='',
  so no TCP port and no collision between runs), fsync=off, max_connections=300; as root the
  server binaries run as the `postgres` user with the directory chowned to it. The cluster's
  superuser is named after the user running the tests, so a conninfo needs no user=.
- cdnca_tpl: schema/pg/*.sql applied in order, each in its own transaction with the row the
  PostgreSQL driver records (schema_migrations), so controld started on a copy migrates
  nothing. new_database() answers CREATE DATABASE t_<n> TEMPLATE cdnca_tpl (tens of ms).
- Outages: cluster().server_stop("fast"|"immediate") and server_start() stop and start the
  server on the same socket with the same data (PostgreSQL restarted under a running controld).
- Binaries: $CDNCA_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH.
  available() says whether they are there (a test that needs them and finds none exits 77).
"""

import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_PG = os.path.abspath(os.path.join(HERE, "..", "..", "schema", "pg"))
PGCTL = os.path.abspath(os.path.join(HERE, "..", "pg", "pgctl.sh"))
TEMPLATE = "cdnca_tpl"

# the table the PostgreSQL driver keeps its applied migrations in (controld/db.h)
SCHEMA_MIGRATIONS_DDL = ("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         "version BIGINT PRIMARY KEY, name TEXT NOT NULL, "
                         "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")

_lock = threading.Lock()
_cluster = []  # the one Cluster of this process, once started


def bindir():
    """The directory with initdb/pg_ctl/psql, or None."""
    env = os.environ.get("CDNCA_PG_BIN")
    if env:
        return env if os.path.exists(os.path.join(env, "initdb")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def available():
    """True when a PostgreSQL server can be started here (binaries present; as root, the
    postgres user exists)."""
    if bindir() is None:
        return False
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False
    return True


def migrations():
    """[(version, name, path)] of schema/pg, in order."""
    out = []
    for path in sorted(glob.glob(os.path.join(SCHEMA_PG, "[0-9][0-9][0-9][0-9]_*.sql"))):
        name = os.path.basename(path)
        out.append((int(name[:4]), name, path))
    return out


class PgError(Exception):
    pass


class Cluster:
    """A PostgreSQL cluster in a temp directory, reachable only on its Unix socket there."""

    def __init__(self):
        self.bin = bindir()
        if self.bin is None:
            raise PgError("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        self.dir = tempfile.mkdtemp(prefix="cdnca-pg-")
        self.log = os.path.join(self.dir, "server.log")
        self.started = False
        self._n = 0

    def _pgctl(self, cmd, timeout):
        """tests/pg/pgctl.sh start|stop on this directory (the recipe the ctest fixture uses)."""
        return subprocess.run([PGCTL, cmd, self.dir], check=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)

    def start(self):
        try:
            self._pgctl("start", 180)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            out = e.stdout.decode(errors="replace") if e.stdout else ""
            self.stop()
            raise PgError("PostgreSQL did not start (tests/pg/pgctl.sh start %s):\n%s"
                          % (self.dir, out))
        self.started = True
        self._watchdog()
        self._make_template()
        return self

    def _watchdog(self):
        """A detached shell that stops the server and removes the directory once this process
        is gone, even when it was killed (atexit does not run on SIGKILL). It is started twice
        removed (its parent exits at once), so it is no descendant of this process: ctest kills
        a timed-out test's whole process tree, and the watchdog must outlive it."""
        script = ('( while kill -0 "$0" 2>/dev/null; do sleep 1; done; '
                  '"$1" stop "$2"; rm -rf "$2" ) >/dev/null 2>&1 </dev/null &')
        subprocess.run(["sh", "-c", script, str(os.getpid()), PGCTL, self.dir],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                       check=True, timeout=30)

    def stop(self):
        if self.started:
            self.started = False
            try:
                self._pgctl("stop", 90)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def _pg_ctl(self, args, timeout=90):
        """pg_ctl on this cluster's data directory (as postgres when root)."""
        argv = [os.path.join(self.bin, "pg_ctl"), "-D", os.path.join(self.dir, "data")] + args
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)

    def server_stop(self, mode="fast"):
        """Stop the server, keeping its data (an outage: connections fail until server_start).
        mode: fast (clients disconnected, clean shutdown) or immediate (like a crash)."""
        self._pg_ctl(["-m", mode, "-w", "stop"])

    def server_start(self):
        """Start the server again after server_stop, on the same socket with the same data."""
        opts = "-c listen_addresses='' -k %s -c fsync=off -c max_connections=300" % self.dir
        self._pg_ctl(["-l", self.log, "-w", "-t", "60", "-o", opts, "start"])

    def log_tail(self, lines=40):
        try:
            with open(self.log, "rb") as f:
                return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def conninfo(self, dbname):
        return "host=%s dbname=%s" % (self.dir, dbname)

    def psql(self, dbname, sql=None, file=None, null=""):
        """Run SQL (or a file) on dbname, stopping at the first error. Returns the rows as
        lists of strings (unaligned, tab-separated; NULL printed as null). PgError on failure."""
        argv = [os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t", "-F", "\t",
                "-P", "null=" + null, "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-d", dbname]
        argv += ["-f", file] if file else ["-c", sql]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            raise PgError("psql on %s failed (%d): %s" % (
                dbname, p.returncode, p.stderr.decode(errors="replace").strip()))
        text = p.stdout.decode()
        return [line.split("\t") for line in text.splitlines() if line != ""]

    def _make_template(self):
        """cdnca_tpl: every schema/pg migration, each in one transaction with its
        schema_migrations row, as controld's PostgreSQL driver applies them."""
        self.psql("postgres", "CREATE DATABASE %s" % TEMPLATE)
        self.psql(TEMPLATE, SCHEMA_MIGRATIONS_DDL)
        script = os.path.join(self.dir, "migrate.sql")
        with open(script, "w") as f:
            for version, name, path in migrations():
                f.write("BEGIN;\n\\i %s\nINSERT INTO schema_migrations (version, name) "
                        "VALUES (%d, '%s');\nCOMMIT;\n" % (path, version, name))
        self.psql(TEMPLATE, file=script)
        # no connection may stay on a template while it is copied
        self.psql("postgres", "ALTER DATABASE %s WITH ALLOW_CONNECTIONS false" % TEMPLATE)

    def new_database(self, prefix="t"):
        """A fresh database copied from cdnca_tpl; returns its name."""
        with _lock:
            self._n += 1
            name = "%s_%d" % (prefix, self._n)
        self.psql("postgres", "CREATE DATABASE %s TEMPLATE %s" % (name, TEMPLATE))
        return name


def cluster():
    """The process's cluster, started on first call (stopped at exit)."""
    with _lock:
        if not _cluster:
            c = Cluster()
            atexit.register(c.stop)
            try:
                c.start()
            except BaseException:
                c.stop()
                raise
            _cluster.append(c)
        return _cluster[0]


def new_database():
    """The conninfo of a fresh, migrated database (a copy of cdnca_tpl)."""
    c = cluster()
    return c.conninfo(c.new_database())


def dbname_of(conninfo):
    for part in conninfo.split():
        if part.startswith("dbname="):
            return part[len("dbname="):]
    raise ValueError("no dbname in %r" % conninfo)


def psql(conninfo, sql):
    """Rows of sql run on the database a conninfo from new_database() names."""
    return cluster().psql(dbname_of(conninfo), sql)


def stop():
    """Stop the process's cluster now (it is also stopped at exit)."""
    with _lock:
        if _cluster:
            _cluster.pop().stop()
