#!/usr/bin/env python3
"""test_integrity — write integrity of the API (DESIGN §4 "Safe concurrent edits", issue 13).

One transaction per operation: concurrent PATCHes of different fields both survive, concurrent
origin adds never pass the 64-origin cap, and a change can never be separated from the level
re-evaluation it causes (kill -9 at random moments; a database left stranded by an older
controld is repaired at start).
"""

import os
import random
import sqlite3
import threading
import time

import harness
from harness import Controld

ROUNDS = 40


def make_site(c, name, origins=None, **extra):
    body = {"name": name, "hostnames": [name + ".example.com"]}
    if origins is not None:
        body["origins"] = origins
    body.update(extra)
    status, j, _ = c.api("POST", "/v1/sites", body)
    assert status == 201, (status, j)
    return j


def run_together(fns):
    """Run every fn in its own thread, started at the same moment; returns their results."""
    barrier = threading.Barrier(len(fns))
    out = [None] * len(fns)

    def wrap(i, fn):
        barrier.wait()
        out[i] = fn()

    threads = [threading.Thread(target=wrap, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


# ---- lost updates ----

def test_concurrent_site_patches_keep_both_fields(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    path = "/v1/sites/%d" % s["id"]
    lost = 0
    for r in range(ROUNDS):
        hold = 1000 + r
        retries = r % 5
        res = run_together([
            lambda: c.api("PATCH", path, {"failback_hold_ms": hold}),
            lambda: c.api("PATCH", path, {"node_retry": {"retries": retries}}),
        ])
        assert all(x[0] == 200 for x in res), res
        status, j, _ = c.api("GET", path)
        assert status == 200, j
        if j["failback_hold_ms"] != hold or j["node_retry"]["retries"] != retries:
            lost += 1
    assert lost == 0, "%d of %d rounds lost an acknowledged change" % (lost, ROUNDS)


def test_concurrent_origin_patches_keep_both_fields(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2"},
                              {"address": "10.0.0.3", "level": 2}])
    oid = s["origins"][0]["id"]
    opath = "/v1/sites/%d/origins/%d" % (s["id"], oid)
    lost = 0
    for r in range(ROUNDS):
        weight = 1 + r
        enabled = r % 2 == 0
        res = run_together([
            lambda: c.api("PATCH", opath, {"weight": weight}),
            lambda: c.api("PATCH", opath, {"enabled": enabled}),
        ])
        assert all(x[0] == 200 for x in res), res
        status, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
        o = [o for o in j["origins"] if o["id"] == oid][0]
        if o["weight"] != weight or o["enabled"] != enabled:
            lost += 1
    assert lost == 0, "%d of %d rounds lost an acknowledged change" % (lost, ROUNDS)


# ---- the 64-origin cap ----

def test_concurrent_origin_adds_never_pass_the_cap(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "big", [{"address": "10.0.%d.%d" % (i // 200, 1 + i % 200)}
                             for i in range(60)])
    path = "/v1/sites/%d/origins" % s["id"]
    res = run_together([(lambda i=i: c.api("POST", path, {"address": "10.9.0.%d" % (i + 1)}))
                        for i in range(16)])
    created = [x for x in res if x[0] == 201]
    refused = [x for x in res if x[0] == 422]
    assert len(created) == 4, [x[0] for x in res]
    assert len(refused) == 12, [x[0] for x in res]
    for x in refused:
        assert x[1]["error"]["code"] == "out_of_range" and x[1]["error"]["field"] == "origins", x
    status, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert len(j["origins"]) == 64, len(j["origins"])


# ---- a change and its level re-evaluation are one transaction ----

def level_has_enabled_origin(site):
    return any(o["enabled"] and o["level"] == site["current_level"] for o in site["origins"])


def test_kill9_never_strands_a_site_on_an_empty_level(tmp):
    """Disable/enable the only level-1 origin in a loop and kill -9 at random moments: after
    every restart the current level has an enabled origin (the change and the switch it causes
    commit together), and the stored state matches the last acknowledged answer or the next one."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, oid = s["id"], s["origins"][0]["id"]
    opath = "/v1/sites/%d/origins/%d" % (sid, oid)
    rng = random.Random(13)
    for rnd in range(6):
        stop = threading.Event()
        acked = []

        def flipper():
            enabled = False
            while not stop.is_set():
                try:
                    status, _, _ = c.api("PATCH", opath, {"enabled": enabled}, timeout=5)
                except OSError:
                    return
                if status == 200:
                    acked.append(enabled)
                    enabled = not enabled
                    if enabled is False:
                        # put level 1 back in front so the next disable must switch again
                        try:
                            c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1}, timeout=5)
                        except OSError:
                            return

        t = threading.Thread(target=flipper)
        t.start()
        time.sleep(0.05 + rng.random() * 0.3)
        c.kill9()
        stop.set()
        t.join(10)
        c.start()
        status, j, _ = c.api("GET", "/v1/sites/%d" % sid)
        assert status == 200, j
        assert level_has_enabled_origin(j), "round %d: stranded on level %d: %s" % (
            rnd, j["current_level"], j["origins"])
        o = [o for o in j["origins"] if o["id"] == oid][0]
        if not o["enabled"]:
            assert j["current_level"] == 2, j
    # the switches left their events
    status, ev, _ = c.api("GET", "/v1/sites/%d/messages?limit=1000" % sid)
    reasons = [e["data"].get("reason") for e in ev["events"] if e["type"] == "level.switched"]
    assert "no_enabled_origins" in reasons, reasons


def test_crash_between_change_and_reevaluation_leaves_neither(tmp):
    """controld dies (CDNCA_TEST_FAULT=crash_after_change: _exit right after the change's SQL,
    before its re-evaluation, the window of the old two-transaction code): after a restart the
    disable is not there either, so the site is on level 1 with its origin enabled."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, oid = s["id"], s["origins"][0]["id"]
    c.stop()
    c.env["CDNCA_TEST_FAULT"] = "crash_after_change"
    c.start()
    try:
        status, j, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oid), {"enabled": False},
                             timeout=10)
        raise AssertionError("the fault did not fire: %s %s" % (status, j))
    except OSError:
        pass
    harness.wait_until(lambda: not c.running(), what="controld to exit")
    assert c.proc.returncode == 70, c.proc.returncode
    del c.env["CDNCA_TEST_FAULT"]
    c.start()
    status, j, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert j["current_level"] == 1 and j["origins"][0]["enabled"] is True, j
    assert j["config_version"] == s["config_version"], j
    # and the same change without the fault commits with its switch
    status, o, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oid), {"enabled": False})
    assert status == 200, o
    status, j, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert j["current_level"] == 2, j


def test_failed_reevaluation_undoes_the_change(tmp):
    """The re-evaluation's error is not ignored: the PATCH answers 500 and nothing is stored."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, oid = s["id"], s["origins"][0]["id"]
    c.stop()
    c.env["CDNCA_TEST_FAULT"] = "fail_reevaluate"
    c.start()
    status, j, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oid), {"enabled": False})
    assert status == 500 and j["error"]["code"] == "internal", (status, j)
    status, j, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert j["current_level"] == 1 and j["origins"][0]["enabled"] is True, j
    assert j["config_version"] == s["config_version"], j
    status, ev, _ = c.api("GET", "/v1/sites/%d/messages" % sid)
    assert ev["events"] == [], ev


def test_start_repairs_a_site_stranded_by_an_older_controld(tmp):
    """A database in the state the old two-transaction code could leave after kill -9 (level 1's
    only origin disabled, the site still on level 1, no event): controld re-evaluates every site
    at start, switches, records the event and republishes."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    other = make_site(c, "fine", [{"address": "10.0.1.1"}, {"address": "10.0.1.2", "level": 2}])
    c.stop()
    db = sqlite3.connect(c.db)
    db.execute("UPDATE origins SET enabled = 0 WHERE id = ?", (s["origins"][0]["id"],))
    db.commit()
    db.close()
    c.start()
    status, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert j["current_level"] == 2, j
    assert j["config_version"] > s["config_version"], (j["config_version"], s["config_version"])
    status, ev, _ = c.api("GET", "/v1/sites/%d/messages" % s["id"])
    sw = [e for e in ev["events"] if e["type"] == "level.switched"]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "no_enabled_origins", ev
    # a site that was fine is left as it was
    status, j2, _ = c.api("GET", "/v1/sites/%d" % other["id"])
    assert j2["current_level"] == 1 and j2["config_version"] == other["config_version"], j2


if __name__ == "__main__":
    harness.main()
