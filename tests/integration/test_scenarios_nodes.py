#!/usr/bin/env python3
"""test_scenarios_nodes — the seed's "Who probes" with real nodes, and visitor traffic through a
node during a failover.

Three noded on loopback vote on a LabOrigin (scenario_lib) that can answer one node
differently: it finds which noded process owns the client end of each connection, so "a node
that sees a different origin" is a real 503 that node receives, not a forged vote.

Node votes need the round's node deadline (half the probe interval at most) to leave noded
its margin for posting votes, so these rounds are 2 s apart (controld's own probes elsewhere
use 300 ms)."""

import os
import signal

import harness
from harness import Controld, wait_until
from scenario_lib import (LabOrigin, ONLINE_MS, WAIT, card, card_origin, events, make_site,
                          node_site, origin_spec, start_node, start_origins,
                          verdicts, visit_origin, wait_health, wait_level, wait_online)

VOTE_ROUNDS = ["--probe-interval-ms", "2000", "--node-online-ms", str(ONLINE_MS)]
HOST = "shop.example.com"


def votes_by_node(v):
    return {x["node_id"]: x for x in v["votes"] if x["source"] == "nodes"}


def in_time(v):
    """No vote of verdict v is a probe timeout (on a loaded machine a round can have some)."""
    return not any(x.get("error") == "timeout" for x in v["votes"])


def wait_verdict(c, sid, oid, pred, what, timeout=WAIT):
    """Wait for a verdict of a round newer than now that satisfies pred; returns it."""
    start = max([v["round_id"] for v in verdicts(c, sid, oid, limit=1)] or [0])

    def found():
        for v in verdicts(c, sid, oid, limit=10):
            if v["round_id"] > start and pred(v):
                return v
        return None
    return wait_until(found, timeout=timeout, what=what, interval=0.1)


def test_node_votes_majority_partition_and_fallthrough(tmp):
    """Seed "Who probes", source 1 and 3: with nodes online the verdicts come from up to 3 node
    votes (source "nodes"; a verdict needs at least 2 votes and a majority). One node that sees
    the origin failing is outvoted 2 to 1; two such nodes decide 2 to 1 the other way. A
    partitioned node (stopped: no heartbeats, no votes) leaves 2 that still decide; with a
    single node online its one vote is not a verdict and controld probes directly ("control").
    """
    with LabOrigin("a") as a:
        b, = start_origins(tmp, "b")
        c = Controld(tmp, extra_args=VOTE_ROUNDS).start()
        nodes = [start_node(c, tmp, "edge%d" % i) for i in range(3)]
        ids = [nid for nid, _ in nodes]
        pid = {nid: n.pid() for nid, n in nodes}
        a.watch_pids = set(pid.values()) | {c.pid()}
        stopped = []
        try:
            wait_online(c, ids)
            site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST])
            sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]

            # all honest: 3 success votes, from the three nodes, with the node User-Agent
            # (a round whose node probes all time out on a loaded machine is not the question;
            # the first round where the three honest nodes answer in time is)
            v = wait_verdict(c, sid, oa,
                             lambda v: v["source"] == "nodes" and in_time(v),
                             "a verdict from the nodes without probe timeouts")
            by = votes_by_node(v)
            assert sorted(by) == sorted(ids) and all(x["ok"] for x in by.values()), v
            assert v["verdict"] == "success", v
            wait_health(c, sid, oa, "healthy")
            # the card shows the latest round, which on a loaded machine may hold a timed-out
            # vote again (2 to 1, still the nodes' verdict): wait for one with all three in time
            def three_votes():
                o = card_origin(card(c, sid), oa)
                assert o["source"] == "nodes" and o["votes"] == {"success": 3, "failure": 0}, o
                return True
            wait_until(three_votes, timeout=WAIT, interval=0.2,
                       what="the card with the three nodes' success votes")
            # every probe whose sender could be told came from a node; a probe the node gave up
            # on (a timeout on a loaded machine) has closed its socket before the origin looks
            # up the owner, and counts as unknown (None), not as controld
            seen = set(p for p, _, _ in a.answers) - {None}
            assert seen <= set(pid.values()), (c.pid(), pid, a.answers)
            assert "control" not in [x["source"] for x in v["votes"]], v
            uas = {r["headers"].get("User-Agent") for r in b.stats()["recent"][-6:]}
            assert uas == {"cdnca-node/origin-probe"}, uas

            # one node lies (it really gets 503s): outvoted 2 to 1, the origin stays healthy
            liar = ids[0]
            a.bad_pids = {pid[liar]}
            for _ in range(3):  # three rounds: enough to make it unhealthy if the lie counted
                # (a round where an honest node's probe timed out on a loaded machine is not
                # the question, as above)
                v = wait_verdict(c, sid, oa, lambda v: v["source"] == "nodes"
                                 and len(votes_by_node(v)) == 3 and in_time(v),
                                 "a 3-vote verdict without probe timeouts")
                by = votes_by_node(v)
                assert by[liar]["ok"] is False and by[liar]["status"] == 503, v
                assert all(by[n]["ok"] for n in ids[1:]), v
                assert v["verdict"] == "success" and v["state_after"] == "healthy", v
            o = card_origin(card(c, sid), oa)
            assert o["health"] == "healthy" and o["votes"] == {"success": 2, "failure": 1}, o

            # two nodes see it failing: the majority of 2 to 1 makes it unhealthy -> level 2
            a.bad_pids = {pid[ids[0]], pid[ids[1]]}
            wait_level(c, sid, 2)
            o = card_origin(card(c, sid), oa)
            assert o["health"] == "unhealthy" and o["source"] == "nodes", o
            assert o["votes"] == {"success": 1, "failure": 2}, o
            hc = [e for e in events(c, sid, "origin.health_changed")
                  if e["data"]["origin_id"] == oa and e["data"]["to"] == "unhealthy"]
            assert hc and hc[-1]["data"]["source"] == "nodes", hc
            a.bad_pids = set()
            wait_level(c, sid, 1)

            # partition: one node stopped (no heartbeat, no votes): the other two decide
            cut = ids[2]
            os.kill(pid[cut], signal.SIGSTOP)
            stopped.append(pid[cut])
            wait_online(c, ids[:2])
            # (both of their probes can time out in one round on a loaded machine: not the
            # question, as above)
            v = wait_verdict(c, sid, oa, lambda v: sorted(votes_by_node(v)) == sorted(ids[:2])
                             and in_time(v),
                             "a verdict from the two nodes left without probe timeouts")
            assert v["source"] == "nodes" and v["verdict"] == "success", v
            a.status = 503  # the origin really breaks: 2 of 2 say so
            wait_level(c, sid, 2)
            o = card_origin(card(c, sid), oa)
            assert o["source"] == "nodes" and o["votes"] == {"success": 0, "failure": 2}, o
            a.status = 200
            wait_level(c, sid, 1)

            # a single node online: one vote is no verdict; controld probes itself
            os.kill(pid[ids[1]], signal.SIGSTOP)
            stopped.append(pid[ids[1]])
            wait_online(c, ids[:1])
            v = wait_verdict(c, sid, oa, lambda v: v["source"] == "control" and in_time(v),
                             "a control verdict without a probe timeout")
            assert v["verdict"] == "success", v
            assert [x for x in v["votes"] if x["source"] == "control"], v
            assert len(votes_by_node(v)) <= 1, v
            o = card_origin(card(c, sid), oa)
            assert o["source"] == "control", o

            # the partition heals: three votes again
            for p in stopped:
                os.kill(p, signal.SIGCONT)
            stopped = []
            wait_online(c, ids)
            wait_verdict(c, sid, oa, lambda v: v["source"] == "nodes"
                         and len(votes_by_node(v)) == 3, "3 votes again")
        finally:
            for p in stopped:
                os.kill(p, signal.SIGCONT)
        c.stop()


def test_visitor_traffic_without_failures_during_origin_failure(tmp):
    """Seed "How it works", node retries: a bounded loop of 300 GETs through a noded while one of
    the two level-1 origins fails (503, then connection refused): every GET succeeds (each
    failed attempt is retried on the other origin of the level), the failing origin is
    skipped, the level never switches, and the origin gets traffic again after skip_ms."""
    a1, a2, b = start_origins(tmp, "a1", "a2", "b")
    c = Controld(tmp, extra_args=["--probe-interval-ms", "300", "--node-online-ms",
                                  str(ONLINE_MS)]).start()
    site = make_site(c, [origin_spec(a1, 1), origin_spec(a2, 1), origin_spec(b, 2)], hosts=[HOST],
                     node_retry={"retries": 2, "retry_budget_ms": 5000, "fail_count": 3,
                                 "fail_window_ms": 10000, "skip_ms": 1500})
    sid, o1 = site["id"], site["origins"][0]["id"]
    _, n = start_node(c, tmp, "edge")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 3, timeout=WAIT,
               what="the node has the site")
    bad = []
    served = {}
    total = 300
    for i in range(total):
        if i == 60:
            a1.set(status=503)
        elif i == 150:
            a1.stop()  # now connections are refused
        try:
            st, who = visit_origin(n, HOST, "/v/%d" % i)
        except OSError as e:
            st, who = "error %s" % e, None
        if st != 200:
            bad.append((i, st, who))
        served[who] = served.get(who, 0) + 1
    assert bad == [], "%d of %d GETs failed: %s" % (len(bad), total, bad[:10])
    assert served.get("a1", 0) > 0 and served.get("a2", 0) > 0, served  # both shared at first
    assert set(served) <= {"a1", "a2"}, served  # never the backup level
    s = node_site(n, sid)
    x = [o for o in s["origins"] if o["id"] == o1][0]
    assert x["skips"] >= 1 and x["failures"] >= 3, x
    st, text, _ = n.admin("GET", "/metrics")
    retries = [ln for ln in text.splitlines() if ln.startswith("cdnca_node_retries_total")]
    assert retries and float(retries[0].split()[-1]) >= 1, retries
    cd = card(c, sid)
    assert cd["current_level"] == 1, cd
    assert events(c, sid, "level.switched") == []

    # the origin comes back (same port): after skip_ms its trial request succeeds
    a1.start()
    wait_until(lambda: visit_origin(n, HOST, "/back") == (200, "a1"), timeout=WAIT,
               what="a1 serving through the node again", interval=0.1)
    x = [o for o in node_site(n, sid)["origins"] if o["id"] == o1][0]
    assert x["skipped_for_ms"] == 0, x
    wait_health(c, sid, o1, "healthy")
    assert card(c, sid)["current_level"] == 1
    c.stop()


if __name__ == "__main__":
    harness.main()
