#!/usr/bin/env python3
"""test_incidents — docs/design.md#incidents on real processes: two nodes in front of a site with a
level-1 and a level-2 origin, visitors on both nodes, a webhook receiver. The primary answers 503
for a while, then recovers:
- with automatic failback: exactly one incident, opened by the failed verdict (with its votes),
  mitigated by the switch, both nodes' propagation of the switch, visitor requests from the
  heartbeats, the failback, resolution after the quiet time; every incident event linked
  (incident_id in its data, on the timeline, its webhook delivery listed); the Markdown report
  carries the figures; notes and bad input;
- with manual failback: it stays mitigated until the operator switches back;
- with controld killed (-9) mid-incident: the same record continues, no second incident;
- a trigger within the quiet time of a resolution reopens it; an operator resolves with a note
  (409 the second time)."""

import threading
import time

import harness
from harness import Controld, wait_until
from receiver import Receiver
from scenario_lib import (NODE_ARGS, ONLINE_MS, WAIT, make_site, origin_spec, start_node,
                          start_origins, switch, wait_level, node_site)

HOST = "shop.example.com"
QUIET_MS = 3000
ROUNDS = ["--probe-interval-ms", "2000", "--node-online-ms", str(ONLINE_MS),
          "--incident-quiet-ms", str(QUIET_MS), "--webhook-retry-ms", "50"]
MAX_VISITS = 3000


class Visitors:
    """GETs through each node in turn (bounded), every status counted."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.statuses = []
        self.stop_ev = threading.Event()
        self.thr = threading.Thread(target=self._run, daemon=True)
        self.thr.start()

    def _run(self):
        for i in range(MAX_VISITS):
            if self.stop_ev.is_set():
                return
            n = self.nodes[i % len(self.nodes)]
            try:
                st, _, _ = n.visit("GET", "/v/%d" % i, HOST, timeout=10)
            except OSError as e:
                st = "error %r" % e
            self.statuses.append(st)
            time.sleep(0.02)

    def finish(self):
        self.stop_ev.set()
        self.thr.join(30)
        return self.statuses


def incidents(c, **q):
    qs = "&".join("%s=%s" % kv for kv in q.items())
    st, body, _ = c.api("GET", "/v1/incidents" + ("?" + qs if qs else ""))
    assert st == 200, (st, body)
    return body["incidents"]


def incident(c, iid):
    st, body, _ = c.api("GET", "/v1/incidents/%d" % iid)
    assert st == 200, (st, body)
    return body


def setup(tmp, failback="auto", hook=True, nodes=2, quiet_ms=QUIET_MS):
    a, b = start_origins(tmp, "a", "b")
    args = list(ROUNDS)
    args[args.index("--incident-quiet-ms") + 1] = str(quiet_ms)
    c = Controld(tmp, extra_args=args).start()
    rx = None
    if hook:
        rx = Receiver().start()
        st, j, _ = c.api("POST", "/v1/webhooks", {"url": rx.url + "/hook",
                                                 "secret": "s" * 32})
        assert st == 201, (st, j)
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST], failback=failback,
                     hc={"healthy_after": 1, "unhealthy_after": 2})
    sid, oa = site["id"], site["origins"][0]["id"]
    ns = []
    for i in range(nodes):
        _, n = start_node(c, tmp, "edge-%d" % (i + 1))
        wait_until(lambda n=n: len((node_site(n, sid) or {}).get("origins", [])) == 2,
                   timeout=WAIT, what="the node has the site")
        ns.append(n)
    wait_until(lambda: all(o["health"] == "healthy" for o in
                           c.api("GET", "/v1/sites/%d" % sid)[1]["origins"]),
               timeout=WAIT, what="both origins healthy")
    return a, b, c, rx, ns, sid, oa


def test_outage_with_auto_failback_is_one_incident(tmp):
    a, b, c, rx, ns, sid, oa = setup(tmp)
    assert incidents(c) == []
    load = Visitors(ns)
    time.sleep(1.0)
    a.set(status=503)
    wait_level(c, sid, 2)
    inc = wait_until(lambda: (incidents(c, site_id=sid) or [None])[0], timeout=WAIT,
                     what="an incident")
    assert inc["trigger"] == "origin_unhealthy", inc
    assert inc["opened_level"] == 1
    wait_until(lambda: incident(c, inc["id"])["state"] == "mitigated", timeout=WAIT,
               what="mitigated")
    # both nodes apply the switch's publication
    wait_until(lambda: any(p["reason"] == "auto_failover" and p["applied"] == 2
                           for p in incident(c, inc["id"])["propagation"]),
               timeout=WAIT, what="both nodes applied the switch")
    time.sleep(1.5)  # heartbeats carry the visitors' traffic of the outage
    a.set(status=200)
    wait_level(c, sid, 1)
    full = wait_until(lambda: (lambda j: j if j["state"] == "resolved" else None)(
        incident(c, inc["id"])), timeout=WAIT + QUIET_MS / 1000, what="resolved")
    statuses = load.finish()
    assert len(statuses) > 50

    # exactly one incident
    assert [i["id"] for i in incidents(c)] == [inc["id"]]
    assert full["levels_served"] == [1, 2], full
    assert full["figures"]["detect_ms"] is not None and full["figures"]["detect_ms"] >= 0
    assert full["figures"]["switch_ms"] is not None
    assert full["figures"]["resolve_ms"] >= QUIET_MS
    assert full["resolved_at"] - full["opened_at"] >= QUIET_MS
    types = [e["type"] for e in full["timeline"]]
    # the trigger verdict with its votes, the switch, the failback, the incident's own events
    hc = [e for e in full["timeline"] if e["type"] == "origin.health_changed"
          and e["data"]["to"] == "unhealthy"]
    assert hc and hc[0]["data"]["origin_id"] == oa, full["timeline"]
    assert len(hc[0]["data"]["votes"]) >= 2, hc[0]
    assert {v["source"] for v in hc[0]["data"]["votes"]} <= {"nodes", "checkpoints", "control"}
    for t in ("incident.opened", "level.switched", "incident.mitigated", "incident.resolved"):
        assert t in types, (t, types)
    switches = [e["data"] for e in full["timeline"] if e["type"] == "level.switched"]
    assert [(s["from_level"], s["to_level"]) for s in switches] == [(1, 2), (2, 1)], switches
    ats = [e["at"] for e in full["timeline"]]
    assert ats == sorted(ats)
    # propagation: both nodes, per node times after the publication
    prop = [p for p in full["propagation"] if p["reason"] == "auto_failover"][0]
    assert prop["applied"] == 2 and len(prop["nodes"]) == 2, prop
    assert {n["node"] for n in prop["nodes"]} == {"edge-1", "edge-2"}
    assert all(n["applied_at"] >= prop["published_at"] for n in prop["nodes"])
    assert prop["p50_ms"] is not None and prop["max_ms"] >= prop["p50_ms"]
    # visitor impact from heartbeats: both nodes reported requests during it
    tot = full["impact"]["total"]
    assert tot["requests"] > 0 and tot["nodes"] == 2, full["impact"]
    # every incident event carries incident_id and reached the webhook
    st, msgs, _ = c.api("GET", "/v1/sites/%d/messages?limit=1000" % sid)
    linked = [e for e in msgs["events"] if e["type"].startswith("incident.")]
    assert len(linked) == 3 and all(e["data"]["incident_id"] == inc["id"] for e in linked)
    wait_until(lambda: sum(1 for r in rx.snapshot()
                           if r.json().get("type", "").startswith("incident.")) >= 3,
               timeout=WAIT, what="incident webhooks delivered")
    got = incident(c, inc["id"])
    assert any(d["event_type"] == "incident.opened" and d["state"] == "delivered"
               for d in got["deliveries"]), got["deliveries"]
    # the report
    st, text, hdrs = c.api("GET", "/v1/incidents/%d/report" % inc["id"])
    assert st == 200, st
    ctype = next(v for k, v in hdrs.items() if k.lower() == "content-type")
    assert ctype.startswith("text/markdown"), ctype
    for needle in ("# Incident %d: shop" % inc["id"], "time to detect", "time to switch",
                   "time to propagate", "time to resolve", "applied by 2/", "## Visitor impact",
                   "## Timeline", "level.switched", "incident.resolved"):
        assert needle in text, (needle, text)
    # notes; bad input changes nothing
    st, j, _ = c.api("POST", "/v1/incidents/%d/notes" % inc["id"],
                     {"text": "origin a: disk full\nfixed by ops"})
    assert st == 200 and j["timeline_entries"] == full["timeline_entries"] + 1, (st, j)
    for body, code in (({"text": ""}, 422), ({"text": "x" * 4097}, 422), ({"text": "\u0001"}, 422),
                       ({"txt": "a"}, 400), ({}, 422)):
        st, j, _ = c.api("POST", "/v1/incidents/%d/notes" % inc["id"], body)
        assert st == code, (body, st, j)
    st, j, _ = c.api("POST", "/v1/incidents/999999/notes", {"text": "a"})
    assert st == 404, (st, j)
    st, j, _ = c.api("POST", "/v1/incidents/%d/resolve" % inc["id"], {"note": "again"})
    assert st == 409, (st, j)
    assert incident(c, inc["id"])["timeline_entries"] == full["timeline_entries"] + 1
    for q, field in (("state=bogus", "state"), ("site_id=0", "site_id"), ("site_id=-1", "site_id")):
        st, j, _ = c.api("GET", "/v1/incidents?" + q)
        assert st == 400 and j["error"]["code"] == "invalid_query" and j["error"]["field"] == field, \
            (q, st, j)
    # a webhook may ask for the incident events alone
    st, j, _ = c.api("POST", "/v1/webhooks", {"url": rx.url + "/inc", "secret": "t" * 32,
                                             "events": ["incident.opened", "incident.resolved"]})
    assert st == 201 and j["events"] == ["incident.opened", "incident.resolved"], (st, j)
    st, text, _ = c.api("GET", "/v1/incidents/%d/report" % inc["id"])
    assert "disk full" in text
    # text from notes, votes and errors renders as the text it is: no tag, no link
    st, j, _ = c.api("POST", "/v1/incidents/%d/notes" % inc["id"],
                     {"text": "<img src=x onerror=alert(1)> [click](javascript:alert(1)) *b*"})
    assert st == 200, (st, j)
    st, text, _ = c.api("GET", "/v1/incidents/%d/report" % inc["id"])
    assert "\\<img src=x onerror=alert(1)\\> \\[click\\](javascript:alert(1)) \\*b\\*" in text, text
    assert "<img" not in text.replace("\\<img", "") and "[click]" not in text, text
    # read tokens read, and may not write
    st, tok, _ = c.api("POST", "/v1/tokens", {"name": "viewer", "role": "read"})
    assert st == 201, tok
    st, _, _ = c.api("GET", "/v1/incidents/%d" % inc["id"], token=tok["token"])
    assert st == 200
    st, _, _ = c.api("POST", "/v1/incidents/%d/notes" % inc["id"], {"text": "a"},
                     token=tok["token"])
    assert st == 403
    # the visitors saw no error through it all (backup levels on the nodes)
    bad = [s for s in statuses if s != 200]
    assert len(bad) <= 2, bad[:10]


def test_manual_failback_stays_mitigated_and_kill9_continues(tmp):
    quiet = 8000  # the new trigger below (two failed rounds) comes well within it
    a, b, c, rx, ns, sid, oa = setup(tmp, failback="manual", hook=False, nodes=1, quiet_ms=quiet)
    a.set(status=503)
    wait_level(c, sid, 2)
    inc = wait_until(lambda: (incidents(c, site_id=sid) or [None])[0], timeout=WAIT,
                     what="an incident")
    wait_until(lambda: incident(c, inc["id"])["state"] == "mitigated", timeout=WAIT,
               what="mitigated")
    # controld dies in the middle of it; the record continues after the restart
    c.restart(kill=True)
    a.set(status=200)
    wait_until(lambda: [o["health"] for o in c.api("GET", "/v1/sites/%d" % sid)[1]["origins"]]
               == ["healthy", "healthy"], timeout=WAIT, what="the primary healthy again")
    time.sleep(quiet / 1000 + 2)
    j = incident(c, inc["id"])
    assert j["state"] == "mitigated", j  # manual failback: waits for the operator
    switch(c, sid, 1)
    wait_until(lambda: incident(c, inc["id"])["state"] == "resolved",
               timeout=WAIT + quiet / 1000, what="resolved after the switch back")
    assert len(incidents(c)) == 1
    j = incident(c, inc["id"])
    manual = [e for e in j["timeline"] if e["type"] == "level.switched"
              and e["data"]["reason"] == "manual"]
    assert manual, j["timeline"]

    # a new trigger within the quiet time reopens it; the operator resolves it with a note
    a.set(status=503)
    wait_until(lambda: incident(c, inc["id"])["state"] != "resolved", timeout=WAIT,
               what="reopened")
    assert incident(c, inc["id"])["reopened"] == 1
    assert len(incidents(c)) == 1
    st, j, _ = c.api("POST", "/v1/incidents/%d/resolve" % inc["id"], {"note": "known: a is down"})
    assert st == 200 and j["state"] == "resolved" and j["resolved_by"], (st, j)
    st, j, _ = c.api("POST", "/v1/incidents/%d/resolve" % inc["id"], {})
    assert st == 409, (st, j)
    tl = incident(c, inc["id"])["timeline"]
    assert any(e["kind"] == "note" and e["type"] == "resolve" and
               e["data"]["text"] == "known: a is down" for e in tl), tl
    assert incidents(c, state="active") == []


def test_a_switch_applied_by_many_nodes_lists_the_slowest(tmp):
    """A switch's propagation counts every node that applied it and lists the 100 slowest
    (INCIDENT_PROP_NODES_MAX) in the order they applied it, with the count of the faster ones
    left out: an answer for a fleet of thousands stays small (docs/design.md#incidents)."""
    a, b, c, rx, ns, sid, oa = setup(tmp, failback="manual", hook=False, nodes=1)
    a.set(status=503)
    wait_level(c, sid, 2)
    inc = wait_until(lambda: (incidents(c, site_id=sid) or [None])[0], timeout=WAIT,
                     what="an incident")
    prop = wait_until(lambda: [p for p in incident(c, inc["id"])["propagation"]
                               if p["reason"] == "auto_failover" and p["applied"] == 1],
                      timeout=WAIT, what="the node applied the switch")[0]
    seq, extra = prop["seq"], 130
    ids = []
    for i in range(extra):  # nodes that apply the switch one after the other
        st, n, _ = c.api("POST", "/v1/nodes", {"name": "late-%03d" % i})
        assert st == 201, (st, n)
        ids.append(n["id"])
        st, _, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq, token=n["token"])
        assert st == 304, st
    # the hub records the asks in batches, shortly after
    p = wait_until(lambda: [x for x in incident(c, inc["id"])["propagation"]
                            if x["seq"] == seq and x["applied"] == extra + 1],
                   timeout=WAIT, what="every node's ask recorded")[0]
    assert p["nodes_omitted"] == extra + 1 - 100 and len(p["nodes"]) == 100, p["nodes_omitted"]
    listed = [n["node_id"] for n in p["nodes"]]
    assert listed == ids[-100:], listed  # the last to apply it, in that order
    assert p["slowest_node"] == "late-%03d" % (extra - 1), p["slowest_node"]
    assert p["max_ms"] == p["nodes"][-1]["after_ms"], p
    assert [n["applied_at"] for n in p["nodes"]] == sorted(n["applied_at"] for n in p["nodes"])


def test_deleting_the_site_resolves_its_incident(tmp):
    """A site deleted mid-incident: its incident is resolved by the deleting token with the note
    "site deleted" and incident.resolved goes out (a pager's alert closes); it was left active
    for good, never pruned, and kept the site's publications."""
    a, b, c, rx, ns, sid, oa = setup(tmp, nodes=1)
    a.set(status=503)
    wait_level(c, sid, 2)
    inc = wait_until(lambda: (incidents(c, site_id=sid, state="active") or [None])[0],
                     timeout=WAIT, what="an incident")
    st, _, _ = c.api("DELETE", "/v1/sites/%d" % sid)
    assert st == 204, st
    j = incident(c, inc["id"])
    assert j["state"] == "resolved" and j["resolved_by"] == "bootstrap", j
    assert any(e["kind"] == "note" and e["type"] == "resolve" and
               e["data"]["text"] == "site deleted" for e in j["timeline"]), j["timeline"]
    assert incidents(c, state="active") == []
    wait_until(lambda: any(r.header("X-Cdnca-Event") == "incident.resolved" and
                           r.json()["data"].get("incident_id") == inc["id"]
                           for r in rx.snapshot()), timeout=WAIT,
               what="incident.resolved delivered")


if __name__ == "__main__":
    harness.main()
