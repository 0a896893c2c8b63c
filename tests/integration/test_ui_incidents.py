#!/usr/bin/env python3
"""test_ui_incidents — the incidents' dashboard pages in Debian's chromium (ui/incidents_test.mjs)
against a real controld: a site with a level-1 and a level-2 origin and one noded in front, the
primary answers 503, the site fails over and an incident opens; then in the browser the banner on
the site page, the incidents list (active first, state and site filters), the incident page
(figures, levels served, timeline with level.switched and incident.opened, propagation of the
switch with the node, impact, deliveries) as the API gives them, an operator's note (shown as
text, never as markup), the Markdown report, a read token without note form or Resolve button,
and the operator resolving it (banner gone, listed as resolved).
Skips (exit 77, reported as skipped by ctest) when chromium, node or ui/node_modules is missing.
"""

import json
import os

import uilib
from harness import Controld, wait_until
from receiver import Receiver
from scenario_lib import WAIT, make_site, origin_spec, start_node, start_origins, wait_level, node_site

# the incident must not resolve by itself during the browser run: the primary stays down and the
# quiet time is long
ARGS = ["--probe-interval-ms", "500", "--node-online-ms", "5000", "--incident-quiet-ms", "600000",
        "--webhook-retry-ms", "200"]


def token(c, name, role):
    st, body, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
    assert st == 201, (st, body)
    return body["token"]


def test_incident_pages(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ARGS).start()
    rx = Receiver().start()  # the incident's events have webhook deliveries to list
    st, body, _ = c.api("POST", "/v1/webhooks", {"url": rx.url + "/hook", "secret": "s" * 32})
    assert st == 201, (st, body)
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], name="inc-shop",
                     hc={"healthy_after": 1, "unhealthy_after": 2})
    sid = site["id"]
    _, n = start_node(c, tmp, "edge-1")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2, timeout=WAIT,
               what="the node has the site")
    wait_until(lambda: all(o["health"] == "healthy" for o in
                           c.api("GET", "/v1/sites/%d" % sid)[1]["origins"]),
               timeout=WAIT, what="both origins healthy")
    # a second site without an incident: the site filter must leave it out
    other = make_site(c, [origin_spec(b, 1)], name="calm-shop", hc={"enabled": False})

    a.set(status=503)
    wait_level(c, sid, 2)

    def mitigated():
        st, body, _ = c.api("GET", "/v1/incidents?site_id=%d" % sid)
        assert st == 200, body
        inc = (body["incidents"] or [None])[0]
        return inc if inc and inc["state"] == "mitigated" else None
    inc = wait_until(mitigated, timeout=WAIT, what="a mitigated incident")

    def applied():
        st, body, _ = c.api("GET", "/v1/incidents/%d" % inc["id"])
        assert st == 200, body
        return any(p["reason"] == "auto_failover" and p["applied"] == 1 for p in body["propagation"])
    wait_until(applied, timeout=WAIT, what="the node applied the switch")
    # 101 more nodes apply it: the page lists the 100 slowest and says how many are left out
    seq = [p for p in c.api("GET", "/v1/incidents/%d" % inc["id"])[1]["propagation"]
           if p["reason"] == "auto_failover"][0]["seq"]
    for i in range(101):
        st, nd, _ = c.api("POST", "/v1/nodes", {"name": "late-%03d" % i})
        assert st == 201, (st, nd)
        st, _, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq, token=nd["token"])
        assert st == 304, st
    wait_until(lambda: any(p["seq"] == seq and p["applied"] == 102 for p in
                           c.api("GET", "/v1/incidents/%d" % inc["id"])[1]["propagation"]),
               timeout=WAIT, what="every node's ask recorded")

    info = os.path.join(tmp, "incident.json")
    with open(info, "w") as f:
        json.dump({"site_id": sid, "other_site_id": other["id"], "incident_id": inc["id"],
                   "operator": token(c, "oncall", "operator"), "read": token(c, "viewer", "read")}, f)
    uilib.check_script("incidents_test.mjs", c, CDNCA_INCIDENT=info)

    # what the browser did reached controld: the note, and the resolution by the operator
    st, body, _ = c.api("GET", "/v1/incidents/%d" % inc["id"])
    assert st == 200 and body["state"] == "resolved" and body["resolved_by"] == "oncall", body
    notes = [e for e in body["timeline"] if e["kind"] == "note"]
    assert any(e["type"] == "note" and "<b>disk</b>" in e["data"]["text"] for e in notes), notes


if __name__ == "__main__":
    uilib.main([test_incident_pages])
