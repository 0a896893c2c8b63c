#!/usr/bin/env python3
"""test_node — the node protocol end to end: enrolment, config sync and its disk cache,
heartbeats, controld loss, revocation, noded's command line (docs/design.md#command-lines, docs/design.md#node-protocol)."""

import json
import os
import re
import socket
import subprocess
import threading
import time

import harness
from harness import Controld, Noded, Origin, wait_until
from scenario_lib import NODE_ARGS, card, enrol, node_site, node_status, visit_origin
from scenario_lib import node_status as status_of, plain_site as make_site, plain_site


def site_in(status, site_id):
    for s in status.get("sites", []):
        if s.get("id") == site_id:
            return s
    return None


def nodes_by_id(c):
    st, body, _ = c.api("GET", "/v1/nodes")
    assert st == 200, body
    return {n["id"]: n for n in body["nodes"]}


def test_change_reaches_every_node(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    nodes = []
    for i in range(3):
        nid, tok = enrol(c, "edge-%d" % i)
        n = Noded(c, tok, tmp, name="noded%d" % i,
                  extra_args=["--heartbeat-interval-ms", "1000"]).start()
        nodes.append((nid, n))
    for _, n in nodes:
        wait_until(lambda n=n: site_in(status_of(n), site["id"]), 20, "first config on %s" % n.name)
    first = status_of(nodes[0][1])["seq"]
    assert first >= 1

    # a change published while every node is long-polling reaches all of them
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % site["id"], {"name": "shop-renamed"})
    assert st == 200, body
    for nid, n in nodes:
        def renamed(n=n):
            s = status_of(n)
            ss = site_in(s, site["id"])
            return s["seq"] > first and ss and ss["name"] == "shop-renamed" and s
        s = wait_until(renamed, 20, "new config on %s" % n.name)
        assert s["sync"]["state"] == "live", s["sync"]
        assert s["node"]["id"] == nid, s["node"]
    seq = status_of(nodes[0][1])["seq"]

    # the change was also written to every node's disk cache
    for _, n in nodes:
        with open(os.path.join(n.state_dir, "config.json")) as f:
            cached = json.load(f)
        assert cached["seq"] == seq, cached["seq"]
        assert [s["name"] for s in cached["sites"]] == ["shop-renamed"]

    # heartbeats report the applied seq: GET /v1/nodes shows every node online and current
    def all_current():
        by = nodes_by_id(c)
        return all(by[nid]["online"] and by[nid]["config_seq"] == seq and by[nid]["version"]
                   for nid, _ in nodes)
    wait_until(all_current, 20, "every node online on seq %d in GET /v1/nodes" % seq)

    # the proxy serves the synced config
    st, body, _ = nodes[0][1].visit("GET", "/hello", "shop.test", timeout=10)
    assert st == 200, (st, body)
    assert body["origin"] == "a", body

    # a disabled origin is taken out of the published config
    oid = site["origins"][0]["id"]
    st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (site["id"], oid), {"enabled": False})
    assert st == 200, body
    for _, n in nodes:
        wait_until(lambda n=n: (site_in(status_of(n), site["id"]) or {}).get("origins") == [],
                   20, "origin removed on %s" % n.name)
    st, text, _ = nodes[0][1].admin("GET", "/metrics")
    assert st == 200
    assert "cdnca_node_config_seq %d" % status_of(nodes[0][1])["seq"] in text, text


def test_controld_down_then_restart_from_cache(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    nid, tok = enrol(c, "edge")
    # the node is live again when a config poll is answered: with nothing published that is
    # the held poll's 304 at its end, so the poll is held 2 s instead of the default 25 s
    n = Noded(c, tok, tmp, extra_args=["--config-wait-ms", "2000"]).start()
    wait_until(lambda: site_in(status_of(n), site["id"]), 20, "first config")
    seq = status_of(n)["seq"]

    c.kill9()
    # the node keeps its config and keeps serving it
    s = wait_until(lambda: (lambda s: s["sync"]["state"] == "retrying" and s)(status_of(n)), 30,
                   "sync notices the lost controld")
    assert s["seq"] == seq and site_in(s, site["id"]), s
    st, body, _ = n.visit("GET", "/x", "shop.test", timeout=10)
    assert st == 200, (st, body)

    # restarted while controld is down: it serves from its cache
    n.restart()
    s = status_of(n)
    assert s["seq"] == seq, s
    assert s["sync"]["from_cache"] is True, s["sync"]
    assert s["sync"]["state"] in ("cached", "retrying"), s["sync"]
    assert site_in(s, site["id"]), s
    st, body, _ = n.visit("GET", "/y", "shop.test", timeout=10)
    assert st == 200, (st, body)

    # controld back: the node reconnects (capped backoff) and goes live again
    c.start()
    s = wait_until(lambda: (lambda s: s["sync"]["state"] == "live" and s)(status_of(n)), 60,
                   "sync live again")
    assert s["seq"] == seq, s
    # nothing was published meanwhile: the poll's 304 confirms the cached config and names the
    # node (the node restarted from its cache knew no id)
    assert s["sync"]["from_cache"] is False, s["sync"]
    assert s["node"]["id"] == nid, s["node"]
    # the 304 itself: the node's id and controld's clock, as every answer to a node
    st, _, hdrs = harness.http_call(harness.HOST, c.port, "GET",
                                    "/v1/node/config?since=%d&wait_ms=0" % seq,
                                    headers={"Authorization": "Bearer " + tok})
    assert st == 304 and hdrs.get("X-Cdnca-Node-Id") == str(nid), (st, dict(hdrs))
    assert int(hdrs.get("X-Cdnca-Now")) > 0, dict(hdrs)



def test_cache_write_failure_is_shown_and_retried(tmp):
    """A config noded applied but could not write to config.json (here its temp file's path is
    taken by a directory; a full or read-only disk alike) is reported in /status
    (sync.cache_error, sync.cached_seq: what a restart would serve) and written again after a
    later poll once writing works, so a restart while controld is away serves the config last
    applied, not an older one."""
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    nid, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp, extra_args=NODE_ARGS).start()
    wait_until(lambda: site_in(status_of(n), site["id"]), 20, "first config")
    first = status_of(n)["seq"]
    assert status_of(n)["sync"]["cached_seq"] == first, status_of(n)["sync"]
    blocker = os.path.join(n.state_dir, ".config.json.tmp")
    os.mkdir(blocker)
    os.mkdir(os.path.join(blocker, "x"))  # not removable by unlink or rmdir
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % site["id"], {"name": "shop-renamed"})
    assert st == 200, body
    s = wait_until(lambda: (lambda s: s["seq"] > first and s)(status_of(n)), 20, "new config")
    seq = s["seq"]
    assert s["sync"]["cached_seq"] == first, s["sync"]
    assert s["sync"]["cache_error"] and ".config.json.tmp" in s["sync"]["cache_error"], s["sync"]
    with open(os.path.join(n.state_dir, "config.json")) as f:
        assert json.load(f)["seq"] == first
    # writing works again: a later poll (a 304: nothing new published) writes the config
    os.rmdir(os.path.join(blocker, "x"))
    os.rmdir(blocker)
    s = wait_until(lambda: (lambda s: s["sync"]["cached_seq"] == seq and s)(status_of(n)), 20,
                   "the applied config cached after a poll")
    assert s["sync"]["cache_error"] is None, s["sync"]
    with open(os.path.join(n.state_dir, "config.json")) as f:
        assert json.load(f)["seq"] == seq
    # restarted while controld is away: the config last applied is served
    c.kill9()
    n.restart()
    s = status_of(n)
    assert s["seq"] == seq and s["sync"]["from_cache"] is True, s
    assert site_in(s, site["id"])["name"] == "shop-renamed", s
    log = open(n.log_path, errors="replace").read()
    assert "applied but not cached" in log and "cached in" in log, log[-2000:]

def test_revoked_node_stops_syncing(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    nid, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp, extra_args=["--heartbeat-interval-ms", "500",
                                       "--config-wait-ms", "1000"]).start()
    wait_until(lambda: site_in(status_of(n), site["id"]), 20, "first config")
    seq = status_of(n)["seq"]
    st, _, _ = c.api("DELETE", "/v1/nodes/%d" % nid)
    assert st == 204
    s = wait_until(lambda: (lambda s: s["sync"]["revoked"] and s)(status_of(n)), 30,
                   "the node notices its revocation")
    assert s["sync"]["state"] == "revoked", s["sync"]
    # it stops syncing: a later change does not arrive, and the last config is still served
    st, body, _ = c.api("PATCH", "/v1/sites/%d" % site["id"], {"name": "after-revoke"})
    assert st == 200, body
    s = status_of(n)
    assert s["seq"] == seq and site_in(s, site["id"])["name"] == "shop", s
    st, body, _ = n.visit("GET", "/z", "shop.test", timeout=10)
    assert st == 200, (st, body)
    with open(n.log_path) as f:
        log = f.read()
    assert "revoked" in log and "401" in log, log[-2000:]
    assert tok not in log  # the token is never logged
    # its token is refused by controld
    st, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
    assert st == 401, body


def test_node_routes_validate(tmp):
    c = Controld(tmp).start()
    nid, tok = enrol(c, "edge")
    # node routes want a node token; admin routes refuse it
    assert c.api("GET", "/v1/node/config?wait_ms=0", token=None)[0] == 401
    assert c.api("GET", "/v1/node/config?wait_ms=0")[0] == 403
    assert c.api("GET", "/v1/sites", token=tok)[0] == 403
    # nothing published yet: a poll with wait_ms=0 is a 304 at once
    assert c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)[0] == 304
    st, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=60001", token=tok)
    assert st == 400 and body["error"]["field"] == "wait_ms", body
    good = {"version": "1.2.3", "config_version": 0,
            "observations": [{"site_id": 1, "origin_id": 2, "requests": 5, "failures": 1,
                              "skipped": False}]}
    assert c.api("POST", "/v1/node/heartbeat", good, token=tok)[0] == 204
    for bad, field, code in [
            ({"version": "x", "config_version": -1}, "config_version", 422),
            ({"config_version": 1}, "version", 422),
            ({"version": "x", "config_version": 1, "extra": 1}, "extra", 400),
            ({"version": "x", "config_version": 1, "observations": {}}, "observations", 422),
            ({"version": "x", "config_version": 1,
              "observations": [{"site_id": 1, "origin_id": 2, "requests": 1, "failures": 1,
                                "skipped": "no"}]}, "observations[0].skipped", 422)]:
        st, body, _ = c.api("POST", "/v1/node/heartbeat", bad, token=tok)
        assert st == code and body["error"]["field"] == field, (bad, st, body)
    st, body, _ = c.api("POST", "/v1/node/heartbeat", raw="{", token=tok)
    assert st == 400, body
    by = nodes_by_id(c)
    assert by[nid]["version"] == "1.2.3" and by[nid]["online"], by  # bad input changed nothing
    # votes: unknown round -> 409; malformed -> 422
    st, body, _ = c.api("POST", "/v1/node/votes", {"round_id": 12345, "results": []}, token=tok)
    assert st == 409, body
    st, body, _ = c.api("POST", "/v1/node/votes",
                        {"round_id": 1, "results": [{"task_id": 0, "ok": True}]}, token=tok)
    assert st == 422 and body["error"]["field"] == "results[0].task_id", body
    st, body, _ = c.api("POST", "/v1/node/votes", {"round_id": 1, "results": [
        {"task_id": 1, "ok": False, "error": "refused \u001b[2J"}]}, token=tok)
    assert st == 422 and body["error"]["field"] == "results[0].error", body
    # no round open: a task poll with wait_ms=0 is a 304
    assert c.api("GET", "/v1/node/tasks?wait_ms=0", token=tok)[0] == 304
    # a new node whose calls are all refused is never seen: votes for no round, an origin listed
    # twice (its counters would count twice), a config seq past the newest publication
    nid2, tok2 = enrol(c, "edge-2")
    obs = {"site_id": 1, "origin_id": 2, "requests": 5, "failures": 1, "skipped": False}
    for path, body, want, field, code in [
            ("/v1/node/votes", {"round_id": 12345, "results": []}, 409, "round_id",
             "round_closed"),
            ("/v1/node/heartbeat", {"version": "x", "config_version": 0,
                                    "observations": [obs, dict(obs, origin_id=3), obs]},
             422, "observations[2].origin_id", "duplicate"),
            ("/v1/node/heartbeat", {"version": "x", "config_version": 10 ** 15}, 422,
             "config_version", "out_of_range")]:
        st, err, _ = c.api("POST", path, body, token=tok2)
        assert st == want and err["error"]["field"] == field and err["error"]["code"] == code, \
            (path, st, err)
    time.sleep(1.5)  # presence is written in batches about once a second
    by = nodes_by_id(c)
    assert not by[nid2]["online"] and by[nid2]["last_seen_at"] is None, by[nid2]
    assert by[nid2]["config_seq"] == 0, by[nid2]
    assert c.api("POST", "/v1/node/heartbeat", {"version": "x", "config_version": 0},
                 token=tok2)[0] == 204
    assert wait_until(lambda: nodes_by_id(c)[nid2]["online"], 5, "the node seen")


def test_long_poll_wakes_and_times_out(tmp):
    c = Controld(tmp).start()
    _, tok = enrol(c, "edge")
    o = Origin("a", tmpdir=tmp).start()
    site = make_site(c, "shop", "shop.test", o)
    st, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
    assert st == 200 and body["full"] is True and body["seq"] >= 1, body
    seq = body["seq"]
    # nothing newer: held, then 304
    st, _, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=300" % seq, token=tok)
    assert st == 304
    # a newer seq wakes the poll with a delta
    out = {}

    def poll():
        out["r"] = c.api("GET", "/v1/node/config?since=%d&wait_ms=30000" % seq, token=tok)
    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)  # let it suspend (if not, it answers the delta at once: same result)
    st, body, _ = c.api("DELETE", "/v1/sites/%d" % site["id"])
    assert st == 204
    t.join(40)
    assert not t.is_alive()
    st, body, _ = out["r"]
    assert st == 200, body
    assert body["full"] is False and body["deleted"] == [site["id"]] and body["sites"] == [], body
    # a node ahead of the database (e.g. after a reset) gets the full set
    st, body, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % (seq + 1000), token=tok)
    assert st == 200 and body["full"] is True and body["sites"] == [], body
    # controld stops promptly with a poll suspended
    t = threading.Thread(target=lambda: out.update(last=c.api(
        "GET", "/v1/node/config?since=%d&wait_ms=60000" % body["seq"], token=tok)))
    t.start()
    time.sleep(0.3)
    c.stop(timeout=15)
    t.join(20)


def api_connections(c):
    """The TCP connections controld holds on its API port (its other descriptors, e.g. one
    PostgreSQL connection per thread that reads, come and go on their own)."""
    mine = set()
    for fd in os.listdir("/proc/%d/fd" % c.pid()):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (c.pid(), fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                port, state, inode = int(cols[1].rsplit(":", 1)[1], 16), cols[3], cols[9]
                if port == c.port and state != "0A" and inode in mine:  # 0A: the listener
                    n += 1
    return n


def test_one_held_poll_per_node(tmp):
    """docs/design.md#node-protocol: a node holds one config poll and one task poll at a time; a
    newer one ends the older at once (304). One token opening poll after poll and closing each
    socket unread held a connection per poll for its whole wait (a closed client is not noticed
    while a poll is held) and locked its address out after 64."""
    c = Controld(tmp).start()
    _, tok = enrol(c, "edge")
    st, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
    seq = body["seq"] if st == 200 else 0
    for path in ("/v1/node/config?since=%d&wait_ms=60000" % seq, "/v1/node/tasks?wait_ms=60000"):
        for _ in range(100):
            s = socket.create_connection((harness.HOST, c.port), timeout=5)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                       % (path, tok)).encode())
            time.sleep(0.005)  # the poll is held before the next one comes
            s.close()
    # the address is not locked out, and controld holds about one connection per poll kind
    t0 = time.monotonic()
    st, _, _ = c.api("GET", "/v1/sites")
    assert st == 200 and time.monotonic() - t0 < 2
    # the newest poll of each kind may still be held: at most those two, and not 200
    held = wait_until(lambda: (lambda n: n if n <= 2 else None)(api_connections(c)), 10,
                      "the closed polls' connections to go")
    print("controld's API connections after 200 polls closed unread: %d" % held, flush=True)
    # a node polling as it should still gets its answers
    st, _, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=200" % seq, token=tok)
    assert st == 304


def noded_metric(n, name):
    st, text, _ = n.admin("GET", "/metrics", timeout=5)
    assert st == 200, text
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else 0


def test_heartbeats_at_fleet_scale(tmp):
    """With 7,681 published origins the heartbeats still get through: a beat carries only what
    controld has not acknowledged, within the 1 MiB body (all of them used to go in every beat:
    past about 7,000 origins every heartbeat was 413), and a visitor's request shows up in the
    status card from the next beats."""
    c = Controld(tmp, extra_args=["--probe-interval-ms", "3600000"]).start()
    o = Origin("a", tmpdir=tmp).start()
    live = plain_site(c, "live", "live.example.com", o)
    for i in range(120):
        st, body, _ = c.api("POST", "/v1/sites", {
            "name": "bulk%03d" % i, "hostnames": ["bulk%03d.example.com" % i],
            "origins": [{"level": 1 + k // 32, "address": "127.0.0.1", "port": 1 + i * 64 + k,
                         "scheme": "http"} for k in range(64)]})
        assert st == 201, body
    nid, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp, name="edge", extra_args=NODE_ARGS).start()
    wait_until(lambda: node_site(n, live["id"]) is not None and len(node_status(n)["sites"]) == 121,
               60, "the whole config on the node")
    wait_until(lambda: noded_metric(n, 'cdnca_node_heartbeats_total{result="ok"}') >= 4, 30,
               "four accepted heartbeats")
    assert noded_metric(n, 'cdnca_node_heartbeats_total{result="failed"}') == 0
    seq = node_status(n)["seq"]
    wait_until(lambda: nodes_by_id(c)[nid]["config_seq"] == seq, 10, "the node's seq on controld")
    for _ in range(5):
        st, _ = visit_origin(n, "live.example.com")
        assert st == 200
    wait_until(lambda: card(c, live["id"])["levels"][0]["origins"][0]["node_observations"]
               ["requests"] == 5, 10, "the visits in the status card")
    assert noded_metric(n, 'cdnca_node_heartbeats_total{result="failed"}') == 0
    n.stop()
    c.stop()


def test_forgotten_observations_come_back(tmp):
    """A controld that forgot what a node's heartbeats told it (its database restored from a
    backup older than the reports) has each origin's observation back within 60 heartbeat
    intervals though nothing changed: an acknowledgement holds that long, then the origin is
    reported again (without it, an idle origin's row came back only when its counters moved)."""
    c = Controld(tmp, extra_args=["--probe-interval-ms", "3600000"]).start()
    o = Origin("a", tmpdir=tmp).start()
    live = plain_site(c, "live", "live.example.com", o)
    _, tok = enrol(c, "edge")
    # heartbeats at the option's floor (100 ms): the 60 intervals an acknowledgement holds are 6 s
    beat_ms = 100
    n = Noded(c, tok, tmp, name="edge", extra_args=["--heartbeat-interval-ms", str(beat_ms),
                                                    "--config-wait-ms", "2000"]).start()
    wait_until(lambda: node_site(n, live["id"]) is not None, 30, "the site on the node")
    for _ in range(3):
        st, _ = visit_origin(n, "live.example.com")
        assert st == 200

    def seen():
        return card(c, live["id"])["levels"][0]["origins"][0]["node_observations"]["requests"]
    wait_until(lambda: seen() == 3, 10, "the visits in the status card")
    time.sleep(1)  # acknowledged by now: the beats carry nothing of this origin
    harness.db_query(c, "DELETE FROM node_observations")
    assert seen() == 0
    refresh_s = 60 * beat_ms / 1000.0
    t0 = time.monotonic()
    wait_until(lambda: seen() == 3, refresh_s + 10, "the forgotten row back unchanged")
    print("  forgotten row back after %.1f s (refresh %.0f s)" % (time.monotonic() - t0,
                                                                 refresh_s))
    n.stop()
    c.stop()


def test_old_publications_are_pruned(tmp):
    """Publications older than their retention go when the engine starts (and hourly), but each
    site's newest (what its nodes must hold) and those an incident that is still kept covers
    (its propagation figures read them). A node in step keeps getting deltas, a delta from
    before the pruned ones still names every site changed since and only those, and seqs go on
    from the newest."""
    c = Controld(tmp, extra_args=["--probe-interval-ms", "3600000", "--event-retention-days", "1",
                                  "--incident-retention-days", "1",
                                  "--drill-retention-days", "1"]).start()
    o = Origin("a", tmpdir=tmp).start()
    a, b, s3, d = (plain_site(c, n, n + ".example.com", o) for n in ("a", "b", "c", "d"))
    for i in range(3):
        st, j, _ = c.api("PATCH", "/v1/sites/%d" % a["id"],
                         {"hostnames": ["a.example.com", "a%d.example.com" % i]})
        assert st == 200, j
    st, _, _ = c.api("DELETE", "/v1/sites/%d" % d["id"])
    assert st == 204
    pubs = harness.db_query(c, "SELECT seq, site_id FROM publications ORDER BY seq")
    assert [s for s, _ in pubs] == list(range(1, 9)), pubs  # a b c d, a a a, d deleted
    day = 86400000
    harness.db_query(c, "UPDATE publications SET created_at = created_at - %d" % (2 * day))
    # an incident of site a, resolved just now (kept), that began before a's second change
    t5 = harness.db_query(c, "SELECT created_at FROM publications WHERE seq = 5")[0][0]
    harness.db_query(c, "INSERT INTO incidents (site_id, site_name, state, trigger, opened_at, "
                        "resolved_at, opened_level) VALUES (%d, 'a', 'resolved', 'manual', %d, "
                        "%d, 1)" % (a["id"], t5 + 1, int(time.time() * 1000)))
    c.restart()
    # gone: a's creation and first change (before the incident) and d's creation; a's second
    # change stays (the incident covers it)
    wait_until(lambda: harness.db_query(c, "SELECT seq FROM publications ORDER BY seq")
               == [(2,), (3,), (6,), (7,), (8,)], 15, "the replaced publications pruned")
    _, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp, name="edge", extra_args=NODE_ARGS).start()
    wait_until(lambda: node_status(n).get("seq") == 8, 30, "the node in step")
    st, j, _ = c.api("PATCH", "/v1/sites/%d" % b["id"],
                     {"hostnames": ["b.example.com", "b2.example.com"]})
    assert st == 200, j
    wait_until(lambda: node_status(n).get("seq") == 9, 30, "the next seq on the node")
    # a delta from c's seq, across the pruned ones (4, 5): a and b changed, d deleted, c not
    st, body, _ = harness.http_call(harness.HOST, c.port, "GET", "/v1/node/config?since=3&wait_ms=0",
                                    headers={"Authorization": "Bearer " + tok})
    assert st == 200, body
    assert body["seq"] == 9 and body["full"] is False, body
    assert sorted(x["id"] for x in body["sites"]) == sorted([a["id"], b["id"]]), body
    assert body["deleted"] == [d["id"]] and s3["id"] not in [x["id"] for x in body["sites"]], body
    n.stop()
    c.stop()


def test_cli():
    binary = os.path.join(harness.BUILD, "noded", "noded")
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("noded "), r
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "--controld" in r.stdout, r
    r = subprocess.run([binary, "--bogus"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    env = dict(os.environ)
    env.pop("CDNCA_NODE_TOKEN", None)
    r = subprocess.run([binary, "--controld", "http://127.0.0.1:1"], capture_output=True,
                       text=True, timeout=10, env=env)
    assert r.returncode == 2 and "CDNCA_NODE_TOKEN" in r.stderr, r
    r = subprocess.run([binary], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "controld" in r.stderr, r


if __name__ == "__main__":
    harness.main()
