#!/usr/bin/env python3
"""test_failback_ramp — docs/design.md, Failback ramp, on real processes: controld, a noded, two
demo origins (level 1 "a", level 2 "b") and a visitor sending a GET every 50 ms. The primary
breaks, controld fails over, the primary recovers:
- with a healthy primary the failback ramps: both levels serve while it runs, then controld
  completes it (level.switched, auto_failback), and the visitor sees no error;
- with a primary whose health check passes but whose visitors get 503, the nodes' failures abort
  the ramp (failback.aborted), the site stays on level 2 and is held, and the visitor sees no
  error (the node retries the ramp level's failures on level 2);
- kill -9 of controld mid-ramp: the restarted controld completes the ramp it finds stored;
- the operator's switch back with "ramp": true ramps too; a ramp level left with no enabled
  origin aborts; two operators switching back at once, one with a ramp and one without, leave
  one consistent state (with the same If-Match one of them is 412);
- two nodes under a flood: the primary's share of the requests each step, counted at the
  origins, is the step's percentage within 5 points;
- without a ramp, the node's own skip of the primary ends when controld switches back, so the
  primary serves at once (the node and controld agree)."""

import http.client
import threading
import time

import harness
from harness import Controld, HOST as LOOPBACK, wait_until
from scenario_lib import (ONLINE_MS, WAIT, card, events, make_site, node_site, origin_spec,
                          start_node, start_origins, wait_level)
from test_backup_levels import Load, errors

HOST = "shop.example.com"
ROUNDS = ["--probe-interval-ms", "1000", "--node-online-ms", str(ONLINE_MS)]
# a long node skip: without the switch-back rule it would outlast controld's failback
RETRY = {"skip_ms": 30000}


def setup(tmp, ramp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ROUNDS).start()
    extra = {"failback_ramp": ramp} if ramp else {}
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST], node_retry=RETRY,
                     **extra)
    sid = site["id"]
    _, n = start_node(c, tmp, "edge")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2, timeout=WAIT,
               what="the node has the site")
    return a, b, c, n, sid


def fail_over(a, c, n, sid, load):
    load.wait_served("a", 10, "the primary serving")
    a.set(status=503)  # the health check included
    wait_level(c, sid, 2)
    load.wait_served("b", 10, "the backup serving on level 2")


def node_ramp(n, sid):
    return (node_site(n, sid) or {}).get("ramp")


def test_ramp_completes(tmp):
    ramp = {"steps": [10, 50, 100], "step_ms": 2000, "max_failure_ratio": 0.2, "min_requests": 5}
    a, b, c, n, sid = setup(tmp, ramp)
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    r = wait_until(lambda: node_ramp(n, sid), timeout=WAIT, what="the node has the ramp",
                   interval=0.05)
    assert r["from_level"] == 2 and r["to_level"] == 1 and r["steps"] == [10, 50, 100], r
    assert r["share"] in (10, 50, 100), r
    in_ramp = len(load.results)
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd  # the level switches only when the ramp completes
    if cd["ramp"] is not None:
        assert cd["ramp"]["to_level"] == 1 and cd["ramp"]["share"] in (10, 50, 100), cd
    wait_level(c, sid, 1)
    done = len(load.results)
    load.wait_served("a", 10, "the primary serving after the ramp")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    during = {}
    for _, st, who in results[in_ramp:done]:
        during[who] = during.get(who, 0) + 1
    # while it ran both levels served (an instant failback sends everything to "a" at once)
    assert during.get("a", 0) >= 1 and during.get("b", 0) >= 1, during
    started = events(c, sid, "failback.ramp_started")
    assert len(started) == 1 and started[0]["data"]["to_level"] == 1, started
    sw = [e for e in events(c, sid, "level.switched") if e["data"]["to_level"] == 1]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failback", sw
    assert events(c, sid, "failback.aborted") == []
    assert card(c, sid)["ramp"] is None
    wait_until(lambda: node_ramp(n, sid) is None, timeout=WAIT, what="the node's ramp ended")
    c.stop()


def test_ramp_aborts_on_visitor_errors(tmp):
    ramp = {"steps": [20, 50, 100], "step_ms": 5000, "max_failure_ratio": 0.2, "min_requests": 5}
    a, b, c, n, sid = setup(tmp, ramp)
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    # the health check passes again, the visitors' requests do not
    a.set(status=503, health_path_status={"/hc": 200})
    wait_until(lambda: events(c, sid, "failback.ramp_started"), timeout=WAIT,
               what="the ramp started")
    ab = wait_until(lambda: events(c, sid, "failback.aborted"), timeout=WAIT,
                    what="the ramp aborted")
    assert ab[0]["data"]["failures"] >= 1 and ab[0]["data"]["to_level"] == 1, ab
    cd = card(c, sid)
    assert cd["current_level"] == 2 and cd["ramp"] is None, cd
    assert cd["failback_held_until"] is not None, cd
    wait_until(lambda: node_ramp(n, sid) is None, timeout=WAIT, what="the node's ramp ended")
    load.wait_served("b", 20, "level 2 serving after the abort")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    assert [e for e in events(c, sid, "level.switched") if e["data"]["to_level"] == 1] == []
    assert card(c, sid)["current_level"] == 2
    c.stop()


def test_controld_restart_mid_ramp(tmp):
    ramp = {"steps": [10, 50, 100], "step_ms": 3000, "max_failure_ratio": 0.2, "min_requests": 5}
    a, b, c, n, sid = setup(tmp, ramp)
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    wait_until(lambda: node_ramp(n, sid), timeout=WAIT, what="the node has the ramp",
               interval=0.05)
    c.kill9()
    # the node goes on with the ramp on its own clock
    wait_until(lambda: (node_ramp(n, sid) or {}).get("share") == 100, timeout=WAIT,
               what="the node at the ramp's last step with controld down", interval=0.1)
    c.start()
    wait_level(c, sid, 1)
    load.wait_served("a", 10, "the primary serving after the ramp")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    sw = [e for e in events(c, sid, "level.switched") if e["data"]["to_level"] == 1]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failback", sw
    assert card(c, sid)["ramp"] is None
    c.stop()


def test_manual_switch_back_with_ramp(tmp):
    """failback manual: the operator's switch back with "ramp": true ramps and completes;
    without a failback_ramp, or to a later level, "ramp" is a 422 naming it."""
    ramp = {"steps": [50, 100], "step_ms": 1000, "max_failure_ratio": 0.2, "min_requests": 5}
    a, b, c, n, sid = setup(tmp, ramp)
    st, _, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"failback": "manual"})
    assert st == 200
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    wait_until(lambda: card(c, sid)["failback_available"], timeout=WAIT,
               what="the failback available")
    st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 3, "ramp": True})
    assert st == 422 and body["error"]["field"] == "level", body
    st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1, "ramp": "yes"})
    assert st == 422 and body["error"]["field"] == "ramp", body
    st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1, "ramp": True})
    assert st == 200 and body["current_level"] == 2 and body["ramp"]["to_level"] == 1, body
    wait_level(c, sid, 1)
    started = events(c, sid, "failback.ramp_started")
    assert len(started) == 1 and started[0]["data"]["by"] == "bootstrap", started
    load.wait_served("a", 10, "the primary serving after the ramp")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    # a site without a failback_ramp: "ramp" is refused, nothing changes
    st, _, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"failback_ramp": None})
    assert st == 200
    st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2})
    assert st == 200 and body["current_level"] == 2, body
    st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1, "ramp": True})
    assert st == 422 and body["error"]["field"] == "ramp", body
    assert card(c, sid)["current_level"] == 2
    c.stop()


def test_ramp_level_disabled_aborts(tmp):
    """The ramp's level loses its last enabled origin mid-ramp: the ramp aborts, nothing switches
    to a level that cannot serve."""
    ramp = {"steps": [10, 50, 100], "step_ms": 5000, "max_failure_ratio": 0.2, "min_requests": 5}
    a, b, c, n, sid = setup(tmp, ramp)
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    wait_until(lambda: card(c, sid)["ramp"], timeout=WAIT, what="the ramp running")
    oa = [o for o in c.api("GET", "/v1/sites/%d" % sid)[1]["origins"] if o["level"] == 1][0]
    st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oa["id"]), {"enabled": False})
    assert st == 200, body
    ab = wait_until(lambda: events(c, sid, "failback.aborted"), timeout=WAIT,
                    what="the ramp aborted")
    assert ab[0]["data"]["to_level"] == 1, ab
    cd = card(c, sid)
    assert cd["current_level"] == 2 and cd["ramp"] is None, cd
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    c.stop()


def test_failback_ends_node_skip(tmp):
    """No ramp: after controld switches back, the primary serves at once although the node's own
    30 s skip of it would still run."""
    a, b, c, n, sid = setup(tmp, None)
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    wait_until(lambda: (node_site(n, sid) or {}).get("current_level") == 1, timeout=WAIT,
               what="the node applied the failback", interval=0.05)
    at = time.monotonic()
    # the next 20 requests after the node applied it (about 1 s): at least 90 % from the primary
    wait_until(lambda: sum(1 for t, _, _ in load.results if t >= at) >= 20, timeout=WAIT,
               what="20 requests after the failback")
    results = load.finish()
    after = [who for t, st, who in results if t >= at][:20]
    assert sum(1 for w in after if w == "a") >= 18, after
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    c.stop()


class Flood:
    """Visitors without a pause: `per_node` threads per node, each on its own keep-alive
    connection, sending GET /load/<node name>/<i> back to back until stopped (bounded by
    FLOOD_MAX requests a thread). The origins stamp each arrival (origin.py, /__times), so the
    node a request came through is in its path. .count, .errors = [(node, status or error)]."""

    def __init__(self, nodes, per_node=2):
        self.nodes, self.per_node = nodes, per_node
        self.count, self.errors = 0, []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thr = [threading.Thread(target=self._run, args=(n,), daemon=True)
                    for n in nodes for _ in range(per_node)]

    def _run(self, node):
        conn, done, errs = None, 0, []
        for i in range(FLOOD_MAX):
            if self.stop_flag.is_set():
                break
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(LOOPBACK, node.port, timeout=20)
                conn.request("GET", "/load/%s/%d" % (node.name, i), headers={"Host": HOST})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errs.append((node.name, r.status))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                errs.append((node.name, "error %r" % e))
                if conn is not None:
                    conn.close()
                conn = None
            done += 1
        if conn is not None:
            conn.close()
        with self.lock:
            self.count += done
            self.errors += errs

    def start(self):
        for t in self.thr:
            t.start()
        return self

    def finish(self):
        self.stop_flag.set()
        for t in self.thr:
            t.join(timeout=60)
            assert not t.is_alive(), "the flood did not stop"
        return self


# the share test: each step's requests counted at the origins, edges of SHARE_MARGIN_MS left out
SHARE_STEP_MS = 2000
SHARE_MARGIN_MS = 250
SHARE_MIN_PER_STEP = 1500
FLOOD_MAX = 200000


def watch_ramps(nodes, sid, seen):
    """For wait_until: note in seen[node name] = (wall ms, ramp) when each node is first seen
    carrying the site's ramp; true once every node has."""
    for n in nodes:
        if n.name not in seen:
            r = node_ramp(n, sid)
            if r:
                seen[n.name] = (time.time() * 1000.0, r)
    return len(seen) == len(nodes)


def check_step_shares(seen, nodes, a, b, flood):
    """The primary a's share of the flood's requests (a's and b's arrivals, per node) in each step
    of the ramp the nodes carried, as test_two_nodes_share_follows_steps explains: within 5
    points of the step's percentage, on at least SHARE_MIN_PER_STEP requests a step."""
    r0 = seen[nodes[0].name][1]
    assert all(r["started_at"] == r0["started_at"] for _, r in seen.values()), seen
    start, step = r0["started_at"], r0["step_ms"]
    counts = [[0, 0] for _ in r0["steps"]]  # per step: [requests at a, requests at both]
    for n in nodes:
        saw, r = seen[n.name]
        ofs = r["clock_offset_ms"]
        for idx, o in ((0, a), (1, b)):
            for t in o.times("/load/%s/" % n.name):
                ct = t + ofs
                k = int((ct - start) // step)
                if k < 0 or k >= len(counts):
                    continue
                lo = start + k * step + SHARE_MARGIN_MS
                if k == 0:
                    lo = max(lo, saw + ofs + SHARE_MARGIN_MS)
                if ct < lo or ct > start + (k + 1) * step - SHARE_MARGIN_MS:
                    continue
                if idx == 0:
                    counts[k][0] += 1
                counts[k][1] += 1
    report = ["step %d (%d %%): %d of %d at the primary = %.1f %%"
              % (k, r0["steps"][k], ca, cn, 100.0 * ca / cn if cn else float("nan"))
              for k, (ca, cn) in enumerate(counts)]
    print("  %d requests in the flood; %s" % (flood.count, "; ".join(report)))
    for k, (ca, cn) in enumerate(counts):
        assert cn >= SHARE_MIN_PER_STEP, "too few requests to judge: %s" % report
        assert abs(100.0 * ca / cn - r0["steps"][k]) <= 5.0, report


def test_two_nodes_share_follows_steps(tmp):
    """Two nodes under a flood of visitors; the primary recovers and the failback ramps
    [10, 50, 100] x 2 s. The primary's share of the requests in each step, counted where they
    arrive (the origins stamp every request with this machine's wall clock; its path names the
    node it came through), is the step's percentage within 5 points, on each step.

    Bucketing: a request arriving at wall time t through node N is in controld's time
    t + N's clock offset (the node's /status shows the offset it applies); step k covers
    [started_at + k * step_ms, started_at + (k + 1) * step_ms) of the ramp the nodes carry.
    SHARE_MARGIN_MS (250 ms) at each edge of each step is left out: the node draws a request's
    level when its attempt starts, and the origin stamps it after a loopback hop and its own
    request parsing, a few ms later and under load up to tens of ms; the node's clock offset
    is read from controld's time on a long-poll answer, off by that answer's own latency; and
    the test reads the offset once. The first step counts from when the test saw the ramp in
    the node's /status (the node applies it after its long-poll answer), plus the margin.

    Statistics: the split is a random draw per request, so a step's share of n requests has a
    standard deviation of 100 sqrt(p (1 - p) / n) points: at 50 % and the SHARE_MIN_PER_STEP
    (1500) the test requires in every step, 1.3 points, so 5 points is 3.9 of them (a false
    failure about once in 10,000 runs); the flood (four client threads on keep-alive
    connections) usually puts several thousand requests in each step. The counts are printed.
    Visitors see no error."""
    ramp = {"steps": [10, 50, 100], "step_ms": SHARE_STEP_MS, "max_failure_ratio": 0.2,
            "min_requests": 5}
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ROUNDS).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST], node_retry=RETRY,
                     failback_ramp=ramp)
    sid = site["id"]
    nodes = [start_node(c, tmp, "edge%d" % i)[1] for i in (1, 2)]
    for n in nodes:
        wait_until(lambda n=n: len((node_site(n, sid) or {}).get("origins", [])) == 2,
                   timeout=WAIT, what="%s has the site" % n.name)
    load = Load(nodes[0], interval=0.05).start()
    fail_over(a, c, nodes[0], sid, load)
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    flood = Flood(nodes).start()
    seen = {}  # node name -> (wall ms when the test first saw the ramp, the ramp)
    try:
        a.set(status=200)
        wait_until(lambda: watch_ramps(nodes, sid, seen), timeout=WAIT,
                   what="both nodes have the ramp", interval=0.02)
        wait_level(c, sid, 1)
        time.sleep(0.5)
    finally:
        flood.finish()
    assert flood.errors == [], "visitor errors: %s" % flood.errors[:10]
    check_step_shares(seen, nodes, a, b, flood)
    sw = [e for e in events(c, sid, "level.switched") if e["data"]["to_level"] == 1]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failback", sw
    assert events(c, sid, "failback.aborted") == []
    c.stop()


def db_rows(c, q):
    """Rows of a query on controld's own database (its SQLite file, or its PostgreSQL database)
    as lists of strings, None for NULL (psql prints NULL as an empty field: the queries here
    read no empty text)."""
    if c.db.startswith(("host=", "postgres")):
        import pgfixture
        return [[v if v != "" else None for v in r] for r in pgfixture.psql(c.db, q)]
    import sqlite3
    con = sqlite3.connect("file:%s?mode=ro" % c.db, uri=True, timeout=10)
    try:
        return [[None if v is None else str(v) for v in r] for r in con.execute(q)]
    finally:
        con.close()


def at_once(c, sid, bodies, headers):
    """POST each body to the site's switch from its own thread, released together; the answers
    (status, body) in the order of bodies."""
    gate = threading.Barrier(len(bodies))
    out = [None] * len(bodies)

    def send(i):
        gate.wait(10)
        st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, bodies[i], headers=headers)
        out[i] = (st, body)
    thr = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(bodies))]
    for t in thr:
        t.start()
    for t in thr:
        t.join(60)
        assert not t.is_alive()
    return out


def consistent_state(c, n, sid):
    """The site's one state, the same wherever it is read: the status card, the stored row and
    the node's applied config. (current_level, the ramp's to_level or None)."""
    cd = card(c, sid)
    ramp_to = cd["ramp"]["to_level"] if cd["ramp"] else None
    (lvl, ramp_text, ramp_col), = db_rows(
        c, "SELECT current_level, ramp, ramp_to_level FROM sites WHERE id = %d" % sid)
    assert int(lvl) == cd["current_level"], (lvl, cd)
    # no ramp recorded beside a level it does not leave: a running ramp is from the current level
    if ramp_to is None:
        assert ramp_text is None and ramp_col in (None, "0"), (ramp_text, ramp_col, cd)
    else:
        assert int(ramp_col) == ramp_to < cd["current_level"], (ramp_text, ramp_col, cd)
        assert cd["ramp"]["from_level"] == cd["current_level"], cd

    def node_agrees():
        ns = node_site(n, sid) or {}
        r = ns.get("ramp")
        return (ns.get("current_level") == cd["current_level"]
                and (r["to_level"] if r else None) == ramp_to)
    wait_until(node_agrees, timeout=WAIT, what="the node applies the site's state")
    return cd["current_level"], ramp_to


def test_two_operators_switch_back_at_once(tmp):
    """Two operators switch the site back to its primary at the same moment, one with
    "ramp": true and one without. With the same If-Match (the revision both read), one wins and
    the other is 412: an operator's switch changes the revision. Without If-Match both are
    applied one after the other, in either order: a ramp then the plain switch ends the ramp on
    level 1; the plain switch then the ramp is 422 (field ramp: level 1 is no longer before the
    current one). Every round ends in one state, the same in the status card, the stored row
    and the node's config; never a ramp recorded on a site switched plainly. Each round starts
    with the operator's plain switch to level 2, which ends a running ramp there."""
    ramp = {"steps": [50, 100], "step_ms": 600000, "max_failure_ratio": 1.0,
            "min_requests": 100000}  # a ramp that runs through the test, never aborted
    a, b, c, n, sid = setup(tmp, ramp)
    st, _, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"failback": "manual"})
    assert st == 200
    load = Load(n, interval=0.05).start()
    fail_over(a, c, n, sid, load)
    a.set(status=200)
    wait_until(lambda: card(c, sid)["failback_available"], timeout=WAIT,
               what="the failback available")
    ramp_body, plain_body = {"level": 1, "ramp": True}, {"level": 1}
    outcomes = {}
    for rnd in range(8):
        # back on level 2 with no ramp (a plain switch ends a running one)
        st, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2})
        assert st == 200 and body["current_level"] == 2 and body["ramp"] is None, body
        assert consistent_state(c, n, sid) == (2, None)
        if_match = rnd % 2 == 0
        headers = None
        if if_match:
            st, _, hdrs = c.api("GET", "/v1/sites/%d" % sid)
            headers = {"If-Match": hdrs["ETag"]}
        bodies = [ramp_body, plain_body] if rnd % 4 < 2 else [plain_body, ramp_body]
        answers = at_once(c, sid, bodies, headers)
        got = dict(zip(("ramp" if x is ramp_body else "plain" for x in bodies), answers))
        state = consistent_state(c, n, sid)
        rs, ps = got["ramp"][0], got["plain"][0]
        if if_match:
            assert sorted([rs, ps]) == [200, 412], got
            lost = got["ramp"] if rs == 412 else got["plain"]
            assert lost[1]["error"]["code"] == "precondition_failed", got
            # the winner's state, nothing of the loser's
            assert state == ((2, 1) if rs == 200 else (1, None)), (state, got)
            outcome = "If-Match: %s won" % ("ramp" if rs == 200 else "plain")
        else:
            assert ps == 200, got
            assert rs in (200, 422), got
            if rs == 422:
                assert got["ramp"][1]["error"]["field"] == "ramp", got
            # whichever came first, the plain switch leaves level 1 without a ramp
            assert state == (1, None), (state, got)
            outcome = "no If-Match: ramp %s" % ("applied then ended" if rs == 200 else "422")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print("  outcomes: %s" % outcomes)
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    c.stop()


if __name__ == "__main__":
    harness.main()
