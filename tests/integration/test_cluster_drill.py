#!/usr/bin/env python3
"""test_cluster_drill — docs/design.md, Drills, across a change of engine leader (cluster mode,
docs/design.md#cluster-mode): two controld replicas on one PostgreSQL database (pgfixture.py),
two nodes given both replicas, two origins (level 1 "a", level 2 "b") and a visitor on each
node sending a GET every 50 ms.

A recurring drill to level 2 (every_ms 1 h, duration 12 s) starts; while it runs the engine
leader is killed (kill -9). Meanwhile:
- the other replica takes the lease, finds the drill running in the database and decides it:
  it passes when its duration (from the stored start) ends and the site switches back to level 1
  (reason drill), never stranded on level 2, both nodes back on level 1;
- the record: passed, the drill level's requests counted (over the leader change), no failure;
  exactly one drill.started and one drill.finished for it; no incident;
- the next occurrence is scheduled (next_id, start_at = the first's + every_ms) and survives a
  second leader change (the killed replica restarted, the other stopped): still the one
  scheduled drill, nothing decided twice;
- no visitor sees an error.

Always runs on PostgreSQL (a database of the run's cluster, or a cluster of its own when run by
hand); exits 77 (skipped) when the server binaries are missing."""

import sys
import time

import harness
import pgfixture
from cluster_site import ClusterSite
from harness import wait_until
from scenario_lib import WAIT, card, events, level_health, metric, node_site
from test_backup_levels import Load, errors

DURATION_MS = 12000  # the kill and the lease's expiry (ttl 2 s) fall well inside it
EVERY_MS = 3600000


def get_drill(r, did):
    st, body, _ = r.api("GET", "/v1/drills/%d" % did)
    assert st == 200, body
    return body


def site_drills(r, sid):
    st, body, _ = r.api("GET", "/v1/sites/%d/drills" % sid)
    assert st == 200, body
    return body["drills"]


def of_drill(r, sid, etype, did):
    return [e for e in events(r, sid, etype) if e["data"]["drill_id"] == did]


def test_engine_killed_mid_drill(tmp):
    cs = ClusterSite(tmp)
    a, b, cl, eng, other, sid, nodes = cs.a, cs.b, cs.cl, cs.eng, cs.other, cs.sid, cs.nodes
    wait_until(lambda: [level_health(card(eng, sid), lv) for lv in (1, 2)] == ["healthy"] * 2,
               timeout=WAIT, what="both levels healthy")
    loads = [Load(n, interval=0.05).start() for n in nodes]
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving")
    old_epoch = cl.health(eng)["epoch"]
    st, d, _ = eng.api("POST", "/v1/sites/%d/drills" % sid,
                       {"to_level": 2, "duration_ms": DURATION_MS, "min_requests": 20,
                        "every_ms": EVERY_MS})
    assert st == 201 and d["state"] == "running" and d["every_ms"] == EVERY_MS, d
    did = d["id"]
    for ld in loads:
        ld.wait_served("b", 10, "the backup serving during the drill")
    # still running, decided by the engine about to die: whatever ends it runs on the other
    assert cl.engines() == [eng], "the engine changed before the kill"
    cur = get_drill(other, did)
    assert cur["state"] == "running", cur
    assert card(other, sid)["current_level"] == 2
    killed_ms = time.time() * 1000.0
    eng.kill9()
    new = cl.wait_engine(WAIT, among=[other], interval=0.05)
    took = time.time() * 1000.0 - killed_ms
    d = wait_until(lambda: (lambda x: x if x["state"] == "finished" else None)(
        get_drill(other, did)), timeout=DURATION_MS / 1000 + WAIT, what="the drill finished",
        interval=0.1)
    new_epoch = cl.health(new)["epoch"]
    print("  engine killed %.1f s into the drill; %s engine (epoch %d -> %d) %.2f s later; the "
          "drill finished %.1f s after its start: %s, %d requests, %d failures on level 2"
          % ((killed_ms - d["started_at"]) / 1000, new.name, old_epoch, new_epoch, took / 1000,
             (d["finished_at"] - d["started_at"]) / 1000, d["result"], d["requests"],
             d["failures"]))
    assert new_epoch > old_epoch, (old_epoch, new_epoch)
    assert d["result"] == "passed", d
    assert d["finished_at"] > killed_ms and d["finished_at"] >= d["started_at"] + DURATION_MS, d
    assert d["requests"] > 0 and d["failures"] == 0, d
    # switched back, never stranded on level 2: controld and both nodes on level 1
    wait_until(lambda: card(other, sid)["current_level"] == 1, timeout=WAIT,
               what="the site back on level 1")
    assert card(other, sid)["drill"] is None
    for n in nodes:
        wait_until(lambda n=n: (node_site(n, sid) or {}).get("current_level") == 1,
                   timeout=WAIT, what="%s back on level 1" % n.name)
    for ld in loads:
        ld.wait_served("a", 10, "the primary serving after the drill")
    results = [r for ld in loads for r in ld.finish()]
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    sw = [e for e in events(other, sid, "level.switched") if e["data"]["reason"] == "drill"]
    assert [(e["data"]["from_level"], e["data"]["to_level"]) for e in sw] == [(1, 2), (2, 1)], sw
    started = of_drill(other, sid, "drill.started", did)
    fin = of_drill(other, sid, "drill.finished", did)
    assert len(started) == 1, started
    assert len(fin) == 1 and fin[0]["data"]["result"] == "passed", fin
    st, inc, _ = other.api("GET", "/v1/incidents?site_id=%d" % sid)
    assert st == 200 and inc["incidents"] == [], inc
    assert metric(other, 'cdnca_drills_total{result="passed"}') == 1
    # recurring: the next one scheduled every_ms after this one's start
    assert d["next_id"] is not None, d
    nxt = get_drill(other, d["next_id"])
    assert nxt["state"] == "scheduled" and nxt["start_at"] == d["start_at"] + EVERY_MS, nxt
    assert nxt["every_ms"] == EVERY_MS and nxt["to_level"] == 2, nxt
    # a second leader change: the killed replica back, the other stopped; the schedule is kept
    # and nothing is decided again
    eng.start()
    other.stop()
    back = cl.wait_engine(WAIT, among=[eng], interval=0.05)
    time.sleep(3)  # a few of the new engine's rounds
    ds = site_drills(back, sid)
    assert [(x["id"], x["state"]) for x in ds] == [(did, "finished"), (nxt["id"], "scheduled")], ds
    assert get_drill(back, nxt["id"])["start_at"] == nxt["start_at"]
    assert len(of_drill(back, sid, "drill.finished", did)) == 1
    assert len(events(back, sid, "drill.started")) == 1
    assert card(back, sid)["current_level"] == 1
    for n in nodes:
        n.stop()
    back.stop()


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin; tests/deps.sh "
              "installs postgresql)")
        sys.exit(77)
    harness.main()
