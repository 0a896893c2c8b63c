#!/usr/bin/env python3
"""test_ui_drills — the failover drills on the site page in Debian's chromium
(ui/drills_test.mjs) against a real controld: a site with a level-1 and a level-2 origin and one
noded in front with a visitor on it. A 10 s drill is run to the end first (it passes, with the
target level's figures); then in the browser the history and that drill's figures as the API
gives them, a start refused for its duration (field marked, nothing runs), an operator starting
a drill and watching it run while the site is on level 2, cancelling it (back on level 1), and a
read token's page without the form or the cancel button.
Skips (exit 77, reported as skipped by ctest) when chromium, node or ui/node_modules is missing.
"""

import json
import os

import uilib
from harness import Controld, wait_until
from scenario_lib import (ONLINE_MS, WAIT, make_site, node_site, origin_spec, start_node,
                          start_origins, wait_level)
from test_backup_levels import HOST, Load

ARGS = ["--probe-interval-ms", "1000", "--node-online-ms", str(ONLINE_MS)]


def token(c, name, role):
    st, body, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
    assert st == 201, (st, body)
    return body["token"]


def test_drill_panel(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=ARGS).start()
    sid = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST])["id"]
    _, n = start_node(c, tmp, "edge-1")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2, timeout=WAIT,
               what="the node has the site")
    wait_until(lambda: all(o["health"] == "healthy" for o in
                           c.api("GET", "/v1/sites/%d" % sid)[1]["origins"]),
               timeout=WAIT, what="both origins healthy")

    # one drill run to the end, with visitors, so the history has a passed drill with figures
    load = Load(n, interval=0.05)
    load.start()
    try:
        st, d, _ = c.api("POST", "/v1/sites/%d/drills" % sid,
                         {"to_level": 2, "duration_ms": 10000, "min_requests": 1000000})
        assert st == 201, (st, d)
        wait_level(c, sid, 2)

        def finished():
            st, body, _ = c.api("GET", "/v1/drills/%d" % d["id"])
            assert st == 200, body
            return body if body["state"] == "finished" else None
        done = wait_until(finished, timeout=WAIT, what="the drill finished", interval=0.2)
        assert done["result"] == "passed", done
        wait_level(c, sid, 1)
        wait_until(lambda: sum(o["requests"] for o in
                               c.api("GET", "/v1/drills/%d" % d["id"])[1]["origins"]) > 0,
                   timeout=WAIT, what="the target level's requests in the record")
    finally:
        load.finish()

    info = os.path.join(tmp, "drills.json")
    with open(info, "w") as f:
        json.dump({"site_id": sid, "passed_id": d["id"], "operator": token(c, "oncall", "operator"),
                   "read": token(c, "viewer", "read")}, f)
    uilib.check_script("drills_test.mjs", c, CDNCA_DRILLS=info)

    # what the browser did reached controld: one more drill, started by the operator, cancelled
    st, body, _ = c.api("GET", "/v1/sites/%d/drills" % sid)
    assert st == 200, body
    mine = [x for x in body["drills"] if x["id"] != d["id"]]
    assert len(mine) == 1 and mine[0]["result"] == "cancelled" and mine[0]["created_by"] == "oncall", mine
    assert c.api("GET", "/v1/sites/%d" % sid)[1]["current_level"] == 1


if __name__ == "__main__":
    uilib.main([test_drill_panel])
