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
- without a ramp, the node's own skip of the primary ends when controld switches back, so the
  primary serves at once (the node and controld agree)."""

import threading
import time

import harness
from harness import Controld, wait_until
from scenario_lib import (ONLINE_MS, WAIT, card, events, make_site, node_site, origin_spec,
                          start_node, start_origins, wait_level)
from ramp_share import HOST, node_ramp
from test_backup_levels import Load, errors

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
