#!/usr/bin/env python3
"""test_node_multi — noded `--controld URL1,URL2,…` (docs/design.md#cluster-mode): it skips a replica that is
down or answers 503, fails over to a controld started on the same database at another address
while visitors keep getting 200, does not cycle through replicas on a 401, refuses a bad list,
and catches up at once when controld comes back after an outage (not after a backoff step)."""

import http.server
import json
import os
import re
import subprocess
import threading
import time

import harness
from harness import HOST, Controld, Noded, Origin, free_port, wait_until
from scenario_lib import enrol, node_status as status_of, plain_site as make_site

OUTAGE_S = float(os.environ.get("CDNCA_OUTAGE_S", "5"))


def site_name(n, site_id):
    for s in status_of(n).get("sites", []):
        if s.get("id") == site_id:
            return s.get("name")
    return None


def metric(n, name):
    st, text, _ = n.admin("GET", "/metrics", timeout=5)
    assert st == 200, text
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    assert m, "%s not in /metrics" % name
    return int(m.group(1))


def log_of(n):
    with open(n.log_path, encoding="utf-8", errors="replace") as f:
        return f.read()


class FakeReplica:
    """A loopback HTTP server answering every request with one status (None: never answers, as
    a stalled host whose kernel still accepts connections); counts the requests."""

    def __init__(self, status):
        self.status = status
        self.count = 0
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def _answer(self):
                outer.count += 1
                if outer.status is None:
                    outer.release.wait(120)
                    return
                body = b'{"error":{"code":"unavailable","message":"test"}}'
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://%s:%d" % (HOST, self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class Visitors:
    """Visitor GETs through noded in a loop (bounded), every status recorded."""

    def __init__(self, node, host, limit_s=120):
        self.node, self.host, self.limit_s = node, host, limit_s
        self.statuses = []
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        end = time.monotonic() + self.limit_s
        i = 0
        while not self.stop_ev.is_set() and time.monotonic() < end:
            try:
                st, _, _ = self.node.visit("GET", "/v%d" % i, self.host, timeout=5)
            except OSError as e:
                st = "error: %s" % e
            self.statuses.append(st)
            i += 1
            time.sleep(0.05)

    def finish(self):
        self.stop_ev.set()
        self.thread.join(10)
        return self.statuses


def test_skips_dead_replica_then_fails_over_to_another(tmp):
    a = Controld(tmp, name="controld-a").start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(a, "shop", "shop.test", o)
    _, tok = enrol(a, "edge")
    dead = "http://%s:%d" % (HOST, free_port())  # nothing listens there
    # a second controld on the same database at another address, started once A is gone
    b = Controld(tmp, name="controld-b", db=a.db, admin_token=a.admin_token)
    n = Noded(dead + "," + a.url + "," + b.url, tok, tmp,
              extra_args=["--heartbeat-interval-ms", "1000", "--config-wait-ms", "3000"]).start()

    # the dead first URL is skipped: the node syncs from A
    wait_until(lambda: site_name(n, site["id"]) == "shop", 20, "first config through A")
    s = status_of(n)
    assert s["node"]["controld"] == a.url and s["node"]["controld_index"] == 1, s["node"]
    assert s["node"]["controld_count"] == 3, s["node"]
    assert s["sync"]["state"] == "live", s["sync"]
    assert metric(n, "cdnca_node_controld_index") == 1
    assert metric(n, "cdnca_node_controld_urls") == 3
    log = log_of(n)
    assert "controld 1/3 %s is away" % dead in log and "switching to controld 2/3 %s" % a.url \
        in log, log[-3000:]

    # A is killed; visitors keep being served from the synced config throughout
    visitors = Visitors(n, "shop.test")
    time.sleep(0.5)
    a.kill9()
    b.start()
    t0 = time.monotonic()
    st, body, _ = b.api("PATCH", "/v1/sites/%d" % site["id"], {"name": "shop-via-b"})
    assert st == 200, body
    wait_until(lambda: site_name(n, site["id"]) == "shop-via-b", 35,
               "the change made through B reaches the node")
    took = time.monotonic() - t0
    time.sleep(0.5)
    statuses = visitors.finish()
    print("failover: change through the third URL reached the node %.2f s after it was made; "
          "%d visitor requests, all 200: %s" % (took, len(statuses),
                                               all(x == 200 for x in statuses)))
    assert took <= 30 + 2, took  # within the backoff cap
    assert len(statuses) >= 10, statuses
    assert all(x == 200 for x in statuses), [x for x in statuses if x != 200][:5]
    s = status_of(n)
    assert s["node"]["controld"] == b.url and s["node"]["controld_index"] == 2, s["node"]
    assert s["node"]["controld_switches"] >= 2, s["node"]
    assert metric(n, "cdnca_node_controld_index") == 2
    assert metric(n, "cdnca_node_controld_switches_total") == s["node"]["controld_switches"]
    # one log line per switch
    assert len(re.findall(r"switching to controld", log_of(n))) == \
        s["node"]["controld_switches"], log_of(n)[-3000:]
    # heartbeats reach B too: the node is online there with the new seq
    def current_on_b():
        st, body, _ = b.api("GET", "/v1/nodes")
        return st == 200 and body["nodes"][0]["online"] and \
            body["nodes"][0]["config_seq"] == s["seq"]
    wait_until(current_on_b, 10, "the node's heartbeat on B")


def test_503_replica_is_skipped_without_a_tight_loop(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    _, tok = enrol(c, "edge")
    busy = FakeReplica(503)
    try:
        n = Noded(busy.url + "," + c.url, tok, tmp,
                  extra_args=["--heartbeat-interval-ms", "1000"]).start()
        wait_until(lambda: site_name(n, site["id"]) == "shop", 20, "config through the second URL")
        s = status_of(n)
        assert s["node"]["controld_index"] == 1, s["node"]
        assert "controld 1/2 %s is away (HTTP 503)" % busy.url in log_of(n), log_of(n)[-2000:]
        # once on the healthy replica it stays there
        time.sleep(2)
        s = status_of(n)
        assert s["node"]["controld_index"] == 1 and s["node"]["controld_switches"] == 1, s["node"]
        assert busy.count <= 3, busy.count
    finally:
        busy.close()


def test_stalled_replica_left_for_the_next(tmp):
    """The first replica accepts connections but never answers: the heartbeat times out (10 s),
    the node moves on, and the config long-poll held by the stalled replica is dropped at the
    switch rather than at its own timeout (config-wait-ms 25 s + 15 s)."""
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    _, tok = enrol(c, "edge")
    stalled = FakeReplica(None)
    try:
        t0 = time.monotonic()
        n = Noded(stalled.url + "," + c.url, tok, tmp).start()
        wait_until(lambda: site_name(n, site["id"]) == "shop", 30, "config through the second URL")
        took = time.monotonic() - t0
        print("stalled replica: config through the next one %.1f s after start" % took)
        assert took < 16, took
        s = status_of(n)
        assert s["node"]["controld_index"] == 1 and s["node"]["controld_switches"] == 1, s["node"]
        log = log_of(n)
        assert "controld 1/2 %s is away (Timeout" % stalled.url in log, log[-2000:]
    finally:
        stalled.close()


def test_revoked_token_does_not_rotate(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    nid, tok = enrol(c, "edge")
    other = FakeReplica(401)
    try:
        n = Noded(c.url + "," + other.url, tok, tmp,
                  extra_args=["--heartbeat-interval-ms", "300", "--config-wait-ms", "1000"]).start()
        wait_until(lambda: site_name(n, site["id"]) == "shop", 20, "first config")
        st, _, _ = c.api("DELETE", "/v1/nodes/%d" % nid)
        assert st == 204
        s = wait_until(lambda: (lambda s: s["sync"]["revoked"] and s)(status_of(n)), 30,
                       "the node notices its revocation")
        time.sleep(2)
        s = status_of(n)
        # a 401 is an answer: no switch, nothing sent to the other replica, sync stopped
        assert s["sync"]["state"] == "revoked", s["sync"]
        assert s["node"]["controld_index"] == 0 and s["node"]["controld_switches"] == 0, s["node"]
        assert other.count == 0, other.count
        assert "switching to controld" not in log_of(n)
        st, _, _ = n.visit("GET", "/z", "shop.test", timeout=10)
        assert st == 200
    finally:
        other.close()


def test_catch_up_after_outage(tmp):
    """controld away for OUTAGE_S (5 s; CDNCA_OUTAGE_S=60 measures the long case), then back on
    the same address: a change made right after reaches the node within about a second, not
    after the rest of the backoff step it was in (the default 10 s heartbeat plays no part)."""
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    _, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp).start()
    wait_until(lambda: site_name(n, site["id"]) == "shop", 20, "first config")
    c.stop()
    down = time.monotonic()
    time.sleep(OUTAGE_S)
    # come back while the node is in a backoff step with at least 3 s left, so that catching up
    # within a second cannot be the step just ending
    left_ms = wait_until(lambda: (lambda x: x >= 3000 and x)(
        status_of(n)["node"]["controld_retry_in_ms"]), 30, "a backoff step of 3 s or more",
        interval=0.02)
    c.start()
    t0 = time.monotonic()
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % site["id"], {"name": "after-outage"})
    assert st == 200, body
    wait_until(lambda: site_name(n, site["id"]) == "after-outage", 40, "the change after the outage",
               interval=0.02)
    took = time.monotonic() - t0
    log = log_of(n)
    print("catch-up after a %.1f s outage: %.2f s (the backoff had %d ms left when controld "
          "came back; back through the /healthz probe: %s)"
          % (t0 - down, took, left_ms, "answers /healthz again" in log))
    assert took <= 2.0, (took, left_ms)  # the step had >= 3 s left: not its end
    s = status_of(n)
    assert s["sync"]["state"] == "live", s["sync"]


def test_bad_lists_refused(tmp):
    binary = os.path.join(harness.BUILD, "noded", "noded")
    env = dict(os.environ)
    env["CDNCA_NODE_TOKEN"] = "node-test-token"
    cases = [
        ("http://127.0.0.1:1,ftp://127.0.0.1:2", "'ftp://127.0.0.1:2' (URL 2) is not an http"),
        ("http://127.0.0.1:1,", "URL 2 of the list is empty"),
        ("http://127.0.0.1:1,http://127.0.0.1:1/", "listed twice"),
        (",".join("http://127.0.0.1:%d" % (i + 1) for i in range(9)), "more than 8 URLs"),
    ]
    for lst, want in cases:
        r = subprocess.run([binary, "--controld", lst], capture_output=True, text=True,
                           timeout=10, env=env)
        assert r.returncode == 2 and want in r.stderr and "option controld" in r.stderr, (lst, r)
        r = subprocess.run([binary, "--check-config", "--controld", lst], capture_output=True,
                           text=True, timeout=10, env=env)
        assert r.returncode == 2 and want in r.stderr, (lst, r)
        assert r.stderr.count(want) == 1, r.stderr  # reported once
    r = subprocess.run([binary, "--check-config", "--controld",
                        "http://127.0.0.1:1, http://127.0.0.1:2/", "--state-dir",
                        os.path.join(tmp, "st")],
                       capture_output=True, text=True, timeout=10, env=env)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r
    # the same list as the "controld" key of a --config file
    for lst, ok in (("http://127.0.0.1:1,https://127.0.0.1:2", True),
                    ("http://127.0.0.1:1,127.0.0.1:2", False)):
        cfg = os.path.join(tmp, "noded.json")
        with open(cfg, "w") as f:
            json.dump({"controld": lst, "state-dir": os.path.join(tmp, "st")}, f)
        r = subprocess.run([binary, "--check-config", "--config", cfg], capture_output=True,
                           text=True, timeout=10, env=env)
        if ok:
            assert r.returncode == 0 and "configuration OK" in r.stdout, r
        else:
            assert r.returncode == 2 and "'127.0.0.1:2' (URL 2)" in r.stderr, r


if __name__ == "__main__":
    harness.main()
