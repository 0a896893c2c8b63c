#!/usr/bin/env python3
"""test_ops — running the daemons as an operator does (docs/design.md#command-lines): SIGHUP under load (log file
reopened, reloadable keys applied, a bad file keeps the running config, nobody dies),
--check-config for both daemons, and the systemd notify protocol (READY=1 once serving,
WATCHDOG=1 pings, RELOADING=1/READY=1 around a SIGHUP, STOPPING=1) seen on a NOTIFY_SOCKET."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import harness
from harness import BUILD, Controld, Noded, Origin, http_call, wait_until

CONTROLD = os.path.join(BUILD, "controld", "controld")
NODED = os.path.join(BUILD, "noded", "noded")


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def metric(text, name):
    """The value of an unlabelled sample `name` in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def controld_metric(c, name):
    st, body, _ = c.api("GET", "/metrics", token=None, timeout=5)
    assert st == 200, body
    return metric(body, name)


def enrol(c, name):
    st, body, _ = c.api("POST", "/v1/nodes", {"name": name})
    assert st == 201, body
    return body["token"]


class Load:
    """Bounded background traffic: API reads on controld and visitor requests through noded.
    Every answer that is not the expected status, and every transport error, is recorded."""

    def __init__(self, c, n, host, max_s=120.0):
        self.c, self.n, self.host = c, n, host
        self.stop_at = time.monotonic() + max_s
        self.done = threading.Event()
        self.errors = []
        self.count = 0
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True)
                        for k in range(2)]

    def _run(self, k):
        while not self.done.is_set() and time.monotonic() < self.stop_at:
            try:
                if k == 0:
                    st, body, _ = self.c.api("GET", "/v1/sites", timeout=10)
                else:
                    st, body, _ = self.n.visit("GET", "/x", self.host, timeout=10)
                if st != 200:
                    self.errors.append("%s: %s %s" % ("api" if k == 0 else "visit", st, body))
            except Exception as e:  # noqa: BLE001 - a transport error is a failed request
                self.errors.append("%s: %s: %s" % ("api" if k == 0 else "visit",
                                                   type(e).__name__, e))
            self.count += 1
            time.sleep(0.005)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        for t in self.threads:
            t.join(15)


def test_sighup_under_load(tmp):
    ccfg = os.path.join(tmp, "controld.json")
    ncfg = os.path.join(tmp, "noded.json")
    clog = os.path.join(tmp, "controld-file.log")
    nlog = os.path.join(tmp, "noded-file.log")
    # probe rounds every 60 s: none after the first until a reload shortens the interval
    write_json(ccfg, {"probe_interval_ms": 60000, "log_level": "info"})
    write_json(ncfg, {"log_level": "info", "heartbeat_interval_ms": 1000})
    c = Controld(tmp, extra_args=["--config", ccfg, "--log-file", clog]).start()
    o1 = Origin("a", tmpdir=tmp).start()
    o2 = Origin("b", tmpdir=tmp).start()
    st, site, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test"],
        "health_check": {"enabled": True},
        "origins": [{"level": 1, "address": o1.address, "port": o1.port, "scheme": "http"},
                    {"level": 2, "address": o2.address, "port": o2.port, "scheme": "http"}]})
    assert st == 201, site
    n = Noded(c, enrol(c, "edge"), tmp, extra_args=["--config", ncfg, "--log-file", nlog]).start()
    wait_until(lambda: n.visit("GET", "/x", "shop.test", timeout=5)[0] == 200, 20,
               "the site served by noded")
    assert "started" in read(clog) and "started" in read(nlog)

    with Load(c, n, "shop.test") as load:
        # 1. logrotate: rename, SIGHUP, the daemon writes to a new file at the old path
        os.rename(clog, clog + ".1")
        os.rename(nlog, nlog + ".1")
        c.proc.send_signal(signal.SIGHUP)
        n.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "log file %s reopened" % clog in read(clog), 10, "controld's new log")
        wait_until(lambda: "log file %s reopened" % nlog in read(nlog), 10, "noded's new log")
        assert "reopened" not in read(clog + ".1")

        # 2. a reloadable key: the probe interval drops to 300 ms, rounds follow
        rounds = controld_metric(c, "cdnca_probe_rounds_total") or 0
        time.sleep(1.0)
        assert (controld_metric(c, "cdnca_probe_rounds_total") or 0) <= rounds + 1
        write_json(ccfg, {"probe_interval_ms": 300, "log_level": "debug"})
        write_json(ncfg, {"log_format": "json", "heartbeat_interval_ms": 1000})
        c.proc.send_signal(signal.SIGHUP)
        n.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "configuration reloaded" in read(clog), 10, "controld reload logged")
        wait_until(lambda: "configuration reloaded" in read(nlog), 10, "noded reload logged")
        base = controld_metric(c, "cdnca_probe_rounds_total") or 0
        wait_until(lambda: (controld_metric(c, "cdnca_probe_rounds_total") or 0) >= base + 4, 10,
                   "probe rounds at the new interval")
        # controld's log_level debug applied: debug lines appear; noded's lines turn to JSON
        wait_until(lambda: "controld debug:" in read(clog), 10, "controld debug lines")
        assert '"level":"info","prog":"noded"' in read(nlog), read(nlog)[-2000:]

        # 3. a key that needs a restart is named, the reloadable ones still apply
        write_json(ccfg, {"probe_interval_ms": 300, "log_level": "info",
                          "node_online_ms": 5000})
        c.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "option node-online-ms changed" in read(clog), 10,
                   "restart-only key named")

        # 4. a bad file: logged, the running config kept, the daemons live on
        for path in (ccfg, ncfg):
            with open(path, "w") as f:
                f.write('{"probe_interval_ms": "soon", ')
        c.proc.send_signal(signal.SIGHUP)
        n.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "running configuration is kept" in read(clog), 10, "controld kept")
        wait_until(lambda: "running configuration is kept" in read(nlog), 10, "noded kept")
        base = controld_metric(c, "cdnca_probe_rounds_total") or 0
        wait_until(lambda: (controld_metric(c, "cdnca_probe_rounds_total") or 0) >= base + 3, 10,
                   "probe rounds still at 300 ms")

        # 5. a burst of SIGHUPs under load
        for _ in range(20):
            c.proc.send_signal(signal.SIGHUP)
            n.proc.send_signal(signal.SIGHUP)
            time.sleep(0.02)
        time.sleep(0.5)
    assert c.running() and n.running(), "a daemon died on SIGHUP"
    assert load.count > 50, "too little load: %d requests" % load.count
    assert not load.errors, "failed requests during SIGHUPs: %s" % load.errors[:5]
    # SIGTERM still stops both cleanly (exit 0, checked by stop)
    n.stop()
    c.stop()


def access_paths(text, prefix):
    """The paths of the access lines in text that start with prefix, as a list (repeats kept)."""
    return re.findall(r'"type":"access".*?"path":"(%s[^"]*)"' % re.escape(prefix), text)


def test_access_lines_kept_on_sighup_and_sigterm(tmp):
    # noded writes access lines in batches (at most 100 ms late): a SIGHUP reopen writes the
    # buffered ones into the old file first, a SIGTERM writes them out before exiting; every
    # request has its line, once.
    nlog = os.path.join(tmp, "noded-file.log")
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    st, site, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test"],
        "origins": [{"level": 1, "address": o.address, "port": o.port, "scheme": "http"}]})
    assert st == 201, site
    n = Noded(c, enrol(c, "edge"), tmp,
              extra_args=["--log-file", nlog, "--log-level", "info",
                          "--proxy-threads", "1"]).start()
    wait_until(lambda: n.visit("GET", "/warm", "shop.test", timeout=5)[0] == 200, 20,
               "the site served by noded")
    count = 150
    for i in range(count):
        st, body, _ = n.visit("GET", "/a/%d" % i, "shop.test", timeout=10)
        assert st == 200, body
    # logrotate right after the last answer: the lines still buffered belong to the old file
    os.rename(nlog, nlog + ".1")
    n.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "log file %s reopened" % nlog in read(nlog), 20, "noded's new log")
    # a worker slowed down between its answer and the line writes that line after the reopen,
    # into the new file, at most 100 ms later: wait for every line, then check each came once
    both = lambda: access_paths(read(nlog + ".1"), "/a/") + access_paths(read(nlog), "/a/")
    wait_until(lambda: len(both()) >= count, 20, "an access line for each request")
    old, new = access_paths(read(nlog + ".1"), "/a/"), access_paths(read(nlog), "/a/")
    assert sorted(old + new) == sorted("/a/%d" % i for i in range(count)), (len(old), len(new))
    # one worker thread: it finishes a request (its line) before it reads the next one, so
    # only the last request's line may still have been on its way at the SIGHUP
    assert len(old) >= count - 1, "%d of %d lines in the rotated file" % (len(old), count)
    for i in range(count):
        st, body, _ = n.visit("GET", "/b/%d" % i, "shop.test", timeout=10)
        assert st == 200, body
    n.stop()  # SIGTERM right after the last answer, exit status 0
    got = access_paths(read(nlog), "/b/") + access_paths(read(nlog + ".1"), "/b/")
    assert sorted(got) == sorted("/b/%d" % i for i in range(count)), \
        "%d of %d lines after SIGTERM" % (len(got), count)
    c.stop()


def test_state_changes_are_structured_log_lines(tmp):
    c = Controld(tmp, extra_args=["--probe-interval-ms", "300", "--log-format", "json"]).start()
    o1, o2 = Origin("a", tmpdir=tmp).start(), Origin("b", tmpdir=tmp).start()
    st, site, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test"], "health_check": {"enabled": True},
        "origins": [{"level": 1, "address": o1.address, "port": o1.port, "scheme": "http"},
                    {"level": 2, "address": o2.address, "port": o2.port, "scheme": "http"}]})
    assert st == 201, site
    primary = site["origins"][0]["id"]
    o1.set(status=503)

    def events():
        out = []
        for line in read(c.log_path).splitlines():
            if line.startswith("{") and '"event":' in line:
                out.append(json.loads(line))
        return out

    def switched():
        return [e for e in events() if e["event"] == "level.switched"]
    sw = wait_until(switched, 20, "a level.switched line")[0]
    assert sw["site_id"] == site["id"] and sw["site"] == "shop", sw
    assert sw["from_level"] == 1 and sw["to_level"] == 2 and sw["reason"] == "auto_failover", sw
    assert sw["level"] == "info" and sw["prog"] == "controld", sw
    down = [e for e in events() if e["event"] == "origin.health_changed"
            and e["origin_id"] == primary and e["to"] == "unhealthy"]
    assert len(down) == 1, events()
    assert down[0]["site_id"] == site["id"] and down[0]["source"] == "control", down[0]
    assert down[0]["votes"]["failure"] >= 1, down[0]
    # all down: one warn line for the incident
    o2.set(status=503)
    wait_until(lambda: [e for e in events() if e["event"] == "site.all_levels_unhealthy"], 20,
               "a site.all_levels_unhealthy line")
    alld = [e for e in events() if e["event"] == "site.all_levels_unhealthy"]
    assert len(alld) == 1 and alld[0]["level"] == "warn", alld


def test_node_online_offline_lines(tmp):
    c = Controld(tmp, extra_args=["--node-online-ms", "1000"]).start()
    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge"})
    assert st == 201, node
    n = Noded(c, node["token"], tmp, extra_args=["--heartbeat-interval-ms", "200"]).start()
    line = "event=node.online node_id=%d\n" % node["id"]
    off = "event=node.offline node_id=%d\n" % node["id"]
    wait_until(lambda: line in read(c.log_path), 10, "node.online")
    time.sleep(1.5)
    assert read(c.log_path).count(line) == 1, "node.online repeated while online"
    n.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: off in read(c.log_path), 10, "node.offline")
        time.sleep(1.5)
        assert read(c.log_path).count(off) == 1, "node.offline repeated"
    finally:
        n.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: read(c.log_path).count(line) == 2, 10, "node.online again")


def run(argv, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("CDNCA_NODE_TOKEN", None)
    e.update(env or {})
    p = subprocess.run(argv, env=e, cwd=cwd, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def test_check_config_controld(tmp):
    db = os.path.join(tmp, "c.db")
    good = os.path.join(tmp, "good.json")
    write_json(good, {"probe_interval_ms": 5000, "db": db})
    rc, out, err = run([CONTROLD, "--check-config", "--config", good])
    assert rc == 0 and "configuration OK" in out, (rc, out, err)
    assert "does not exist yet" in out, out
    assert not os.path.exists(db), "check-config created the database"

    # an existing database: its schema is read, nothing changes
    c = Controld(tmp, db=db).start()
    c.stop()
    before = os.stat(db).st_mtime_ns
    rc, out, err = run([CONTROLD, "--check-config", "--db", db])
    assert rc == 0 and "configuration OK" in out and "schema" in out, (rc, out, err)
    assert os.stat(db).st_mtime_ns == before

    bad = os.path.join(tmp, "bad.json")
    write_json(bad, {"probe_interval_ms": 5})
    rc, out, err = run([CONTROLD, "--check-config", "--config", bad])
    assert rc == 2 and "probe_interval_ms" in err and "configuration OK" not in out, (rc, out, err)

    write_json(bad, {"no_such_key": 1})
    rc, out, err = run([CONTROLD, "--check-config", "--config", bad])
    assert rc == 2 and "no_such_key" in err, (rc, out, err)

    # several problems at once: each is named
    rc, out, err = run([CONTROLD, "--check-config", "--db", "/nonexistent-dir/x.db",
                        "--probe-ca-file", os.path.join(tmp, "missing.pem"), "--listen", "nope",
                        "--tls-key", os.path.join(tmp, "k.pem")])
    assert rc == 2, (rc, out, err)
    for option in ("option db", "option probe-ca-file", "option listen", "option tls-cert",
                   "option tls-key"):
        assert option in err, (option, err)

    # a database that is not SQLite
    junk = os.path.join(tmp, "junk.db")
    with open(junk, "wb") as f:
        f.write(b"this is not a database" * 100)
    rc, out, err = run([CONTROLD, "--check-config", "--db", junk])
    assert rc == 2 and "junk.db" in err, (rc, out, err)


def test_migrate_only(tmp):
    """controld --migrate: applies every migration to an empty database (SQLite file, or on
    PostgreSQL an empty database) and exits 0 without serving; again it applies nothing; a
    start on the result migrates nothing; with another mode it is a usage error."""
    dialect = "pg" if harness.pg_mode() else "sqlite"
    newest = max(int(f[:4]) for f in os.listdir(os.path.join(harness.HERE, "..", "..", "schema",
                                                            dialect)) if f[:4].isdigit())
    if harness.pg_mode():
        import pgfixture  # noqa: PLC0415
        cl = pgfixture.cluster()
        db = cl.conninfo(cl.new_database("mig", template=None))  # empty, dropped after the test
    else:
        db = os.path.join(tmp, "m.db")
    for i in range(2):
        rc, out, err = run([CONTROLD, "--migrate", "--db", db])
        assert rc == 0 and "at schema %d" % newest in out, (rc, out, err)
        assert ("applying migration" in err) == (i == 0), err  # the second run applies nothing
    c = Controld(tmp, db=db)
    if harness.pg_mode():
        rows = harness.db_query(c, "SELECT version FROM schema_migrations ORDER BY version")
        assert [r[0] for r in rows] == list(range(1, newest + 1)), rows
    else:
        assert harness.db_query(c, "PRAGMA user_version") == [(newest,)]
    c.start()
    assert "applying migration" not in read(c.log_path), read(c.log_path)
    c.stop()
    rc, out, err = run([CONTROLD, "--migrate", "--export", os.path.join(tmp, "x.json"), "--db", db])
    assert rc == 2 and "one at a time" in err, (rc, out, err)
    # a database that cannot be opened: exit 1, said on stderr
    bad = ("host=%s dbname=no_such_db connect_timeout=5" % pgfixture.cluster().dir
           if harness.pg_mode() else "/nonexistent-dir/m.db")
    rc, out, err = run([CONTROLD, "--migrate", "--db", bad])
    assert rc == 1 and "migration failed" in err, (rc, out, err)


def test_check_config_noded(tmp):
    state = os.path.join(tmp, "state")
    rc, out, err = run([NODED, "--check-config", "--controld", "http://127.0.0.1:7400",
                        "--state-dir", state], env={"CDNCA_NODE_TOKEN": "nt-" + "x" * 20})
    assert rc == 0 and "configuration OK" in out, (rc, out, err)
    assert not os.path.exists(state), "check-config created the state directory"

    rc, out, err = run([NODED, "--check-config", "--controld", "http://127.0.0.1:7400"])
    assert rc == 2 and "CDNCA_NODE_TOKEN" in err, (rc, out, err)

    rc, out, err = run([NODED, "--check-config", "--controld", "ftp://x", "--listen", "nope",
                        "--origin-ca-file", os.path.join(tmp, "missing.pem")],
                       env={"CDNCA_NODE_TOKEN": "nt-" + "x" * 20})
    assert rc == 2 and "origin-ca-file" in err and "option controld" in err, (rc, out, err)
    assert "option listen" in err, err
    assert "configuration OK" not in out


class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET; collects messages."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []  # (monotonic time, {key: value})

    def pump(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append((time.monotonic(), fields))

    def count(self, key):
        self.pump()
        return sum(1 for _, m in self.messages if key in m)

    def close(self):
        self.sock.close()


def notify_flow(proc_obj, start_args, ready_probe, ns):
    """Start a daemon on ns; READY=1 only once ready_probe() holds; pings; reload; stop."""
    proc_obj._spawn(start_args, proc_obj.env)
    wait_until(lambda: ns.count("READY") >= 1, 20, "READY=1")
    # readiness was sent after the listener and the database were up
    assert ready_probe(), "READY=1 before the daemon answers"
    ready = [m for _, m in ns.messages if "READY" in m][0]
    assert ready["READY"] == "1" and "STATUS" in ready, ready
    # WATCHDOG_USEC=1 s: a ping every 0.5 s
    base = ns.count("WATCHDOG")
    wait_until(lambda: ns.count("WATCHDOG") >= base + 3, 5, "WATCHDOG=1 pings")
    assert all(m["WATCHDOG"] == "1" for _, m in ns.messages if "WATCHDOG" in m)
    # SIGHUP: RELOADING=1, then READY=1 again; pings go on
    proc_obj.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: ns.count("RELOADING") >= 1 and ns.count("READY") >= 2, 10,
               "RELOADING=1 then READY=1")
    base = ns.count("WATCHDOG")
    wait_until(lambda: ns.count("WATCHDOG") >= base + 2, 5, "pings after the reload")
    proc_obj.stop()
    ns.pump()
    assert ns.count("STOPPING") == 1, ns.messages


def test_sd_notify_controld(tmp):
    ns = NotifySocket(os.path.join(tmp, "notify.sock"))
    c = Controld(tmp)
    c.env.update({"NOTIFY_SOCKET": ns.path, "WATCHDOG_USEC": "1000000",
                  "CDNCA_ADMIN_TOKEN": c.admin_token})
    args = [c.binary, "--listen", "127.0.0.1:%d" % c.port, "--db", c.db]
    notify_flow(c, args, lambda: c.api("GET", "/healthz", token=None, timeout=2)[0] == 200, ns)
    ns.close()


def test_sd_notify_noded(tmp):
    c = Controld(tmp).start()
    ns = NotifySocket(os.path.join(tmp, "notify.sock"))
    n = Noded(c, enrol(c, "edge"), tmp)
    os.makedirs(n.state_dir, exist_ok=True)
    n.env.update({"NOTIFY_SOCKET": ns.path, "WATCHDOG_USEC": "1000000",
                  "CDNCA_NODE_TOKEN": n.node_token})
    args = [n.binary, "--controld", c.url, "--listen", "127.0.0.1:%d" % n.port,
            "--admin-listen", "127.0.0.1:%d" % n.admin_port, "--state-dir", n.state_dir]
    notify_flow(n, args, lambda: n.admin("GET", "/healthz", timeout=2)[0] == 200, ns)
    ns.close()


def test_sd_notify_absent(tmp):
    # without NOTIFY_SOCKET the daemons run as before (no error, no message)
    c = Controld(tmp).start()
    assert "sd_notify(" not in c.log_tail()
    c.stop()


def test_sigterm_while_requests_arrive(tmp):
    # controld stopped again and again while clients connect: it always exits 0 (libmicrohttpd
    # 0.9.75 aborted the process about once in tens of stops when controld quiesced its listener
    # while the daemon's epoll threads were awake)
    for i in range(20):
        c = Controld(tmp, name="cd%d" % i, extra_args=["--http-threads", "8"]).start()
        stop = threading.Event()

        def load():
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", c.port), timeout=2) as s:
                        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                        s.recv(4096)
                except OSError:
                    time.sleep(0.002)
        threads = [threading.Thread(target=load) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        try:
            c.stop()
        finally:
            stop.set()
            for t in threads:
                t.join()


if __name__ == "__main__":
    harness.main()
