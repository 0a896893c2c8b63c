#!/usr/bin/env python3
"""pgfixture — a throwaway PostgreSQL cluster for the integration tests (Python 3 stdlib only).

One cluster per test process, started on first use and stopped when the process exits:

    import pgfixture
    conninfo = pgfixture.new_database()      # "host=<dir> dbname=t_<n>", a copy of cdnca_tpl
    rows = pgfixture.psql(conninfo, "SELECT count(*) FROM sites")

- initdb --no-sync -A trust into a temp directory; the server listens on a Unix socket in that
  directory only (listen_addresses='', so no TCP port and no collision between runs), with
  fsync=off and max_connections=300.
- As root every server binary runs as the `postgres` user (`runuser -u postgres --`) with the
  directory chowned to it; as another user the binaries run directly. The cluster's superuser
  is named after the user running the tests, so a conninfo needs no user=.
- cdnca_tpl: schema/pg/*.sql applied in order, each in its own transaction with the row the
  PostgreSQL driver records (schema_migrations), so controld started on a copy migrates
  nothing. new_database() answers CREATE DATABASE t_<n> TEMPLATE cdnca_tpl (tens of ms).
- Binaries: $CDNCA_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH.
  available() says whether they are there (a test that needs them and finds none exits 77).
"""

import atexit
import getpass
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_PG = os.path.abspath(os.path.join(HERE, "..", "..", "schema", "pg"))
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
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.user = getpass.getuser()
        self.root = os.geteuid() == 0
        self.started = False
        self._n = 0

    def _server(self, argv, **kw):
        """Run a server binary (as postgres when root); CalledProcessError on failure."""
        argv = [os.path.join(self.bin, argv[0])] + argv[1:]
        if self.root:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(argv, check=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)

    def start(self):
        if self.root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        try:
            self._server(["initdb", "--no-sync", "-A", "trust", "-U", self.user, "-E", "UTF8",
                          "--locale=C", "-D", self.data], timeout=120)
            opts = ("-c listen_addresses='' -k %s -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off -c max_connections=300" % self.dir)
            self._server(["pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60",
                          "-o", opts, "start"], timeout=90)
        except subprocess.CalledProcessError as e:
            raise PgError("PostgreSQL did not start: %s\n%s\n%s" % (
                " ".join(e.cmd), e.stdout.decode(errors="replace"), self.log_tail()))
        self.started = True
        self._watchdog()
        self._make_template()
        return self

    def _watchdog(self):
        """A detached shell that stops the server and removes the directory once this process
        is gone, even when it was killed (atexit does not run on SIGKILL or a ctest timeout)."""
        stop = [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "stop"]
        if self.root:
            stop = ["runuser", "-u", "postgres", "--"] + stop
        script = ('while kill -0 "$0" 2>/dev/null; do sleep 1; done; '
                  'if [ -d "$1" ]; then shift; "$@" >/dev/null 2>&1; fi; rm -rf "$0.dir"')
        script = script.replace('"$0.dir"', "'%s'" % self.dir)
        subprocess.Popen(["sh", "-c", script, str(os.getpid()), self.data] + stop,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    def stop(self):
        if self.started:
            self.started = False
            try:
                self._server(["pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"],
                             timeout=60)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

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
