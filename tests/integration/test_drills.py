#!/usr/bin/env python3
"""test_drills — docs/design.md, Drills, on real processes: controld, two noded, two demo
origins (level 1 "a", level 2 "b") and a visitor on each node sending a GET every 50 ms.
- the API: validation (422 with the field), the preconditions (409 with the reason code), the
  list oldest first with after=/limit=, the cancel of a finished drill (409), at most 20
  scheduled drills a site (the 21st: 409 too_many_drills, nothing stored);
- a drill to a healthy backup switches (reason drill, no incident, no failover counted), both
  nodes serve from level 2, and after duration_ms it passes and returns to level 1, with the
  target level's requests per origin, their latency and every node's apply time of both
  switches in the record, drill.started / drill.finished events and cdnca_drills_total;
- a drill to a backup answering 503 for 30 % of the visitors' requests (its health check
  passing) aborts once min_requests are in, switching back; the visitors' errors are counted
  and are no more than the 503s the backup itself served (the node passes an origin's answer
  on);
- an incident during a drill (every level down) cancels it: no switch back, the engine's rules
  take over;
- kill -9 of controld during a drill: the restarted controld ends it cleanly (the switch back,
  the result recorded), never stranded on the backup; the drill recurs (every_ms): its next one
  is scheduled and kept over a restart, and a cancel stops it."""

import time

import harness
from harness import Controld, wait_until
from scenario_lib import (ONLINE_MS, WAIT, card, events, level_health, make_site, metric,
                          node_site, origin_spec, start_node, start_origins, wait_level)
from test_backup_levels import HOST, Load, errors

ROUNDS = ["--probe-interval-ms", "1000", "--node-online-ms", str(ONLINE_MS)]


def setup(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ROUNDS).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST])
    sid = site["id"]
    nodes = [start_node(c, tmp, name)[1] for name in ("edge1", "edge2")]
    for n in nodes:
        wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2, timeout=WAIT,
                   what="the node has the site")
    # both levels healthy before a drill may start
    wait_until(lambda: [level_health(card(c, sid), lv) for lv in (1, 2)] == ["healthy"] * 2,
               timeout=WAIT, what="both levels healthy")
    return a, b, c, nodes, sid


def drill(c, sid, **body):
    return c.api("POST", "/v1/sites/%d/drills" % sid, body)


def get_drill(c, did):
    st, body, _ = c.api("GET", "/v1/drills/%d" % did)
    assert st == 200, body
    return body


def wait_finished(c, did, timeout=WAIT):
    return wait_until(lambda: (lambda d: d if d["state"] == "finished" else None)(
        get_drill(c, did)), timeout=timeout, what="drill %d finished" % did, interval=0.1)


def get_site(c, sid):
    st, body, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert st == 200, body
    return body


def incidents(c, sid):
    st, body, _ = c.api("GET", "/v1/incidents?site_id=%d" % sid)
    assert st == 200, body
    return body["incidents"]


def drill_switches(c, sid):
    return [e for e in events(c, sid, "level.switched") if e["data"]["reason"] == "drill"]


def test_api_and_pass(tmp):
    a, b, c, nodes, sid = setup(tmp)
    # validation: the field named, nothing stored
    for body, field in [({}, "to_level"), ({"to_level": 1}, "to_level"),
                        ({"to_level": 3}, "to_level"),
                        ({"to_level": 2, "duration_ms": 5000}, "duration_ms"),
                        ({"to_level": 2, "max_failure_ratio": 0}, "max_failure_ratio"),
                        ({"to_level": 2, "min_requests": 0}, "min_requests"),
                        ({"to_level": 2, "every_ms": 60000}, "every_ms")]:
        st, j, _ = drill(c, sid, **body)
        assert st == 422 and j["error"]["field"] == field, (body, st, j)
    st, j, _ = drill(c, sid, to_level=2, bogus=1)
    assert st == 400 and j["error"]["field"] == "bogus", j
    st, j, _ = drill(c, 9999, to_level=2)
    assert st == 404, j
    st, j, _ = c.api("GET", "/v1/sites/%d/drills" % sid)
    assert st == 200 and j["drills"] == [] and j["next"] is None, j
    # a read token may not start one
    st, tok, _ = c.api("POST", "/v1/tokens", {"name": "viewer", "role": "read"})
    assert st == 201, tok
    st, j, _ = c.api("POST", "/v1/sites/%d/drills" % sid, {"to_level": 2}, token=tok["token"])
    assert st == 403, j

    loads = [Load(n, interval=0.05).start() for n in nodes]
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving")
    st, d, _ = drill(c, sid, to_level=2, duration_ms=10000, max_failure_ratio=0.05,
                     min_requests=20)
    assert st == 201, d
    assert d["state"] == "running" and d["from_level"] == 1 and d["to_level"] == 2, d
    assert d["result"] is None and d["ends_at"] == d["started_at"] + 10000, d
    did = d["id"]
    # a second drill while one runs: 409 drill_running
    st, j, _ = drill(c, sid, to_level=2)
    assert st == 409 and j["error"]["code"] == "drill_running", j
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd
    assert cd["drill"]["id"] == did and cd["drill"]["to_level"] == 2, cd  # the status card shows it
    assert cd["drill"]["ends_at"] == d["ends_at"], cd
    for ld in loads:
        ld.wait_served("b", 10, "the backup serving during the drill")
    d = wait_finished(c, did, timeout=40)
    assert d["result"] == "passed", d
    assert d["requests"] >= 20 and d["failures"] == 0, d
    wait_level(c, sid, 1)
    assert card(c, sid)["drill"] is None
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving after the drill")
    results = [r for ld in loads for r in ld.finish()]
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    # the record: the backup's figures, both nodes' apply times of both switches
    ob = d["origins"]
    assert len(ob) == 1 and ob[0]["origin_id"] == [o["id"] for o in get_site(c, sid)["origins"]
                                                   if o["level"] == 2][0], ob
    assert ob[0]["requests"] == d["requests"] and ob[0]["failures"] == 0, ob
    assert ob[0]["latency_count"] >= 1 and ob[0]["latency_avg_ms"] is not None, ob
    wait_until(lambda: len(get_drill(c, did)["back_applied"]) == 2, timeout=WAIT,
               what="both nodes' apply times of the switch back")
    d = get_drill(c, did)
    assert sorted(x["node_name"] for x in d["switch_applied"]) == ["edge1", "edge2"], d
    assert all(x["took_ms"] >= 0 for x in d["switch_applied"] + d["back_applied"]), d
    # the switches: reason drill, no incident, no failover counted
    sw = drill_switches(c, sid)
    assert [(e["data"]["from_level"], e["data"]["to_level"]) for e in sw] == [(1, 2), (2, 1)], sw
    assert incidents(c, sid) == []
    assert metric(c, 'cdnca_level_switches_total{reason="drill"}') in (None, 0), "counted"
    assert metric(c, 'cdnca_drills_total{result="passed"}') == 1
    started = events(c, sid, "drill.started")
    fin = events(c, sid, "drill.finished")
    assert len(started) == 1 and started[0]["data"]["drill_id"] == did, started
    assert len(fin) == 1 and fin[0]["data"]["result"] == "passed", fin
    # the list, oldest first with after=/limit=; a finished drill cannot be cancelled
    st, d2, _ = drill(c, sid, to_level=2, start_at=int(time.time() * 1000) + 3600000)
    assert st == 201 and d2["state"] == "scheduled", d2
    st, j, _ = c.api("GET", "/v1/sites/%d/drills?limit=1" % sid)
    assert st == 200 and [x["id"] for x in j["drills"]] == [did] and j["next"] == did, j
    st, j, _ = c.api("GET", "/v1/sites/%d/drills?after=%d" % (sid, did))
    assert st == 200 and [x["id"] for x in j["drills"]] == [d2["id"]], j
    st, j, _ = c.api("POST", "/v1/drills/%d/cancel" % did)
    assert st == 409 and j["error"]["code"] == "drill_finished", j
    # at most 20 scheduled drills a site: the 21st is refused 409 too_many_drills, nothing stored
    later = int(time.time() * 1000) + 7200000
    for i in range(19):
        st, j, _ = drill(c, sid, to_level=2, start_at=later + i)
        assert st == 201 and j["state"] == "scheduled", (i, st, j)
    st, j, _ = c.api("GET", "/v1/sites/%d/drills?limit=1000" % sid)
    assert st == 200 and len(j["drills"]) == 21, j
    st, j, _ = drill(c, sid, to_level=2, start_at=later + 100)
    assert st == 409 and j["error"]["code"] == "too_many_drills", (st, j)
    st, j, _ = c.api("GET", "/v1/sites/%d/drills?limit=1000" % sid)
    assert st == 200 and len(j["drills"]) == 21, j
    assert sum(1 for x in j["drills"] if x["state"] == "scheduled") == 20, j
    st, j, _ = c.api("POST", "/v1/drills/%d/cancel" % d2["id"])
    assert st == 200 and j["result"] == "cancelled", j
    # a place freed by the cancel takes a new one
    st, j, _ = drill(c, sid, to_level=2, start_at=later + 200)
    assert st == 201 and j["state"] == "scheduled", (st, j)
    assert card(c, sid)["current_level"] == 1
    c.stop()


def test_bad_backup_aborts(tmp):
    a, b, c, nodes, sid = setup(tmp)
    loads = [Load(n, interval=0.05).start() for n in nodes]
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving")
    # the backup's health check passes, 30 % of its visitors' requests get 503
    b.set(fail_share=0.3, health_path_status={"/hc": 200})
    st, d, _ = drill(c, sid, to_level=2, duration_ms=60000, max_failure_ratio=0.05,
                     min_requests=20)
    assert st == 201 and d["state"] == "running", d
    t0 = time.monotonic()
    d = wait_finished(c, d["id"], timeout=40)
    took = time.monotonic() - t0
    assert d["result"] == "aborted", d
    assert d["failures"] >= 1 and d["requests"] >= 20, d
    assert "failed" in d["why"], d
    wait_level(c, sid, 1)
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving after the abort")
    results = [r for ld in loads for r in ld.finish()]
    errs = errors(results)
    # the 503s the backup served: 3 of every 10 of its visitors' requests (origin.py fail_share)
    served = sum(v for p, v in b.stats()["paths"].items() if p.startswith("/load/"))
    bad = int(served * 0.3)
    print("drill aborted after %.2f s: controld counted %d requests, %d failures on the backup; "
          "the backup served %d, %d of them 503; visitor errors %d"
          % (took, d["requests"], d["failures"], served, bad, len(errs)))
    # no visitor error beyond those the bad backup served before the abort
    assert len(errs) <= bad, (errs[:10], d, served)
    # the node answers a failed attempt with nowhere left to retry as 502 (or passes the 503)
    assert all(st in (502, 503) for _, st in errs), errs[:10]
    sw = drill_switches(c, sid)
    assert [(e["data"]["from_level"], e["data"]["to_level"]) for e in sw] == [(1, 2), (2, 1)], sw
    assert incidents(c, sid) == []
    assert metric(c, 'cdnca_drills_total{result="aborted"}') == 1
    c.stop()


def test_incident_cancels(tmp):
    a, b, c, nodes, sid = setup(tmp)
    st, d, _ = drill(c, sid, to_level=2, duration_ms=120000, min_requests=1000000)
    assert st == 201 and d["state"] == "running", d
    # the primary falls first, then the backup: every level down opens an incident
    a.set(status=503)
    wait_until(lambda: level_health(card(c, sid), 1) == "unhealthy", timeout=WAIT,
               what="the primary unhealthy")
    assert get_drill(c, d["id"])["state"] == "running"
    b.set(status=503)
    d = wait_finished(c, d["id"], timeout=40)
    assert d["result"] == "cancelled" and "incident" in d["why"], d
    inc = incidents(c, sid)
    assert len(inc) == 1 and inc[0]["trigger"] == "all_levels_unhealthy", inc
    # no switch back: the engine's rules have the site
    assert len(drill_switches(c, sid)) == 1
    # the primary recovers: the engine fails back by its own rules
    a.set(status=200)
    b.set(status=200)
    wait_level(c, sid, 1)
    st, j, _ = drill(c, sid, to_level=2)
    assert st == 409 and j["error"]["code"] in ("incident_open", "level_unhealthy"), j
    c.stop()


def test_controld_killed_mid_drill(tmp):
    a, b, c, nodes, sid = setup(tmp)
    loads = [Load(n, interval=0.05).start() for n in nodes]
    st, d, _ = drill(c, sid, to_level=2, duration_ms=15000, min_requests=20, every_ms=3600000)
    assert st == 201 and d["state"] == "running" and d["every_ms"] == 3600000, d
    for ld in loads:
        ld.wait_served("b", 10, "the backup serving during the drill")
    c.kill9()
    time.sleep(2)
    c.start()
    d = wait_finished(c, d["id"], timeout=60)
    assert d["result"] == "passed", d
    wait_level(c, sid, 1)
    for n in nodes:
        wait_until(lambda: (node_site(n, sid) or {}).get("current_level") == 1, timeout=WAIT,
                   what="%s back on level 1" % n.name)
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving after the drill")
    results = [r for ld in loads for r in ld.finish()]
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    sw = drill_switches(c, sid)
    assert [(e["data"]["from_level"], e["data"]["to_level"]) for e in sw] == [(1, 2), (2, 1)], sw
    assert incidents(c, sid) == []
    # recurring: the next drill is scheduled every_ms after this one's start, and a restart
    # keeps it
    nxt = get_drill(c, d["next_id"])
    assert nxt["state"] == "scheduled" and nxt["start_at"] == d["start_at"] + 3600000, nxt
    assert nxt["every_ms"] == 3600000 and nxt["to_level"] == 2, nxt
    c.stop()
    c.start()
    assert get_drill(c, nxt["id"])["state"] == "scheduled"
    st, j, _ = c.api("POST", "/v1/drills/%d/cancel" % nxt["id"])
    assert st == 200 and j["result"] == "cancelled" and j["next_id"] is None, j
    c.stop()


if __name__ == "__main__":
    harness.main()
