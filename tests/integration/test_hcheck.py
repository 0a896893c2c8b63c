#!/usr/bin/env python3
"""test_hcheck — per-site health-check options (docs/design.md#health-check-options) end to end:
the API (validation, PATCH, the status card), controld's own probes honouring every option
(expected_codes, expected_body, HEAD, headers, a separate health port, tcp), a site's own
interval_ms, a level's healthy quorum (level_min_healthy), node probe tasks and checkpoint
plugin requests carrying the same options."""

import socket
import threading
import time

import harness
from harness import Controld, Origin, free_port, wait_until
from scenario_lib import (ONLINE_MS, Plugin, card, card_origin, enrol, events, level_health,
                          make_site, metric, origin_spec, start_node, start_origins, verdicts,
                          wait_health, wait_level, wait_online, wait_rounds)

FAST = ["--probe-interval-ms", "300"]
WAIT = 30.0


def dead_port():
    """A loopback port nothing listens on (connections are refused)."""
    return free_port()


def site_get(c, sid):
    st, body, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert st == 200, (st, body)
    return body


def last_error(c, sid, oid):
    return card_origin(card(c, sid), oid)["last_error"]


class SilentListener:
    """A TCP listener on 127.0.0.1. Without answer it accepts and never speaks (not HTTP at
    all); with answer (bytes) it reads the request and sends answer on every connection, then
    closes it."""

    def __init__(self, answer=None):
        self.answer = answer
        self.address, self.scheme = "127.0.0.1", "http"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _answer(self, conn):
        try:
            conn.settimeout(2)
            conn.recv(65536)
            conn.sendall(self.answer)
        except OSError:
            pass
        conn.close()

    def _run(self):
        self.sock.settimeout(0.2)
        conns = []
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            self.accepted += 1
            if self.answer is not None:
                self._answer(conn)
                continue
            conns.append(conn)
            if len(conns) > 50:
                for x in conns:
                    x.close()
                conns = []
        for x in conns:
            x.close()

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


# ---- the API ----

DEFAULTS = {"type": "http", "method": "GET", "headers": {}, "expected_codes": None,
            "expected_body": None, "port": None, "interval_ms": None, "level_min_healthy": 1}


def test_api_defaults_validation_patch_and_card(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid = site["id"]
    for k, v in DEFAULTS.items():
        assert site["health_check"][k] == v, (k, site["health_check"])

    # every bad value: 422 (400 for an unknown key) naming the field; nothing is created
    bad = [
        ({"type": "udp"}, 422, "health_check.type"),
        ({"method": "POST"}, 422, "health_check.method"),
        ({"headers": {"Host": "x"}}, 422, "health_check.headers.Host"),
        ({"headers": {"X-A": "a\r\nB: c"}}, 422, "health_check.headers.X-A"),
        ({"headers": {"H%d" % i: "v" for i in range(9)}}, 422, "health_check.headers"),
        ({"expected_codes": ["2xx"]}, 422, "health_check.expected_codes[0]"),
        ({"expected_codes": [200, "300-200"]}, 422, "health_check.expected_codes[1]"),
        ({"expected_codes": []}, 422, "health_check.expected_codes"),
        ({"expected_body": ""}, 422, "health_check.expected_body"),
        ({"port": 70000}, 422, "health_check.port"),
        ({"interval_ms": 500}, 422, "health_check.interval_ms"),
        ({"level_min_healthy": 0}, 422, "health_check.level_min_healthy"),
        ({"type": "tcp", "expected_codes": [200]}, 422, "health_check.type"),
        ({"method": "HEAD", "expected_body": "ok"}, 422, "health_check.expected_body"),
        ({"expect": 200}, 400, "health_check.expect"),
    ]
    for hc, status, field in bad:
        st, body, _ = c.api("POST", "/v1/sites", {"name": "x", "hostnames": ["x.example.com"],
                                                  "health_check": hc})
        assert st == status and body["error"]["field"] == field, (hc, st, body)
        assert body["error"]["message"], body
    st, lst, _ = c.api("GET", "/v1/sites")
    assert [s["id"] for s in lst["sites"]] == [sid], lst

    # PATCH: the given options change, the others stay; a bad PATCH changes nothing
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {
        "method": "HEAD", "headers": {"X-Health": "1"}, "expected_codes": ["200-299", 301],
        "port": 8081, "interval_ms": 1500, "level_min_healthy": 2}})
    assert st == 200, body
    hc = body["health_check"]
    assert hc["method"] == "HEAD" and hc["headers"] == {"X-Health": "1"}, hc
    assert hc["expected_codes"] == ["200-299", "301"] and hc["port"] == 8081, hc
    assert hc["interval_ms"] == 1500 and hc["level_min_healthy"] == 2, hc
    assert hc["path"] == "/hc" and hc["enabled"] is True, hc
    before = site_get(c, sid)
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid,
                        {"health_check": {"port": 1, "expected_codes": ["abc"]}})
    assert st == 422 and body["error"]["field"] == "health_check.expected_codes[0]", body
    after = site_get(c, sid)
    assert after["health_check"] == before["health_check"], after

    # the status card shows the options; they survive a restart (stored)
    cd = card(c, sid)
    for k in ("method", "headers", "expected_codes", "port", "interval_ms", "level_min_healthy"):
        assert cd["health_check"][k] == hc[k], (k, cd["health_check"])
    c.restart()
    assert site_get(c, sid)["health_check"] == after["health_check"]
    # null puts an option back to its default
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {
        "method": "GET", "headers": None, "expected_codes": None, "port": None,
        "interval_ms": None, "level_min_healthy": 1}})
    assert st == 200, body
    for k, v in DEFAULTS.items():
        assert body["health_check"][k] == v, (k, body["health_check"])


# ---- controld's own probes ----

def test_waf_403_fails_over_only_with_expected_codes(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    a.set(status=403)  # a WAF in front of a dead application
    wait_rounds(c, 6)
    cd = card(c, sid)
    assert cd["current_level"] == 1, cd  # the seed's rule: a 403 is an answer, so healthy
    assert card_origin(cd, oa)["health"] == "healthy", cd
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid,
                        {"health_check": {"expected_codes": ["200-299"]}})
    assert st == 200, body
    wait_level(c, sid, 2)
    o = card_origin(card(c, sid), oa)
    assert o["health"] == "unhealthy" and o["last_error"] == "unexpected status 403", o
    v = verdicts(c, sid, oa, limit=1)[0]
    assert v["votes"][0]["status"] == 403 and v["votes"][0]["error"] == "unexpected status 403", v
    sw = events(c, sid, "level.switched")
    assert sw and sw[-1]["data"]["reason"] == "auto_failover", sw
    # back to 200: healthy again, auto failback
    a.set(status=200)
    wait_level(c, sid, 1)


def test_body_mismatch(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    # origin.py answers JSON naming the origin: {"origin": "a", ...}
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)],
                     hc={"expected_body": '"origin": "a"'})
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "unhealthy")  # b answers 200, but not the marker
    assert last_error(c, sid, ob) == "body mismatch"
    assert card(c, sid)["current_level"] == 1


def test_head_and_headers_seen_by_origin(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={
        "method": "HEAD", "headers": {"X-Health-Token": "s3cret", "Accept": "text/plain"}})
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    st = a.stats()
    assert st["methods"].get("HEAD", 0) >= 2 and st["methods"].get("GET", 0) == 0, st
    h = st["last_headers"]
    assert h.get("X-Health-Token") == "s3cret" and h.get("Accept") == "text/plain", h
    assert h.get("User-Agent") == "cdnca-control-api/origin-probe", h


def test_separate_health_port(tmp):
    h, = start_origins(tmp, "health")
    c = Controld(tmp, extra_args=FAST).start()
    # both origins serve traffic on ports where nothing listens; their health port is h's
    site = make_site(c, [{"level": 1, "address": "127.0.0.1", "port": dead_port(),
                          "scheme": "http"},
                         {"level": 2, "address": "127.0.0.1", "port": dead_port(),
                          "scheme": "http"}], hc={"port": h.port})
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    assert h.stats()["paths"].get("/hc", 0) >= 4
    # without the health port the same origins are dead
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {"port": None}})
    assert st == 200, body
    wait_health(c, sid, oa, "unhealthy")
    assert last_error(c, sid, oa) == "connect failed: Connection refused"


def test_tcp_check(tmp):
    silent = SilentListener()
    try:
        c = Controld(tmp, extra_args=FAST).start()
        closed = dead_port()
        site = make_site(c, [{"level": 1, "address": "127.0.0.1", "port": silent.port,
                              "scheme": "http"},
                             {"level": 2, "address": "127.0.0.1", "port": closed,
                              "scheme": "http"}], hc={"type": "tcp", "timeout_ms": 500})
        sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
        # a listener that never speaks HTTP is healthy; a closed port is not
        wait_health(c, sid, oa, "healthy")
        wait_health(c, sid, ob, "unhealthy")
        assert last_error(c, sid, ob) == "connect failed: Connection refused"
        assert silent.accepted >= 2
        # the same listener under an http check: it never answers, so it times out
        st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {"type": "http"}})
        assert st == 200, body
        wait_health(c, sid, oa, "unhealthy")
        assert last_error(c, sid, oa) == "timeout"
    finally:
        silent.close()


def test_own_interval_under_a_longer_global_one(tmp):
    a, b, x, y = start_origins(tmp, "a", "b", "x", "y")
    c = Controld(tmp, extra_args=["--probe-interval-ms", "5000"]).start()
    fast = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], name="fast",
                     hc={"interval_ms": 1000})
    make_site(c, [origin_spec(x, 1), origin_spec(y, 2)], name="slow")
    wait_until(lambda: a.stats()["paths"].get("/hc", 0) >= 1, WAIT, "a first probe of a")
    wait_until(lambda: x.stats()["paths"].get("/hc", 0) >= 1, WAIT, "a first probe of x")
    a0, x0 = a.stats()["paths"].get("/hc", 0), x.stats()["paths"].get("/hc", 0)
    t0 = time.monotonic()
    time.sleep(6.0)
    dt = time.monotonic() - t0
    na = a.stats()["paths"].get("/hc", 0) - a0
    nx = x.stats()["paths"].get("/hc", 0) - x0
    # about once a second for the site with interval_ms 1000 (at least 3 in 6 s, impossible at
    # the global 5 s: the margin is for a loaded machine), about every 5 s for the other
    assert 3 <= na <= dt + 1.5, (na, dt)
    assert 1 <= nx <= 2, (nx, dt)
    # rounds never overlap: every round was recorded, and each is short
    assert metric(c, "cdnca_probe_rounds_total") >= na
    assert site_get(c, fast["id"])["health_check"]["interval_ms"] == 1000


def test_level_min_healthy_two_of_three(tmp):
    a1, a2, a3, b = start_origins(tmp, "a1", "a2", "a3", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a1, 1), origin_spec(a2, 1), origin_spec(a3, 1),
                         origin_spec(b, 2)], hc={"level_min_healthy": 2})
    sid = site["id"]
    o1, o2, o3 = (site["origins"][i]["id"] for i in range(3))
    for oid in (o1, o2, o3):
        wait_health(c, sid, oid, "healthy")
    # one of three down: 2 still healthy, the level holds
    a1.set(status=503)
    wait_health(c, sid, o1, "unhealthy")
    wait_rounds(c, 3)
    cd = card(c, sid)
    assert cd["current_level"] == 1 and level_health(cd, 1) == "healthy", cd
    # two of three down: one healthy origin is below the quorum, the level fails over
    a2.set(status=503)
    wait_level(c, sid, 2)
    cd = card(c, sid)
    assert level_health(cd, 1) == "unhealthy", cd
    assert card_origin(cd, o3)["health"] == "healthy", cd
    # with the seed's rule (quorum 1) the same level is healthy again: auto failback
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {"level_min_healthy": 1}})
    assert st == 200, body
    wait_level(c, sid, 1)


# ---- nodes and checkpoints judge by the same options ----

def test_node_tasks_carry_the_options(tmp):
    a, b = start_origins(tmp, "a", "b")
    # 4 s rounds: the node deadline (2 s) leaves the nodes 1.5 s per probe, room for a slow
    # test origin on a loaded machine
    c = Controld(tmp, extra_args=["--probe-interval-ms", "4000",
                                  "--node-online-ms", str(ONLINE_MS)]).start()
    nodes = [start_node(c, tmp, "edge%d" % i) for i in range(3)]
    wait_online(c, [nid for nid, _ in nodes])
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={
        "method": "HEAD", "headers": {"X-Health": "node"}, "expected_codes": ["200-299"],
        "timeout_ms": 2000})
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy", timeout=60)
    o = card_origin(card(c, sid), oa)
    assert o["source"] == "nodes", o
    recent = [r for r in a.stats()["recent"] if r["path"] == "/hc"]
    assert recent, a.stats()
    for r in recent[-3:]:
        assert r["method"] == "HEAD", r
        assert r["headers"].get("X-Health") == "node", r
        assert r["headers"].get("User-Agent") == "cdnca-node/origin-probe", r
    # the nodes judge a 403 by expected_codes: their votes fail the origin
    a.set(status=403)
    wait_level(c, sid, 2, timeout=90)
    v = verdicts(c, sid, oa, limit=1)[0]
    assert v["source"] == "nodes" and v["verdict"] == "failure", v
    node_votes = [x for x in v["votes"] if x["source"] == "nodes"]
    assert len(node_votes) >= 2, v
    assert all(x["error"] == "unexpected status 403" and x["status"] == 403
               for x in node_votes), v


def test_task_message_carries_check(tmp):
    """GET /v1/node/tasks as a node sees it (checked against controld/openapi.json): every task
    has the site's probe options as "check", the site-only ones left out."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=["--probe-interval-ms", "1000",
                                  "--node-online-ms", "60000"]).start()
    nid, tok = enrol(c, "edge-api")
    hb = {"version": "test", "config_version": 0, "observations": []}
    assert c.api("POST", "/v1/node/heartbeat", hb, token=tok)[0] == 204
    make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={
        "type": "http", "method": "HEAD", "headers": {"X-Health": "1"},
        "expected_codes": ["200-299", 301], "port": a.port, "interval_ms": 2000,
        "level_min_healthy": 2})
    st, body, _ = c.api("GET", "/v1/node/tasks?wait_ms=10000", token=tok, timeout=20)
    assert st == 200, (st, body)
    assert len(body["tasks"]) == 2, body
    for t in body["tasks"]:
        assert t["check"] == {"type": "http", "method": "HEAD", "headers": {"X-Health": "1"},
                              "expected_codes": ["200-299", "301"], "expected_body": None,
                              "port": a.port}, t


def test_own_interval_with_nodes_voting(tmp):
    """A 1 s site under a 4 s global interval keeps its node votes and its pace: the node
    deadline stays the global one, and a round ends as soon as every node has voted."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=["--probe-interval-ms", "4000",
                                  "--node-online-ms", str(ONLINE_MS)]).start()
    nodes = [start_node(c, tmp, "edge%d" % i) for i in range(3)]
    wait_online(c, [nid for nid, _ in nodes])
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)],
                     hc={"interval_ms": 1000, "timeout_ms": 1000})
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy", timeout=60)
    r0 = max(v["round_id"] for v in verdicts(c, sid, oa, limit=1))
    t0 = time.monotonic()
    time.sleep(8.0)
    dt = time.monotonic() - t0
    vs = [v for v in verdicts(c, sid, oa, limit=100) if v["round_id"] > r0]
    by_nodes = [v for v in vs if v["source"] == "nodes"]
    # at the global 4 s pace there would be at most 3 rounds; at 1 s about 8
    assert len(vs) >= 4, (len(vs), dt, vs)
    assert len(by_nodes) >= len(vs) - 1, vs  # the nodes keep deciding


def test_checkpoint_requests_carry_the_options(tmp):
    a, b = start_origins(tmp, "a", "b")
    plugin = Plugin()
    try:
        c = Controld(tmp, extra_args=FAST + ["--checkpoint-url",
                                             "http://127.0.0.1:%d/votes" % plugin.port]).start()
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={
            "checkpoints": True, "expected_codes": ["200", "204"], "expected_body": "ok",
            "headers": {"X-Check": "1"}, "port": a.port, "interval_ms": 1000})
        sid, oa = site["id"], site["origins"][0]["id"]
        wait_health(c, sid, oa, "healthy")
        assert card_origin(card(c, sid), oa)["source"] == "checkpoints"
        req = plugin.requests[-1]
        assert req["check"] == {"type": "http", "method": "GET", "headers": {"X-Check": "1"},
                                "expected_codes": ["200", "204"], "expected_body": "ok",
                                "port": a.port}, req
        assert set(req) >= {"url", "host", "timeout_ms", "user_agent", "check"}, req
    finally:
        plugin.close()


def test_checkpoint_votes_rejudged_by_the_options(tmp):
    """A vote with a status is judged by the site's options, not by the plugin's "ok"."""
    a, b = start_origins(tmp, "a", "b")
    plugin = Plugin()
    try:
        c = Controld(tmp, extra_args=FAST + ["--checkpoint-url",
                                             "http://127.0.0.1:%d/votes" % plugin.port]).start()
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={
            "checkpoints": True, "expected_codes": ["200-299"]})
        sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
        wait_health(c, sid, oa, "healthy")
        wait_health(c, sid, ob, "healthy")
        a_url = ":%d/" % a.port
        # the plugin calls a WAF's 403 "ok": the site expects 2xx, so a fails over
        plugin.vote = lambda url: (True, 403, None) if a_url in url else (True, 200, None)
        wait_level(c, sid, 2)
        o = card_origin(card(c, sid), oa)
        assert o["health"] == "unhealthy" and o["source"] == "checkpoints", o
        assert o["votes"] == {"success": 0, "failure": 2}, o
        assert o["last_error"] == "checkpoint cp-1: unexpected status 403", o
        v = verdicts(c, sid, oa, limit=1)[0]
        assert v["source"] == "checkpoints", v
        assert all(x["status"] == 403 and x["error"] == "unexpected status 403"
                   for x in v["votes"]), v
        # a plugin failing a 200 with no expected_body: the status is the whole rule, a is healthy
        plugin.vote = lambda url: (False, 200, "slow") if a_url in url else (True, 200, None)
        wait_health(c, sid, oa, "healthy")
        wait_level(c, sid, 1)  # auto failback
        o = card_origin(card(c, sid), oa)
        assert o["source"] == "checkpoints" and o["votes"] == {"success": 2, "failure": 0}, o
        assert a.stats()["paths"].get("/", 0) == 0, a.stats()  # controld never probed a itself
    finally:
        plugin.close()


def test_probe_client_curl(tmp):
    """--probe-client own (the default) reads answers with the edge's HTTP/1 rule; curl sends
    every probe through libcurl. An origin whose head is 40 KiB (the edge answers 502 past
    32 KiB) is unhealthy with the first and healthy with the second (libcurl's answers are
    bounded at 64 KiB of head and trailers); one repeating Content-Length is unhealthy with both
    (common/curlhead.c). A value other than own|curl is refused naming the option, by controld
    and by noded."""
    import os
    import subprocess
    for binary, base in ((os.path.join(harness.BUILD, "controld", "controld"),
                          ["--db", os.path.join(tmp, "x.db")]),
                         (os.path.join(harness.BUILD, "noded", "noded"),
                          ["--controld", "http://127.0.0.1:1", "--state-dir",
                           os.path.join(tmp, "st")])):
        env = dict(os.environ, CDNCA_NODE_TOKEN="t" * 32)
        r = subprocess.run([binary, "--check-config", "--probe-client", "wget"] + base,
                           capture_output=True, text=True, timeout=20, env=env)
        assert r.returncode == 2 and "probe-client" in r.stderr, r
        r = subprocess.run([binary, "--check-config", "--probe-client", "curl"] + base,
                           capture_output=True, text=True, timeout=20, env=env)
        assert r.returncode == 0 and "configuration OK" in r.stdout, r
    big = SilentListener(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 40000
                         + b"\r\nContent-Length: 2\r\n\r\nok")
    twice = SilentListener(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok")
    try:
        for client, raw, health, why in (
                ("own", big, "unhealthy", "response head too large"),
                ("curl", big, "healthy", None),
                ("own", twice, "unhealthy", "bad response framing"),
                ("curl", twice, "unhealthy", "bad response framing")):
            name = client + ("big" if raw is big else "twice")
            b = start_origins(tmp, "b" + name)[0]
            c = Controld(tmp, name="c" + name,
                         extra_args=FAST + ["--probe-client", client]).start()
            site = make_site(c, [origin_spec(raw, 1), origin_spec(b, 2)], name="s" + name)
            sid, oraw = site["id"], site["origins"][0]["id"]
            wait_health(c, sid, oraw, health)
            if health == "unhealthy":
                assert last_error(c, sid, oraw) == why, (name, last_error(c, sid, oraw))
                wait_level(c, sid, 2)
            else:
                assert card(c, sid)["current_level"] == 1
            c.stop()
    finally:
        big.close()
        twice.close()


if __name__ == "__main__":
    harness.main()
