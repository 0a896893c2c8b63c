#!/usr/bin/env python3
"""harness — shared helpers for cdnca integration tests (Python 3 stdlib only).

A test file imports it, defines functions named test_*, and ends with harness.main():

    import harness
    from harness import Controld, wait_until

    def test_create(tmp):               # tmp: a fresh directory for this test
        c = Controld(tmp).start()
        status, body, headers = c.api("POST", "/v1/sites", {"name": "a", "hostnames": ["a.test"]})
        assert status == 201, body

    if __name__ == "__main__":
        harness.main()

The runner calls the tests in file order (a test that takes no argument gets none), prints
PASS/FAIL per test, then a last line "N passed, M failed", and exits 1 on any failure.
`python3 test_x.py NAME...` runs only the tests whose name contains one of the NAMEs.

Processes (Controld, Noded, Origin) log to files in their test's directory; when a test fails
the tail of every log of that test is printed. Whatever a test leaves running is stopped after
it (controld and noded with SIGTERM, and a non-zero exit fails the test, so sanitizer reports
at exit count), and every process is killed when the runner exits. Start processes from the
main thread: they are also tied to it with PR_SET_PDEATHSIG so none outlives a killed runner.

Binaries come from $CDNCA_BUILD (default ../../build relative to this file).

The database: a SQLite file in the test's directory, or with CDNCA_TEST_DB=pg a fresh database (a
copy of the migrated template) in the ctest run's PostgreSQL cluster, or in one this process starts
when run by hand (pgfixture.py; Controld then passes a conninfo as --db); a test's databases are
dropped when it ends.
Tests that read or write the database themselves use db_query(c, sql), which works on both. A
test that only makes sense on SQLite (it handles the database file) is listed after SQLITE_ONLY
in its PostgreSQL registration in tests/CMakeLists.txt; the runner then reports it as SKIP on
PostgreSQL (never as passed), and a listed name that matches no test fails the run. In
PostgreSQL mode Controld(db=<a file>) fails the test, so an undeclared SQLite-only test cannot
pass unnoticed on SQLite.

Every answer from a controld started here (through Controld.api or http_call to its port) is
checked against the OpenAPI document controld/openapi.json (python3-jsonschema): the route must
be in it, the status must be listed for the operation, and a JSON body must match the status's
schema. A mismatch raises AssertionError in the test that received the answer, so the document
cannot drift from the code. (A 404 or 405 for a path no route serves needs only be an error body.)
"""

import atexit
import ctypes
import http.client
import inspect
import json
import os
import random
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("CDNCA_BUILD", os.path.join(HERE, "..", "..", "build")))
HOST = "127.0.0.1"
DEFAULT = object()  # "use the default admin token" marker for Controld.api

DB_MODE = os.environ.get("CDNCA_TEST_DB", "sqlite")  # "sqlite" or "pg"
if DB_MODE not in ("sqlite", "pg"):
    raise SystemExit("harness: CDNCA_TEST_DB must be sqlite or pg, not %r" % DB_MODE)
# test names declared SQLite-only for this file's PostgreSQL pass (tests/CMakeLists.txt)
SQLITE_ONLY = [n for n in os.environ.get("CDNCA_TEST_SQLITE_ONLY", "").split(",") if n]

_PROCS = []  # every _Proc started by this runner, in start order
_CONTROLD_PORTS = set()  # ports of the controlds started here: their answers are validated
_ISSUED_PORTS = set()  # every port free_port handed out in this runner
_LOG_TAIL = 60


# ---- small utilities ----

class StopWaiting(Exception):
    """Raised by a wait_until condition to stop waiting at once."""


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago.

    Drawn at random below the kernel's ephemeral range (32768-60999 on Linux), so that the
    outgoing connections of other tests running at the same time cannot take it between this
    check and the daemon's bind; the OS picks one if no drawn port is free. A port is handed out
    once per runner: a later server of the same test file never gets an earlier one's port, so an
    answer is never taken for another kind of server's (the answers of controld's ports are
    checked against the OpenAPI document)."""
    for _ in range(200):
        port = random.randrange(10000, 32000)
        if port in _ISSUED_PORTS:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            _ISSUED_PORTS.add(port)
            return port
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _ISSUED_PORTS:
            _ISSUED_PORTS.add(port)
            return port
    raise AssertionError("no free loopback port")


def wait_until(fn, timeout=10.0, what="condition", interval=0.05):
    """Call fn until it returns a truthy value (returned) or timeout seconds pass (AssertionError).

    Exceptions from fn count as "not yet" (the last one is named in the error), except
    StopWaiting, which fn raises to give up at once (it propagates)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
            last = "returned %r" % (v,)
        except StopWaiting:
            raise
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = "%s: %s" % (type(e).__name__, e)
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last: %s)"
                                 % (timeout, what, last))
        time.sleep(interval)


def http_call(url_host, port, method, path, body=None, headers=None, timeout=30.0, tls=False,
              raw=None):
    """One HTTP request on a new connection. body (not None) is sent as JSON, raw as bytes.

    Returns (status, parsed, headers): parsed is the decoded JSON when the reply says
    application/json, else the text ("" for no body); headers is case-insensitive (.get)."""
    hdrs = dict(headers or {})
    data = None
    if raw is not None:
        data = raw if isinstance(raw, bytes) else raw.encode()
    elif body is not None:
        data = json.dumps(body).encode()
    if data is not None and not any(k.lower() == "content-type" for k in hdrs):
        hdrs["Content-Type"] = "application/json"
    if tls:
        conn = http.client.HTTPSConnection(url_host, port, timeout=timeout,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(url_host, port, timeout=timeout)
    try:
        try:
            conn.request(method, path, body=data, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (e.g. 413) before it reads the whole body
        resp = conn.getresponse()
        payload = resp.read()
        ctype = resp.getheader("Content-Type", "") or ""
        text = payload.decode("utf-8", errors="replace")
        if ctype.startswith("application/json") and payload:
            parsed = json.loads(text)
        else:
            parsed = text
        if port in _CONTROLD_PORTS and url_host == HOST:
            openapi().check(method, path, resp.status, ctype, payload, parsed)
        return resp.status, parsed, resp.headers
    finally:
        conn.close()


# ---- the OpenAPI document ----

class OpenAPIMismatch(StopWaiting, AssertionError):
    """An answer the document does not allow: fails the test at once (also inside wait_until)."""

# the document controld serves: controld/openapi.json with its record schemas filled from the
# field tables at build time (controld/api_doc.h)
OPENAPI = os.path.join(BUILD, "controld", "openapi.json")


class OpenAPIDoc:
    """controld/openapi.json with a check of one answer against it."""

    def __init__(self, path=OPENAPI):
        try:
            import jsonschema  # noqa: F401 - python3-jsonschema (tests/deps.sh installs it)
        except ImportError as e:
            raise OpenAPIMismatch("python3-jsonschema is needed to check answers against "
                                 "controld/openapi.json (tests/deps.sh installs it): %s" % e)
        from jsonschema import Draft202012Validator
        self._validator_class = Draft202012Validator
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.routes = []  # (compiled regex, template)
        import re
        for tpl, item in self.doc["paths"].items():
            rest = set()
            for m in item.values():
                for prm in m.get("parameters", []):
                    if prm.get("in") == "path" and prm.get("x-cdnca-rest"):
                        rest.add(prm["name"])
            rx = ""
            for piece in re.split(r"(\{[^}]+\})", tpl):
                if piece.startswith("{"):
                    rx += ".+" if piece[1:-1] in rest else "[^/]+"
                else:
                    rx += re.escape(piece)
            self.routes.append((re.compile("^" + rx + "$"), tpl))
        self._validators = {}

    def template(self, path):
        """The document's path template serving path (one trailing slash tolerated), or None."""
        for cand in (path, path[:-1] if len(path) > 1 and path.endswith("/") else None):
            if cand is None:
                continue
            for rx, tpl in self.routes:
                if rx.match(cand):
                    return tpl
        return None

    def _resolve(self, obj):
        while isinstance(obj, dict) and "$ref" in obj and len(obj) == 1:
            node = self.doc
            for part in obj["$ref"].lstrip("#/").split("/"):
                node = node[part]
            obj = node
        return obj

    def _validate(self, schema, value, what):
        key = json.dumps(schema, sort_keys=True)
        v = self._validators.get(key)
        if v is None:
            # the components ride along so "#/components/..." references resolve
            v = self._validator_class({"components": self.doc["components"], "allOf": [schema]})
            self._validators[key] = v
        errors = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            raise OpenAPIMismatch("%s: answer does not match controld/openapi.json at %s: %s\n"
                                 "answer: %s" % (what, "/".join(map(str, e.absolute_path)) or "(top)",
                                                 e.message, json.dumps(value)[:2000]))

    def check(self, method, target, status, ctype, payload, parsed):
        path = target.split("?", 1)[0]
        m = "get" if method.upper() == "HEAD" else method.lower()
        what = "%s %s -> %s" % (method, path, status)
        tpl = self.template(path)
        error_schema = {"$ref": "#/components/schemas/Error"}
        if tpl is None or m not in self.doc["paths"][tpl]:
            # no route serves it: only the router's own 404 / 405 error answers are right
            if status in (404, 405) and isinstance(parsed, dict):
                self._validate(error_schema, parsed, what)
                return
            raise OpenAPIMismatch("%s: %s is not in controld/openapi.json (a route missing from "
                                 "the document?)" % (what, "%s %s" % (method, tpl or path)))
        op = self.doc["paths"][tpl][m]
        resp = op["responses"].get(str(status))
        if resp is None:
            raise OpenAPIMismatch("%s: status %d is not listed for %s %s in controld/openapi.json "
                                 "(answer: %r)" % (what, status, m.upper(), tpl, str(parsed)[:500]))
        resp = self._resolve(resp)
        content = resp.get("content")
        if not content:
            if payload and method.upper() != "HEAD":
                raise OpenAPIMismatch("%s: the document lists no body, the answer has %d bytes"
                                     % (what, len(payload)))
            return
        base = (ctype or "").split(";")[0].strip().lower()
        if base not in content:
            raise OpenAPIMismatch("%s: Content-Type %r is not one of %s in controld/openapi.json"
                                 % (what, ctype, sorted(content)))
        if base == "application/json" and method.upper() != "HEAD":
            self._validate(content[base]["schema"], parsed, what)


_DOC = []


def openapi():
    """The parsed document (loaded once)."""
    if not _DOC:
        _DOC.append(OpenAPIDoc())
    return _DOC[0]


# util-linux's setpriv (Essential in Debian): a child started through it gets SIGKILL when the
# test process's thread that started it ends, as with _set_pdeathsig below, while the start
# itself stays a vfork: a preexec_fn makes Python fork the whole test process instead, about
# 15 ms of CPU per start against 5 (a test run starts thousands of processes)
_SETPRIV = shutil.which("setpriv")


def popen_tied(argv, **kwargs):
    """subprocess.Popen(argv, **kwargs) whose child is killed (SIGKILL) when this test process
    dies, when started from the main thread (a thread's children must outlive the thread):
    through setpriv --pdeathsig, else a preexec_fn."""
    argv = list(argv)
    if threading.current_thread() is threading.main_thread():
        if _SETPRIV:
            argv = [_SETPRIV, "--pdeathsig", "KILL", "--"] + argv
        else:
            kwargs["preexec_fn"] = _set_pdeathsig
    return subprocess.Popen(argv, **kwargs)


def _set_pdeathsig():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass


# ---- the database (SQLite file or PostgreSQL) ----

def pg_mode():
    """True when the tests run on PostgreSQL (CDNCA_TEST_DB=pg)."""
    return DB_MODE == "pg"


def new_db(tmpdir, name="controld"):
    """The --db value for a new controld: a file in tmpdir, or a fresh PostgreSQL database."""
    if pg_mode():
        import pgfixture  # noqa: PLC0415 - only the PostgreSQL pass needs it
        return pgfixture.new_database()
    return os.path.join(tmpdir, name + ".db")


_PG_NULL = "\\N"  # how psql prints NULL for db_query


def _pg_value(v):
    if v == _PG_NULL:
        return None
    if v.lstrip("-").isdigit():
        return int(v)
    return v


def db_query(c, sql):
    """Run one SQL statement (no parameters: put literal values in it) on the database of
    Controld c, SQLite file or PostgreSQL; returns the rows as tuples (integers as int, NULL as
    None, the rest as text). A write is committed. Works while controld runs (SQLite: WAL)."""
    if pg_mode():
        import pgfixture  # noqa: PLC0415
        rows = pgfixture.psql(c.db, sql, null=_PG_NULL)
        return [tuple(_pg_value(v) for v in r) for r in rows]
    import sqlite3  # noqa: PLC0415
    con = sqlite3.connect(c.db, timeout=30)
    try:
        with con:
            rows = con.execute(sql).fetchall()
    finally:
        con.close()
    return rows


# ---- processes ----

class _Proc:
    """A child process with its output in a log file (stdout and stderr together)."""

    def __init__(self, name, tmpdir):
        self.name = name
        self.tmpdir = tmpdir
        self.log_path = os.path.join(tmpdir, name + ".log")
        self.proc = None

    def _spawn(self, argv, env=None):
        if self.running():
            raise AssertionError("%s is already running" % self.name)
        full_env = dict(os.environ)
        full_env.update(env or {})
        log = open(self.log_path, "ab")
        log.write(("---- %s: %s\n" % (time.strftime("%H:%M:%S"), " ".join(argv))).encode())
        log.flush()
        try:
            self.proc = popen_tied(argv, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, env=full_env, cwd=self.tmpdir)
        finally:
            log.close()
        if self not in _PROCS:
            _PROCS.append(self)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        return self.proc.pid if self.proc else None

    def log_tail(self, lines=_LOG_TAIL):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(data[-lines:])

    def _fail(self, msg):
        raise AssertionError("%s: %s\n---- last lines of %s ----\n%s"
                             % (self.name, msg, self.log_path, self.log_tail()))

    def stop(self, timeout=20.0, expect_rc=0):
        """SIGTERM, wait, and assert the exit status (expect_rc=None: any). Returns it."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                print_stacks(self.proc.pid)
                self.proc.kill()
                self.proc.wait()
                self._fail("did not exit within %.0fs of SIGTERM" % timeout)
        rc = self.proc.returncode
        if expect_rc is not None and rc != expect_rc:
            self._fail("exit status %s, expected %s" % (rc, expect_rc))
        return rc

    def kill9(self):
        """SIGKILL and reap (no checks)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _wait_ready(self, probe, timeout, what):
        def ready():
            if self.proc.poll() is not None:
                raise _Exited(self.proc.returncode)
            return probe()
        try:
            wait_until(ready, timeout=timeout, what=what)
        except _Exited as e:
            self._fail("exited with status %s before it was ready" % e.rc)
        except AssertionError as e:
            if self.proc.poll() is None:
                print_stacks(self.proc.pid)
            self.kill9()
            self._fail(str(e))


class _Exited(StopWaiting):
    def __init__(self, rc):
        super().__init__("exited %s" % rc)
        self.rc = rc


class Controld(_Proc):
    """controld on a free loopback port with its database in tmpdir (or, with CDNCA_TEST_DB=pg,
    a fresh PostgreSQL database; .db is then its conninfo).

    admin_token (random by default) is passed as CDNCA_ADMIN_TOKEN while pass_admin_token is
    true; .url, .port, .db are fixed for the object's life, so a restart keeps the address."""

    def __init__(self, tmpdir, extra_args=None, env=None, name="controld", admin_token=None,
                 db=None):
        super().__init__(name, tmpdir)
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.admin_token = admin_token or ("adm-" + secrets.token_hex(16))
        self.pass_admin_token = True
        self.port = free_port()
        _CONTROLD_PORTS.add(self.port)
        self.url = "http://%s:%d" % (HOST, self.port)
        if db is not None and pg_mode() and not db.startswith(("host=", "postgres")):
            raise AssertionError("Controld(db=%r) is a SQLite file but CDNCA_TEST_DB=pg: declare "
                                 "this test SQLITE_ONLY in tests/CMakeLists.txt" % db)
        self.db = db or new_db(tmpdir, name)
        self.binary = os.path.join(BUILD, "controld", "controld")

    def start(self, timeout=20.0):
        """Launch and wait for GET /healthz 200; returns self."""
        env = dict(self.env)
        if self.pass_admin_token and "CDNCA_ADMIN_TOKEN" not in env:
            env["CDNCA_ADMIN_TOKEN"] = self.admin_token
        self._spawn([self.binary, "--listen", "%s:%d" % (HOST, self.port), "--db", self.db]
                    + self.extra_args, env)
        self._wait_ready(lambda: self.api("GET", "/healthz", token=None, timeout=2)[0] == 200,
                         timeout, "GET /healthz on %s" % self.url)
        return self

    def restart(self, kill=False, timeout=20.0):
        """Stop (SIGTERM and exit 0, or kill -9 with kill=True) and start again; returns self."""
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start(timeout=timeout)

    def api(self, method, path, body=None, token=DEFAULT, headers=None, raw=None, timeout=30.0):
        """A request to controld -> (status, parsed JSON or text, headers).

        token: DEFAULT = the admin token, None = no Authorization header, else that token."""
        hdrs = dict(headers or {})
        if token is DEFAULT:
            token = self.admin_token
        if token is not None:
            hdrs["Authorization"] = "Bearer " + token
        return http_call(HOST, self.port, method, path, body=body, headers=hdrs, timeout=timeout,
                         raw=raw)


class Noded(_Proc):
    """noded enrolled with node_token against a Controld, on free loopback ports.

    .url is the visitor listener, .admin_url the admin listener, .state_dir its cache."""

    def __init__(self, controld, node_token, tmpdir, extra_args=None, name="noded", env=None):
        super().__init__(name, tmpdir)
        self.controld = controld
        self.node_token = node_token
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.port = free_port()
        self.admin_port = free_port()
        self.url = "http://%s:%d" % (HOST, self.port)
        self.admin_url = "http://%s:%d" % (HOST, self.admin_port)
        self.state_dir = os.path.join(tmpdir, name + "-state")
        self.binary = os.path.join(BUILD, "noded", "noded")

    def start(self, timeout=20.0):
        """Launch and wait for the admin GET /healthz 200; returns self."""
        os.makedirs(self.state_dir, exist_ok=True)
        env = dict(self.env)
        if self.node_token is not None:  # None: none given (a token file or an enrolment key)
            env["CDNCA_NODE_TOKEN"] = self.node_token
        curl = self.controld.url if isinstance(self.controld, Controld) else str(self.controld)
        self._spawn([self.binary, "--controld", curl,
                     "--listen", "%s:%d" % (HOST, self.port),
                     "--admin-listen", "%s:%d" % (HOST, self.admin_port),
                     "--state-dir", self.state_dir, "--name", self.name] + self.extra_args, env)
        self._wait_ready(lambda: self.admin("GET", "/healthz", timeout=2)[0] == 200, timeout,
                         "GET /healthz on %s" % self.admin_url)
        return self

    def restart(self, kill=False, timeout=20.0):
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start(timeout=timeout)

    def admin(self, method, path, timeout=30.0):
        """A request to the admin listener -> (status, parsed, headers)."""
        return http_call(HOST, self.admin_port, method, path, timeout=timeout)

    def visit(self, method, path, host, body=None, headers=None, raw=None, timeout=30.0):
        """A visitor request with the given Host header -> (status, parsed, headers)."""
        hdrs = dict(headers or {})
        hdrs["Host"] = host
        return http_call(HOST, self.port, method, path, body=body, headers=hdrs, raw=raw,
                         timeout=timeout)


class Origin(_Proc):
    """A test origin process (origin.py) on a port the OS picks.

    tls: None for plain HTTP, or {"cert": path, "key": path} (as from certs.make_test_pki).
    .port, .url, .scheme, .address; set(**ctl) posts to /__ctl, stats() reads /__stats."""

    def __init__(self, name, tls=None, tmpdir=None):
        if tmpdir is None:
            tmpdir = tempfile.mkdtemp(prefix="cdnca-origin-")
            atexit.register(shutil.rmtree, tmpdir, True)
        super().__init__("origin-" + name, tmpdir)
        self.origin_name = name
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.address = HOST
        self.port = None
        self.url = None
        self.portfile = os.path.join(self.tmpdir, self.name + ".port")

    def start(self, timeout=20.0):
        """Launch and wait for its port file and a GET /__ctl answer; returns self."""
        try:
            os.unlink(self.portfile)
        except FileNotFoundError:
            pass
        # -S: no site module (origin.py needs the standard library only): a faster start
        argv = [sys.executable, "-S", os.path.join(HERE, "origin.py"), "--host", HOST, "--port",
                str(self.port or 0), "--portfile", self.portfile, "--name", self.origin_name]
        if self.tls:
            argv += ["--tls-cert", self.tls["cert"], "--tls-key", self.tls["key"]]
        self._spawn(argv)

        def port_known():
            with open(self.portfile) as f:
                return int(f.read().strip())
        self._wait_ready(port_known, timeout, "port file %s" % self.portfile)
        self.port = port_known()
        self.url = "%s://%s:%d" % (self.scheme, HOST, self.port)
        self._wait_ready(lambda: self._call("GET", "/__ctl", None, 2)[0] == 200, timeout,
                         "GET /__ctl on %s" % self.url)
        return self

    def _call(self, method, path, body, timeout=10.0):
        return http_call(HOST, self.port, method, path, body=body, timeout=timeout,
                         tls=bool(self.tls))

    def set(self, **ctl):
        """POST the settings to /__ctl (see origin.py); returns the new settings."""
        status, body, _ = self._call("POST", "/__ctl", ctl)
        if status != 200:
            raise AssertionError("%s: /__ctl answered %s: %s" % (self.name, status, body))
        return body

    def stats(self):
        """GET /__stats as a dict."""
        status, body, _ = self._call("GET", "/__stats", None)
        if status != 200:
            raise AssertionError("%s: /__stats answered %s: %s" % (self.name, status, body))
        return body

    def times(self, prefix=""):
        """The arrival times (epoch ms, this machine's wall clock) of the counted requests whose
        path starts with prefix (GET /__times, see origin.py)."""
        status, body, _ = self._call("GET", "/__times?prefix=" + urllib.parse.quote(prefix),
                                     None, 30)
        if status != 200:
            raise AssertionError("%s: /__times answered %s: %s" % (self.name, status, body))
        return body["times"]

    def stop(self, timeout=20.0, expect_rc=None):
        return super().stop(timeout=timeout, expect_rc=expect_rc)


def print_stacks(pid):
    """Every thread's stack of a process that hangs, on stderr (with gdb; a diagnosis for the
    failure that follows, nothing without it)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return
    try:
        out = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        out = "gdb: %r" % e
    sys.stderr.write("---- stacks of pid %d ----\n%s\n----\n" % (pid, out[-20000:]))


# ---- runner ----

def _kill_all():
    for p in _PROCS:
        try:
            p.kill9()
        except Exception:  # noqa: BLE001 - at exit, best effort
            pass


atexit.register(_kill_all)


def _stop_pg():
    mod = sys.modules.get("pgfixture")
    if mod is not None:
        mod.stop()


def _drop_pg_databases():
    """The databases a test made (pgfixture.new_database) go when it ends."""
    mod = sys.modules.get("pgfixture")
    if mod is not None:
        mod.drop_databases()


def _on_signal(signum, frame):
    _kill_all()
    _stop_pg()
    sys.stderr.write("harness: signal %d, children killed\n" % signum)
    os._exit(128 + signum)


def _cleanup_after(procs):
    """Stop what a test left running: errors of controld/noded (exit != 0) are returned."""
    errors = []
    for p in reversed(procs):
        if not p.running():
            continue
        try:
            if isinstance(p, (Controld, Noded)):
                p.stop()
            else:
                p.stop(expect_rc=None)
        except AssertionError as e:
            errors.append(str(e))
        finally:
            p.kill9()
    return errors


def main(tests=None, argv=None):
    """Run the test_* functions of the calling module (or the given list) and exit."""
    argv = sys.argv[1:] if argv is None else argv
    if tests is None:
        caller = inspect.stack()[1].frame.f_globals
        tests = [f for n, f in caller.items() if n.startswith("test_") and callable(f)]
    skip = set()
    if pg_mode():
        import pgfixture  # noqa: PLC0415
        if not pgfixture.available():
            print("SKIP: CDNCA_TEST_DB=pg but no PostgreSQL server binaries "
                  "(/usr/lib/postgresql/*/bin; tests/deps.sh installs postgresql)")
            sys.exit(77)
    if pg_mode() and SQLITE_ONLY:
        names = {t.__name__ for t in tests}
        unknown = [n for n in SQLITE_ONLY if n not in names]
        if unknown:
            print("FAIL: SQLITE_ONLY names no test of this file: %s" % ", ".join(unknown))
            sys.exit(1)
        skip = set(SQLITE_ONLY)
    if argv:
        tests = [t for t in tests if any(a in t.__name__ for a in argv)]
    signal.signal(signal.SIGTERM, _on_signal)
    script = os.path.splitext(os.path.basename(sys.argv[0] or "tests"))[0]
    base = tempfile.mkdtemp(prefix="cdnca-%s-" % script)
    passed = failed = skipped = 0
    for t in tests:
        if t.__name__ in skip:
            skipped += 1
            print("SKIP %s (SQLite only, declared in tests/CMakeLists.txt)" % t.__name__,
                  flush=True)
            continue
        tmp = os.path.join(base, t.__name__)
        os.makedirs(tmp)
        first = len(_PROCS)
        started = time.monotonic()
        err = None
        try:
            if len(inspect.signature(t).parameters) >= 1:
                t(tmp)
            else:
                t()
        except Exception:  # noqa: BLE001 - report every failure the same way
            err = traceback.format_exc()
        mine = _PROCS[first:]
        leftovers = _cleanup_after(mine)
        _drop_pg_databases()
        if err is None and leftovers:
            err = "after the test:\n" + "\n".join(leftovers)
        dur = time.monotonic() - started
        if err is None:
            passed += 1
            print("PASS %s (%.1fs)" % (t.__name__, dur), flush=True)
        else:
            failed += 1
            print("FAIL %s (%.1fs)\n%s" % (t.__name__, dur, err.rstrip()), flush=True)
            for p in mine:
                print("---- %s log (%s), last %d lines ----\n%s"
                      % (p.name, p.log_path, _LOG_TAIL, p.log_tail()), flush=True)
    _kill_all()
    _stop_pg()
    if failed == 0:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("logs kept in %s" % base)
    print("%d passed, %d failed%s%s" % (passed, failed,
                                         ", %d skipped (SQLite only)" % skipped if skipped else "",
                                         " [PostgreSQL]" if pg_mode() else ""), flush=True)
    sys.exit(1 if failed or passed == 0 else 0)
