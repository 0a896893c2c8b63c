#!/usr/bin/env python3
"""test_backup_levels — docs/design.md#node-skip-and-retry, backup levels on the request path:
a site with one level-1 origin and one level-2 origin behind a real noded, a visitor sending a
GET every ~100 ms on one keep-alive connection. The level-1 origin breaks (503 to everything,
health check included; or connections refused; or with controld killed first) and later
recovers: the visitor sees no error from the break, through controld's switch, to the
failback. With node_retry.backup_levels off the same break does show errors (so the load can
see them). node_retry.failure_ratio skips a primary failing half of its requests."""

import http.client
import json
import threading
import time

import harness
from harness import Controld, HOST as LOOPBACK, wait_until
from scenario_lib import (ONLINE_MS, WAIT, card, make_site, node_site, origin_spec, start_node,
                          start_origins, wait_level)

HOST = "shop.example.com"
# 2 s rounds: the node deadline (half a round) leaves noded time to run its probe tasks
ROUNDS = ["--probe-interval-ms", "2000", "--node-online-ms", str(ONLINE_MS)]
# a short skip so the recovered primary is tried again within the test
RETRY = {"skip_ms": 2000}
MAX_REQUESTS = 1500  # bound of one load run (~150 s at 100 ms)


class Load:
    """A visitor: GET every interval on one keep-alive connection (reopened only after the
    node closes it), recording (time, status or error, origin name)."""

    def __init__(self, node, interval=0.1):
        self.node = node
        self.interval = interval
        self.results = []
        self.stop_flag = threading.Event()
        self.thr = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        conn = None
        for i in range(MAX_REQUESTS):
            if self.stop_flag.is_set():
                break
            t = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(LOOPBACK, self.node.port, timeout=20)
                conn.request("GET", "/load/%d" % i, headers={"Host": HOST})
                r = conn.getresponse()
                body = r.read()
                who = None
                if r.status == 200:
                    try:
                        who = json.loads(body).get("origin")
                    except ValueError:
                        who = None
                self.results.append((t, r.status, who))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                self.results.append((t, "error %r" % e, None))
                if conn is not None:
                    conn.close()
                conn = None
            left = self.interval - (time.monotonic() - t)
            if left > 0:
                time.sleep(left)
        if conn is not None:
            conn.close()

    def start(self):
        self.thr.start()
        return self

    def finish(self):
        self.stop_flag.set()
        self.thr.join(timeout=60)
        assert not self.thr.is_alive(), "the load did not stop"
        return self.results

    def served(self, since=0.0):
        out = {}
        for t, st, who in self.results:
            if t >= since and st == 200:
                out[who] = out.get(who, 0) + 1
        return out

    def wait_served(self, who, n, what, timeout=WAIT):
        start = len(self.results)
        wait_until(lambda: sum(1 for _, st, w in self.results[start:] if st == 200 and w == who)
                   >= n, timeout=timeout, what=what, interval=0.1)


def errors(results):
    return [(round(t, 2), st) for t, st, _ in results if st != 200]


def node_origin(n, sid, oid):
    return [o for o in node_site(n, sid)["origins"] if o["id"] == oid][0]


def node_metric(n, name):
    st, text, _ = n.admin("GET", "/metrics", timeout=5)
    assert st == 200
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError("%s not in the node's metrics" % name)


def access_levels(n, oid):
    """The "level" of the node's access log lines whose last origin was oid (a Counter-like
    dict level -> lines)."""
    out = {}
    with open(n.log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            i = line.find('{"type":"access"')
            if i < 0:
                continue
            try:
                a = json.loads(line[i:])
            except ValueError:
                continue
            if a.get("origin_id") == oid:
                out[a["level"]] = out.get(a["level"], 0) + 1
    return out


def setup(tmp, retry=None):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ROUNDS).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST],
                     node_retry=dict(RETRY, **(retry or {})))
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    _, n = start_node(c, tmp, "edge")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2, timeout=WAIT,
               what="the node has the site")
    return a, b, c, n, sid, oa, ob


def break_and_recover(tmp, how):
    a, b, c, n, sid, oa, ob = setup(tmp)
    load = Load(n).start()
    load.wait_served("a", 10, "the primary serving")
    picks0 = node_metric(n, "cdnca_node_backup_picks_total")
    if how == "503":
        a.set(status=503)  # every path, the health check included
    else:
        a.stop()  # connections refused from now on
    wait_level(c, sid, 2)  # controld confirms and switches (3 rounds)
    load.wait_served("b", 10, "the backup serving on level 2")
    if how == "503":
        a.set(status=200)
    else:
        a.start()  # the same port again
    wait_level(c, sid, 1)  # automatic failback
    load.wait_served("a", 10, "the primary serving again")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    served = load.served()
    assert served.get("a", 0) >= 20 and served.get("b", 0) >= 10, served
    # before controld switched, the node itself sent the requests on to level 2
    assert node_metric(n, "cdnca_node_backup_picks_total") > picks0
    assert node_origin(n, sid, ob)["backup_picks"] >= 1, node_origin(n, sid, ob)
    assert node_origin(n, sid, oa)["skips"] >= 1, node_origin(n, sid, oa)
    # the node's probe tasks fed the same records
    assert node_origin(n, sid, oa)["probes"] >= 1, node_origin(n, sid, oa)
    # the access log says which level served: level 2 while it was a backup and after the switch
    lv = access_levels(n, ob)
    assert lv.get(2, 0) >= 10 and set(lv) == {2}, lv
    assert set(access_levels(n, oa)) == {1}
    assert card(c, sid)["current_level"] == 1
    c.stop()


def test_primary_answers_503(tmp):
    break_and_recover(tmp, "503")


def test_primary_refuses_connections(tmp):
    break_and_recover(tmp, "refuse")


def test_controld_killed_before_the_break(tmp):
    """No controld to switch levels: the node alone keeps the visitor served from level 2, and
    goes back to the primary (its half-open trial) once it recovers."""
    a, b, c, n, sid, oa, ob = setup(tmp)
    load = Load(n).start()
    load.wait_served("a", 10, "the primary serving")
    c.kill9()
    a.set(status=503)
    load.wait_served("b", 30, "the backup level serving with controld down")
    assert node_site(n, sid)["current_level"] == 1  # the node never changes the level
    a.set(status=200)
    load.wait_served("a", 10, "the primary serving again after its skip")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    o = node_origin(n, sid, ob)
    assert o["backup_picks"] >= 30, o
    assert node_metric(n, "cdnca_node_backup_picks_total") >= 30
    assert access_levels(n, ob).get(2, 0) >= 30
    c.start()  # back for a clean stop
    c.stop()


def test_backup_levels_off_shows_errors(tmp):
    """The same break with backup_levels false: the node retries only within level 1 (one
    origin), so the visitor gets errors until controld switches — the load does see them."""
    a, b, c, n, sid, oa, ob = setup(tmp, retry={"backup_levels": False})
    load = Load(n).start()
    load.wait_served("a", 10, "the primary serving")
    a.set(status=503)
    wait_level(c, sid, 2)
    load.wait_served("b", 5, "the backup serving on level 2")
    results = load.finish()
    assert len(errors(results)) >= 3, errors(results)
    assert node_metric(n, "cdnca_node_backup_picks_total") == 0
    c.stop()


def ratio_run(tmp, ratio):
    """Alternate GET /good and /bad through the node, 40 times; the primary answers 503 to /bad
    only, so half its outcomes fail. fail_count is out of reach: only the ratio can skip it.
    Returns (primary's /status record, who served /good after the 30th request, errors)."""
    a, b, c, n, sid, oa, ob = setup(tmp, retry={"fail_count": 1000, "failure_ratio": ratio,
                                                 "failure_min_volume": 10, "skip_ms": 60000})
    a.set(health_path_status={"/bad": 503})
    late, errs = set(), []
    for i in range(40):
        path = "/bad" if i % 2 else "/good"
        st, body, _ = n.visit("GET", "%s?i=%d" % (path, i), HOST)
        if st != 200:
            errs.append((i, st))
        elif i >= 30 and path == "/good":
            late.add(body.get("origin"))
    rec = node_origin(n, sid, oa)
    c.stop()
    return rec, late, errs


def test_failure_ratio_skips_the_primary(tmp):
    """node_retry.failure_ratio 0.5 over at least 10 outcomes: the primary failing half of its
    requests is skipped (fail_count alone would never), and the backup level serves; every
    failed /bad attempt was retried there, so no visitor error."""
    rec, late, errs = ratio_run(tmp, 0.5)
    assert errs == [], errs
    assert rec["state"] == "skipped" and rec["skips"] == 1, rec
    assert rec["requests"] <= 12, rec  # skipped at the 10th outcome (5 of 10 failed)
    assert late == {"b"}, late


def test_failure_ratio_off_keeps_the_primary(tmp):
    """The same traffic with failure_ratio null (the default): never skipped."""
    rec, late, errs = ratio_run(tmp, None)
    assert errs == [], errs
    assert rec["state"] == "healthy" and rec["skips"] == 0 and rec["failures"] == 20, rec
    assert late == {"a"}, late


if __name__ == "__main__":
    harness.main()
