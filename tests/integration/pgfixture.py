#!/usr/bin/env python3
"""pgfixture — PostgreSQL for the integration tests (Python 3 stdlib only).

One cluster per test run, one database per test:

    import pgfixture
    conninfo = pgfixture.new_database()      # "host=<dir> dbname=t_<pid>_<n>_<rand>", a copy of cdnca_tpl
    rows = pgfixture.psql(conninfo, "SELECT count(*) FROM sites")
    pgfixture.drop_databases()               # what new_database() made (harness: after each test)

- Under ctest the cluster is the run's one cluster, started by the fixture test pg.start
  (tests/pg/pgctl.sh, tests/CMakeLists.txt) and named by CDNCA_TEST_PG ("host=<dir>
  dbname=postgres"); this process only creates and drops databases in it. Names carry the pid
  and a random part, so tests running side by side (ctest -j) never meet.
- Without CDNCA_TEST_PG (python3 test_x.py by hand) this process starts a cluster of its own on
  first use, with the same recipe (tests/pg/pgctl.sh start in a temp directory), and stops it at
  exit; a detached watchdog stops it even when the process is killed.
- The recipe: initdb --no-sync -A trust, the server on a Unix socket in its directory only
  (listen_addresses='', no TCP port), fsync=off, max_connections=400; as root the server
  binaries run as the `postgres` user with the directory chowned to it. The cluster's superuser
  is named after the user running the tests, so a conninfo needs no user=.
- cdnca_tpl, the template: created empty and migrated by controld itself (`controld --migrate`,
  the binary of $CDNCA_BUILD), so controld started on a copy migrates nothing.
  new_database() is CREATE DATABASE <unique> TEMPLATE cdnca_tpl.
- Outages: a test that stops the server (server_stop/server_start) must not do it to a shared
  cluster: private_cluster() gives it one of its own.
- Binaries: $CDNCA_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH.
  available() says whether they are there (a test that needs them and finds none exits 77).
"""

import atexit
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PGCTL = os.path.abspath(os.path.join(HERE, "..", "pg", "pgctl.sh"))
TEMPLATE = "cdnca_tpl"

_lock = threading.Lock()
_cluster = []  # the cluster of this process (shared or its own), once known
_created = []  # (cluster, dbname) made by new_database() and not dropped yet


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


def controld_binary():
    """The controld that migrates the template ($CDNCA_BUILD/controld/controld)."""
    build = os.environ.get("CDNCA_BUILD", os.path.join(HERE, "..", "..", "build"))
    return os.path.abspath(os.path.join(build, "controld", "controld"))


def conninfo_value(conninfo, key):
    """The value of key (host, dbname) in a "k=v k=v" conninfo, or None."""
    for part in conninfo.split():
        if part.startswith(key + "="):
            return part[len(key) + 1:]
    return None


class PgError(Exception):
    pass


class Cluster:
    """A PostgreSQL cluster reachable only on its Unix socket in .dir: started here by start()
    (own=True: stopped and removed by stop()), or the ctest run's cluster given by its socket
    directory (own=False: stop() leaves it running)."""

    def __init__(self, sockdir=None):
        self.bin = bindir()
        if self.bin is None:
            raise PgError("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        self.own = sockdir is None
        self.dir = tempfile.mkdtemp(prefix="cdnca-pg-") if self.own else sockdir
        self.log = os.path.join(self.dir, "server.log")
        self.started = not self.own
        self._n = 0

    def _pgctl(self, argv, timeout):
        """tests/pg/pgctl.sh (the recipe the ctest fixture uses) on this directory."""
        return subprocess.run([PGCTL] + argv, check=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)

    def start(self):
        """Start the server and make cdnca_tpl (pgctl.sh start DIR CONTROLD); a failure leaves
        no server behind (pgctl.sh stops what it started) and removes the directory."""
        controld = controld_binary()
        try:
            self._pgctl(["start", self.dir, controld], 300)
        except subprocess.CalledProcessError as e:
            out = e.stdout.decode(errors="replace") if e.stdout else ""
            self.started = True  # a server may be up: stop() makes sure it is not
            self.stop()
            raise PgError("PostgreSQL did not start (tests/pg/pgctl.sh start %s %s):\n%s"
                          % (self.dir, controld, out))
        except subprocess.TimeoutExpired:
            self.started = True
            self.stop()
            raise PgError("tests/pg/pgctl.sh start %s took more than 300 s" % self.dir)
        self.started = True
        self._watchdog()
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
        """Own cluster: stop the server and remove its directory. Shared: nothing."""
        if not self.own:
            return
        if self.started:
            self.started = False
            try:
                self._pgctl(["stop", self.dir], 200)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def _pg_ctl(self, args, timeout=90):
        """pg_ctl on this cluster's data directory (as postgres when root)."""
        if not self.own:
            raise PgError("the ctest run's cluster is shared: stop and start only a "
                          "private_cluster()")
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
        opts = "-c listen_addresses='' -k %s -c fsync=off -c max_connections=400" % self.dir
        self._pg_ctl(["-l", self.log, "-w", "-t", "120", "-o", opts, "start"], timeout=180)

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

    def unique_name(self, prefix="t"):
        """A database name no other process of the run uses: prefix_<pid>_<n>_<random>."""
        with _lock:
            self._n += 1
            n = self._n
        return "%s_%d_%d_%s" % (prefix, os.getpid(), n, secrets.token_hex(3))

    def new_database(self, prefix="t", template=TEMPLATE):
        """A fresh database copied from cdnca_tpl (template=None: an empty one, from
        template0); returns its name. drop_databases() drops it."""
        name = self.unique_name(prefix)
        self.psql("postgres", "CREATE DATABASE %s TEMPLATE %s" % (name, template or "template0"))
        with _lock:
            _created.append((self, name))
        return name

    def drop_database(self, name):
        """DROP DATABASE name, disconnecting whoever is still on it."""
        self.psql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)


def cluster():
    """The run's cluster: the ctest fixture's (CDNCA_TEST_PG), else one this process starts on
    the first call (stopped at exit)."""
    with _lock:
        if not _cluster:
            shared = os.environ.get("CDNCA_TEST_PG", "")
            if shared:
                sockdir = conninfo_value(shared, "host")
                if not sockdir or not os.path.isdir(sockdir):
                    raise PgError("CDNCA_TEST_PG=%r names no socket directory (the ctest fixture "
                                  "pg.start did not run?)" % shared)
                _cluster.append(Cluster(sockdir))
                atexit.register(drop_databases)  # also for scripts that never call stop()
            else:
                c = Cluster()
                atexit.register(c.stop)
                c.start()
                _cluster.append(c)
        return _cluster[0]


def private_cluster():
    """A cluster of the caller's own, started now and stopped at exit (or by its stop()): for
    a test that stops and starts the server, which it must not do to the shared one."""
    c = Cluster()
    atexit.register(c.stop)
    return c.start()


def new_database():
    """The conninfo of a fresh, migrated database (a copy of cdnca_tpl) in the run's cluster."""
    c = cluster()
    return c.conninfo(c.new_database())


def dbname_of(conninfo):
    name = conninfo_value(conninfo, "dbname")
    if name is None:
        raise ValueError("no dbname in %r" % conninfo)
    return name


def _cluster_of(conninfo):
    """The Cluster a conninfo from new_database() points into (the run's or a private one)."""
    host = conninfo_value(conninfo, "host")
    with _lock:
        for c, _ in _created:
            if c.dir == host:
                return c
    c = cluster()
    if host != c.dir:
        raise ValueError("%r is in no cluster of this process" % conninfo)
    return c


def psql(conninfo, sql, null=""):
    """Rows of sql run on the database a conninfo from new_database() names."""
    return _cluster_of(conninfo).psql(dbname_of(conninfo), sql, null=null)


def drop_databases():
    """Drop every database new_database() made in this process (the harness calls it after
    each test; a failure to drop is reported, not raised: the cluster goes at the end anyway)."""
    with _lock:
        todo = list(_created)
        del _created[:]
    for c, name in todo:
        if c.own and not c.started:
            continue
        try:
            c.drop_database(name)
        except (PgError, subprocess.TimeoutExpired) as e:
            print("pgfixture: could not drop %s: %s" % (name, e), flush=True)


def stop():
    """Drop this process's databases and stop its own cluster, if it started one (the ctest
    run's cluster is stopped by the fixture test pg.stop)."""
    drop_databases()
    with _lock:
        if _cluster:
            _cluster.pop().stop()
