#!/usr/bin/env python3
"""test_cluster_ramp — docs/design.md, Failback ramp, across a change of engine leader (cluster
mode, docs/design.md#cluster-mode): two controld replicas on one PostgreSQL database
(pgfixture.py), two nodes given both replicas, two origins (level 1 "a", level 2 "b") and a flood
of visitors on both nodes.

The primary fails, the engine fails over; the primary recovers and the engine starts a ramp
[10, 50, 100] x 4 s. At the 50 % step the engine is killed (kill -9). Meanwhile:
- the nodes follow the ramp on their own clocks: the primary's share of the requests in each
  step, counted at the origins, is the step's percentage within 5 points (the bucketing and its
  statistics of test_ramp_share.test_two_nodes_share_follows_steps), across the leader change;
- the other replica takes the lease and finds the ramp in the database: it completes it once
  (one level.switched to level 1, reason auto_failback, after the kill; no failback.aborted; one
  failback.ramp_started), and the status card shows no ramp;
- no visitor sees an error.

Always runs on PostgreSQL (a database of the run's cluster, or a cluster of its own when run by
hand); exits 77 (skipped) when the server binaries are missing."""

import sys
import time

import harness
import pgfixture
from cluster_site import ClusterSite
from harness import wait_until
from ramp_share import HOST, Flood, check_step_shares, node_ramp, watch_ramps
from scenario_lib import WAIT, card, events, node_site
from test_backup_levels import Load, errors
from test_failback_ramp import RETRY

STEP_MS = 4000  # the kill, and the lease's expiry (ttl 2 s), fall inside the ramp's 12 s


def level(r, sid):
    return card(r, sid)["current_level"]


def test_engine_killed_mid_ramp(tmp):
    ramp = {"steps": [10, 50, 100], "step_ms": STEP_MS, "max_failure_ratio": 0.2,
            "min_requests": 5}
    cs = ClusterSite(tmp, host=HOST, node_retry=RETRY, failback_ramp=ramp)
    a, b, cl, eng, other, sid, nodes = cs.a, cs.b, cs.cl, cs.eng, cs.other, cs.sid, cs.nodes
    load = Load(nodes[0], interval=0.05).start()
    load.wait_served("a", 10, "the primary serving")
    a.set(status=503)
    wait_until(lambda: level(other, sid) == 2, timeout=WAIT, what="the failover to level 2")
    load.wait_served("b", 10, "the backup serving on level 2")
    results = load.finish()
    assert errors(results) == [], "visitor errors: %s" % errors(results)[:10]
    old_epoch = cl.health(eng)["epoch"]
    flood = Flood(nodes).start()
    seen = {}
    try:
        a.set(status=200)
        wait_until(lambda: watch_ramps(nodes, sid, seen), timeout=WAIT,
                   what="both nodes have the ramp", interval=0.02)
        # into the 50 % step (as the node's clock has it), then the engine dies
        wait_until(lambda: (node_ramp(nodes[0], sid) or {}).get("share") == 50, timeout=WAIT,
                   what="the 50 % step", interval=0.02)
        time.sleep(0.3)
        assert cl.engines() == [eng], "the engine changed before the kill"
        # still ramping: whatever completes it runs after the kill, on the other replica
        cd = card(other, sid)
        assert cd["current_level"] == 2 and cd["ramp"] is not None, cd
        killed_ms = time.time() * 1000.0
        eng.kill9()
        new = cl.wait_engine(WAIT, among=[other], interval=0.05)
        took = time.time() * 1000.0 - killed_ms
        wait_until(lambda: level(other, sid) == 1, timeout=WAIT,
                   what="the ramp completed by the new engine")
        time.sleep(0.5)
    finally:
        flood.finish()
    new_epoch = cl.health(new)["epoch"]
    r0 = seen[nodes[0].name][1]
    print("  engine killed %.1f s into the ramp; %s engine (epoch %d -> %d) %.2f s later; the "
          "ramp ends %.1f s after its start"
          % ((killed_ms - r0["started_at"]) / 1000, new.name, old_epoch, new_epoch, took / 1000,
             len(r0["steps"]) * r0["step_ms"] / 1000))
    assert new_epoch > old_epoch, (old_epoch, new_epoch)
    assert flood.errors == [], "visitor errors: %s" % flood.errors[:10]
    check_step_shares(seen, nodes, a, b, flood)
    # the new engine completed the ramp it found stored: one switch back, after the kill
    sw = [e for e in events(other, sid, "level.switched") if e["data"]["to_level"] == 1]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failback", sw
    assert len(events(other, sid, "failback.ramp_started")) == 1
    assert events(other, sid, "failback.aborted") == []
    cd = card(other, sid)
    assert cd["current_level"] == 1 and cd["ramp"] is None, cd
    for n in nodes:
        wait_until(lambda n=n: node_ramp(n, sid) is None
                   and (node_site(n, sid) or {}).get("current_level") == 1,
                   timeout=WAIT, what="%s on level 1 without the ramp" % n.name)
    for n in nodes:
        n.stop()


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin; tests/deps.sh "
              "installs postgresql)")
        sys.exit(77)
    harness.main()
