#!/usr/bin/env python3
"""test_ui_fleet — the dashboard with a fleet: 300 sites in mixed states on a real controld, driven
in Debian's chromium by ui/fleet_test.mjs (overview counts = /v1/summary, state filter, search,
pagination, health timeline marks, per-node propagation, tokens created and revoked in the UI,
audit with the token's name, a manual switch "by <token>", a read token without write controls,
the 403 banner, 800 px layout), then 10,000 sites for the list's render time (reported) and the
audit page's newest record after more than 10,000 writes.

Two test origins answer per health-check path, so one site's path chooses its state:
  ok       /ok     a 200, b 200          on level 1
  backup   /l1bad  a 503, b 200          fails over to level 2
  down     /bad    a 503, b 503          all levels unhealthy
  fb       /flip   a 503 then 200        manual failback: failback available
  paused   /ok     level 2 disabled      health checks paused (one enabled origin)
Skips (exit 77, reported as skipped by ctest) when chromium, node or ui/node_modules is missing.
"""

import json
import os
import threading
import time

import uilib
from harness import Controld, Origin, wait_until

SETTLE_S = 90
GROUPS = [  # name, count, health-check path, failback, disable level 2
    ("ok", 200, "/ok", "auto", False),
    ("backup", 40, "/l1bad", "auto", False),
    ("down", 20, "/bad", "auto", False),
    ("fb", 20, "/flip", "manual", False),
    ("paused", 20, "/ok", "auto", True),
]
BENCH_SITES = 10000
WORKERS = 4


def parallel(fn, items):
    """fn(item) for every item on WORKERS threads; the first exception is raised."""
    errors = []

    def work(k):
        for i in range(k, len(items), WORKERS):
            try:
                fn(items[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return
    ts = [threading.Thread(target=work, args=(k,)) for k in range(WORKERS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def make_fleet(c, a, b):
    """Create the GROUPS' sites; returns {group: [site ids]}."""
    specs = []
    for group, count, path, failback, _ in GROUPS:
        for i in range(count):
            specs.append((group, i, path, failback))
    ids = {g[0]: [None] * g[1] for g in GROUPS}

    def create(spec):
        group, i, path, failback = spec
        name = "fleet-%s-%03d" % (group, i)
        st, body, _ = c.api("POST", "/v1/sites", {
            "name": name, "hostnames": ["%s-%03d.fleet.test" % (group, i)], "failback": failback,
            "health_check": {"enabled": True, "path": path, "timeout_ms": 2000},
            "origins": [{"level": 1, "address": a.address, "port": a.port, "scheme": "http"},
                        {"level": 2, "address": b.address, "port": b.port, "scheme": "http"}]})
        assert st == 201, (name, st, body)
        ids[group][i] = body["id"]
        if group == "paused":
            oid = [o["id"] for o in body["origins"] if o["level"] == 2][0]
            st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (body["id"], oid),
                                {"enabled": False})
            assert st == 200, body
    parallel(create, specs)
    return ids


def card(c, sid):
    st, body, _ = c.api("GET", "/v1/sites/%d/status" % sid)
    assert st == 200, body
    return body


def settled(c, ids, want):
    """True when every site of the groups in want matches want[group](card)."""
    for group, pred in want.items():
        for sid in ids[group]:
            if not pred(card(c, sid)):
                return False
    return True


def enrol_nodes(c):
    """Two nodes: edge-current reports the latest publication, edge-behind an old one."""
    out = []
    for name in ("edge-current", "edge-behind"):
        st, body, _ = c.api("POST", "/v1/nodes", {"name": name})
        assert st == 201, body
        out.append(body)
    return out


def heartbeat(c, node, seq):
    st, body, _ = c.api("POST", "/v1/node/heartbeat",
                        {"version": "test", "config_version": seq, "observations": []},
                        token=node["token"])
    assert st in (200, 204), (st, body)


def test_fleet(tmp):
    a = Origin("a", tmpdir=tmp).start()
    b = Origin("b", tmpdir=tmp).start()
    a.set(health_path_status={"/ok": 200, "/l1bad": 503, "/bad": 503, "/flip": 503})
    b.set(health_path_status={"/ok": 200, "/l1bad": 200, "/bad": 503, "/flip": 200})
    c = Controld(tmp, extra_args=["--probe-interval-ms", "500"]).start()
    t0 = time.monotonic()
    ids = make_fleet(c, a, b)
    print("# created %d sites in %.1f s" % (sum(len(v) for v in ids.values()),
                                           time.monotonic() - t0), flush=True)

    wait_until(lambda: settled(c, ids, {
        "backup": lambda k: k["current_level"] == 2,
        "down": lambda k: k["all_levels_unhealthy"],
        "fb": lambda k: k["current_level"] == 2,
        "paused": lambda k: k["health_check"]["state"] == "paused",
    }), timeout=SETTLE_S, interval=0.5, what="the fleet's states")
    a.set(health_path_status={"/ok": 200, "/l1bad": 503, "/bad": 503, "/flip": 200})
    wait_until(lambda: settled(c, ids, {"fb": lambda k: k["failback_available"]}),
               timeout=SETTLE_S, interval=0.5, what="failback available on the fb sites")

    nodes = enrol_nodes(c)
    # edge-current says it applied the newest publication (a node cannot claim one past it)
    st, cfg, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=nodes[0]["token"])
    assert st == 200 and cfg["seq"] >= card(c, ids["fb"][0])["propagation"]["seq"], (st, cfg)
    heartbeat(c, nodes[0], cfg["seq"])
    heartbeat(c, nodes[1], 0)

    fleet = os.path.join(tmp, "fleet.json")
    with open(fleet, "w") as f:
        json.dump({"ids": ids, "nodes": [{"id": n["id"], "name": n["name"]} for n in nodes]}, f)
    uilib.check_script("fleet_test.mjs", c, CDNCA_FLEET=fleet)

    # The list at 10,000 sites (no health checks: only the list's size matters here).
    have = sum(len(v) for v in ids.values())
    t0 = time.monotonic()

    def bulk(i):
        st, body, _ = c.api("POST", "/v1/sites", {
            "name": "bulk-%05d" % i, "hostnames": ["bulk-%05d.bulk.test" % i],
            "health_check": {"enabled": False},
            "origins": [{"level": 1, "address": a.address, "port": a.port, "scheme": "http"}]})
        assert st == 201, body
    parallel(bulk, list(range(BENCH_SITES - have)))
    print("# added %d sites in %.1f s" % (BENCH_SITES - have, time.monotonic() - t0), flush=True)
    # the newest write: the audit page must show it first although more than 10,000 came before
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % ids["ok"][0], {"failback": "manual"})
    assert st == 200, body
    uilib.check_script("list_bench.mjs", c, CDNCA_SITES=str(BENCH_SITES),
                       CDNCA_NEWEST_PATH="/v1/sites/%d" % ids["ok"][0])


if __name__ == "__main__":
    uilib.main([test_fleet])
