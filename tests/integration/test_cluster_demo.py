#!/usr/bin/env python3
"""test_cluster_demo — deploy/cluster/demo.sh, the cluster on loopback in one command (docs/design.md#cluster-mode).

The script starts PostgreSQL in a temp dir, 3 controld replicas on its database, HAProxy in front
of them (checking GET /healthz), 2 nodes given every replica, two demo origins and a demo site.
Every port is a free loopback port (CDNCA_CLUSTER_DEMO_*_PORT), the lease ttl is 2 s.
  - --check: it checks the API through HAProxy and a visitor request through each node itself,
    exits 0 and leaves nothing behind; a bad argument is a usage error (2) and a port already
    in use an error (1), and neither starts anything.
  - run (--duration, stopped with SIGINT as Ctrl-C would): the API answers through HAProxy, a
    visitor request through each node reaches the primary origin; kill -9 of the engine replica
    → another replica becomes the engine (and the script says so), the API still answers through
    HAProxy, and a change made afterwards through HAProxy reaches both nodes. SIGINT stops every
    process it started (PostgreSQL too), frees every port and removes the temp dir.
Needs PostgreSQL and HAProxy (tests/deps.sh installs both); without them it exits 77 (skipped,
which CI counts as a failure)."""

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import harness
import pgfixture
from harness import free_port, http_call, wait_until
from test_quickstart import alive, descendants, port_open

TOP = os.path.abspath(os.path.join(harness.HERE, "..", ".."))
SCRIPT = os.path.join(TOP, "deploy", "cluster", "demo.sh")
TTL_MS = 2000
START_TIMEOUT = 240.0  # PostgreSQL's initdb, 3 replicas, HAProxy, 2 nodes on a loaded machine
WAIT = 60.0
PORTS = ("LB", "STATS", "CP1", "CP2", "CP3", "NODE1", "NODE2", "NODE1_ADMIN", "NODE2_ADMIN",
         "ORIGIN1", "ORIGIN2")


def _term_on_parent_death():
    """The script gets SIGTERM (and so cleans up) if this runner dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass


class Demo:
    """demo.sh ARGS as a process in its own session, stdout and stderr in files under tmp."""

    def __init__(self, tmp, args, **ports):
        self.tmp = tmp
        self.ports = {k: ports.get(k) or free_port() for k in PORTS}
        env = dict(os.environ, CDNCA_CLUSTER_DEMO_TTL_MS=str(TTL_MS),
                   CDNCA_CLUSTER_DEMO_PROBE_MS="1000")
        for k, p in self.ports.items():
            env["CDNCA_CLUSTER_DEMO_%s_PORT" % k] = str(p)
        env["CDNCA_BUILD"] = harness.BUILD
        self.out_path = os.path.join(tmp, "demo.out")
        self.err_path = os.path.join(tmp, "demo.err")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(["bash", SCRIPT] + args, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, env=env, cwd=tmp,
                                         start_new_session=True,
                                         preexec_fn=_term_on_parent_death)
        self.dir = None  # the script's temp dir, once printed
        self.watch = []  # pids to check after it stopped (children, PostgreSQL's postmaster)

    def output(self):
        with open(self.out_path) as f:
            return f.read()

    def errors(self):
        with open(self.err_path) as f:
            return f.read()

    def fail(self, msg):
        logs = ""
        if self.dir and os.path.isdir(self.dir):
            for name in sorted(os.listdir(self.dir)):
                if name.endswith(".log"):
                    with open(os.path.join(self.dir, name), errors="replace") as f:
                        logs += "\n---- %s ----\n%s" % (name, "".join(f.readlines()[-20:]))
        raise AssertionError("%s\n---- stdout ----\n%s\n---- stderr ----\n%s%s"
                             % (msg, self.output()[-4000:], self.errors()[-3000:], logs))

    def wait_text(self, text, timeout):
        def there():
            if self.proc.poll() is not None and text not in self.output():
                raise harness.StopWaiting("exited %s" % self.proc.returncode)
            return text in self.output()
        try:
            wait_until(there, timeout=timeout, what=repr(text), interval=0.2)
        except (AssertionError, harness.StopWaiting) as e:
            self.fail("demo.sh did not print %r: %s" % (text, e))

    def note_processes(self):
        """Remember every process the script runs now, PostgreSQL's server included (pg_ctl
        detaches it, so it is not a descendant)."""
        self.watch = descendants(self.proc.pid)
        try:
            with open(os.path.join(self.dir, "pg", "data", "postmaster.pid")) as f:
                self.watch.append(int(f.readline()))
        except (OSError, ValueError):
            self.fail("no PostgreSQL postmaster.pid in %s/pg/data" % self.dir)

    def assert_all_gone(self):
        try:
            wait_until(lambda: not [p for p in self.watch if alive(p)], timeout=30,
                       what="every process of the demo gone")
        except AssertionError as e:
            self.fail("%s: still running %s" % (e, [p for p in self.watch if alive(p)]))
        still = [p for p in self.ports.values() if port_open(p)]
        assert still == [], "ports still served after the demo stopped: %s" % still
        assert self.dir and not os.path.exists(self.dir), "temp dir %s left" % self.dir

    def kill(self):
        """Last resort after a failure: the whole session, then what it left."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for p in self.watch:
            if alive(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        if self.dir and os.path.isdir(self.dir):
            subprocess.run([os.path.join(TOP, "tests", "pg", "pgctl.sh"), "stop",
                            os.path.join(self.dir, "pg")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=90, check=False)
            shutil.rmtree(self.dir, ignore_errors=True)

    def find_dir(self):
        m = re.search(r"starting PostgreSQL in (\S+)/pg", self.errors())
        if not m:
            self.fail("demo.sh did not say where its temp dir is")
        self.dir = m.group(1)


def api(port, method, path, token, body=None):
    return http_call("127.0.0.1", port, method, path, body=body, timeout=10,
                     headers={"Authorization": "Bearer " + token})


def visit(port, host):
    """(status, origin name or None) of a visitor request through a node."""
    try:
        st, body, _ = http_call("127.0.0.1", port, "GET", "/", headers={"Host": host}, timeout=5)
    except OSError:
        return None, None
    return st, body.get("origin") if isinstance(body, dict) else None


def healthz(port):
    try:
        st, body, _ = http_call("127.0.0.1", port, "GET", "/healthz", timeout=2)
    except OSError:
        return None
    return body if st == 200 else None


def run_printed(cmd):
    r = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    assert r.returncode == 0, (cmd, r.returncode, r.stderr)
    return r.stdout.decode()


def test_bad_argument_is_a_usage_error(tmp):
    """An unknown option or a bad --duration: exit 2 with the usage line, nothing started."""
    for args in (["--bogus"], ["--duration", "x"], ["--duration", "0"], ["--duration"]):
        r = subprocess.run(["bash", SCRIPT] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30, cwd=tmp,
                           env=dict(os.environ, CDNCA_BUILD=harness.BUILD))
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert b"usage:" in r.stderr, (args, r.stderr)
        assert b"starting" not in r.stderr, (args, r.stderr)


def test_port_in_use_is_refused(tmp):
    """A port of the demo already served by someone else: exit 1 naming it, before PostgreSQL or
    anything else is started."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        busy = s.getsockname()[1]
        d = Demo(tmp, ["--check"], CP2=busy)
        try:
            try:
                d.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                d.fail("demo.sh did not give up on a busy port within 60 s")
            assert d.proc.returncode == 1, (d.proc.returncode, d.errors())
            assert "127.0.0.1:%d is in use" % busy in d.errors(), d.errors()
            assert "starting" not in d.errors(), d.errors()
        finally:
            d.kill()


def test_check_mode_then_nothing_left(tmp):
    """--check: the script checks the API through HAProxy and both nodes itself, says
    "check: ok" with one engine, exits 0 and leaves no process, port or temp dir."""
    d = Demo(tmp, ["--check"])
    try:
        try:
            d.proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            d.fail("demo.sh --check did not finish within %d s" % START_TIMEOUT)
        d.find_dir()
        if d.proc.returncode != 0:
            d.fail("demo.sh --check exited %d" % d.proc.returncode)
        m = re.search(r"^check: ok \((.*)\)$", d.output(), re.M)
        assert m, d.output()
        assert m.group(1).count("=engine") == 1, m.group(1)
        d.assert_all_gone()
    finally:
        d.kill()


def test_engine_killed_api_through_haproxy_and_nodes_follow(tmp):
    """The whole demo: API through HAProxy, visitors through both nodes, kill -9 of the engine
    replica → a new engine, the API still answers through HAProxy, a later change reaches both
    nodes; SIGINT (Ctrl-C) stops everything and removes the temp dir."""
    d = Demo(tmp, ["--duration", "600"])  # bounded even if nobody stops it
    lb, nodes = d.ports["LB"], (d.ports["NODE1"], d.ports["NODE2"])
    cps = {"cp1": d.ports["CP1"], "cp2": d.ports["CP2"], "cp3": d.ports["CP3"]}
    try:
        d.wait_text("Ctrl-C stops everything.", START_TIMEOUT)
        d.find_dir()
        d.note_processes()
        text = d.output()
        assert len(d.watch) >= 9, d.watch  # 2 origins, 3 replicas, HAProxy, 2 nodes; PostgreSQL
        assert "dashboard      http://127.0.0.1:%d/ui/" % lb in text, text
        m = re.search(r"admin token in (\S+)", text)
        assert m and m.group(1).startswith(d.dir), text
        with open(m.group(1)) as f:
            token = f.read().strip()

        # the API through HAProxy: the demo site with a primary and a backup level
        st, body, hdrs = api(lb, "GET", "/v1/sites?limit=100", token)
        assert st == 200, (st, body)
        demo = [s for s in body["sites"] if s["name"] == "demo"]
        assert len(demo) == 1, body
        sid = demo[0]["id"]
        st, site, _ = api(lb, "GET", "/v1/sites/%d" % sid, token)
        assert st == 200 and sorted(o["level"] for o in site["origins"]) == [1, 2], site
        assert hdrs.get("x-cdnca-replica") in cps, hdrs  # HAProxy names the replica
        # the dashboard through HAProxy
        st, page, hdrs = http_call("127.0.0.1", lb, "GET", "/ui/", timeout=10)
        assert st == 200 and hdrs.get("content-type", "").startswith("text/html"), (st, hdrs)
        # the printed status line works as printed
        status_cmd = [ln.strip() for ln in text.splitlines()
                      if ln.strip().startswith("curl ") and "/status" in ln]
        assert len(status_cmd) == 1, text
        assert json.loads(run_printed(status_cmd[0]))["site_id"] == sid

        # a visitor request through each node reaches the primary origin
        for p in nodes:
            wait_until(lambda p=p: visit(p, "demo.cdnca.test") == (200, "primary"), WAIT,
                       "node %d serving the demo site from primary" % p)

        # kill -9 the engine replica
        engines = [n for n, p in cps.items() if (healthz(p) or {}).get("role") == "engine"]
        assert len(engines) == 1, engines
        victim = engines[0]
        with open(os.path.join(d.dir, victim + ".pid")) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        rest = {n: p for n, p in cps.items() if n != victim}

        def new_engine():
            found = [n for n, p in rest.items() if (healthz(p) or {}).get("role") == "engine"]
            return len(found) == 1
        # the lease moves within ttl + ttl/3; generous here for a loaded machine
        wait_until(new_engine, WAIT, "another replica is the engine")

        # the script reports it: a roles line with the victim down and another replica engine
        def reported():
            after = d.output().split("Ctrl-C stops everything.", 1)[1]
            return any("roles:" in ln and "%s=down" % victim in ln and
                       re.search(r"cp\d=engine", ln) for ln in after.splitlines())
        wait_until(reported, WAIT, "the script's roles line with a new engine", interval=0.2)

        # the API still answers through HAProxy (it drops the dead replica after 2 failed checks)
        def api_ok():
            st, _, h = api(lb, "GET", "/v1/sites/%d" % sid, token)
            return st == 200 and h.get("x-cdnca-replica") in rest
        wait_until(lambda: all(api_ok() for _ in range(3)), WAIT, "the API through HAProxy")

        # a change made afterwards through HAProxy reaches both nodes
        for p in nodes:
            assert visit(p, "after.cdnca.test")[0] != 200, p  # not served before the change
        st, body, _ = api(lb, "PATCH", "/v1/sites/%d" % sid, token,
                          {"hostnames": ["demo.cdnca.test", "after.cdnca.test"]})
        assert st == 200, (st, body)
        for p in nodes:
            wait_until(lambda p=p: visit(p, "after.cdnca.test") == (200, "primary"), WAIT,
                       "node %d serving the changed site" % p)
        dead_url = "http://127.0.0.1:%d" % cps[victim]
        for p in (d.ports["NODE1_ADMIN"], d.ports["NODE2_ADMIN"]):
            st, s, _ = http_call("127.0.0.1", p, "GET", "/status", timeout=5)
            assert st == 200 and s["node"]["controld"] != dead_url, s["node"]

        # Ctrl-C: every process stops, ports are free, the temp dir is gone
        d.proc.send_signal(signal.SIGINT)
        try:
            d.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.fail("demo.sh did not exit within 60 s of SIGINT")
        if d.proc.returncode != 130:
            d.fail("demo.sh exited %s after SIGINT, expected 130" % d.proc.returncode)
        d.assert_all_gone()
    finally:
        d.kill()


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin; tests/deps.sh "
              "installs postgresql)")
        sys.exit(77)
    if not shutil.which("haproxy") and not os.access("/usr/sbin/haproxy", os.X_OK):
        print("SKIP: no HAProxy (tests/deps.sh installs haproxy)")
        sys.exit(77)
    harness.main()
