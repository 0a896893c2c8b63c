#!/usr/bin/env python3
"""test_ramp_share — docs/design.md, Failback ramp: two nodes under a flood of visitors, the
primary recovers and the failback ramps [10, 50, 100] x 2 s; the primary's share of the requests
in each step, counted at the origins, is the step's percentage within 5 points.

A measurement: it needs thousands of requests a step, so it runs alone (RUN_SERIAL in
tests/CMakeLists.txt): beside five other tests on two cores the flood fell below the floor the
statistics need. The split is the node's (the store plays no part), so it has no PostgreSQL twin."""

import time

import harness
from harness import Controld, wait_until
from ramp_share import HOST, SHARE_STEP_MS, Flood, check_step_shares, watch_ramps
from scenario_lib import WAIT, events, make_site, node_site, origin_spec, start_node
from scenario_lib import start_origins, wait_level
from test_backup_levels import Load, errors
from test_failback_ramp import RETRY, ROUNDS, fail_over


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
    standard deviation of 100 sqrt(p (1 - p) / n) points. Each step needs the n that makes 5
    points 3.9 of them at its p (share_min: 1,521 requests at 50 %, 548 at 10 %, 100 at 100 %,
    where every request must reach the primary), a false failure about once in 10,000 runs; the
    flood (four client threads on keep-alive connections) usually puts several thousand
    requests in each step. The counts are printed.
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



if __name__ == "__main__":
    harness.main()
