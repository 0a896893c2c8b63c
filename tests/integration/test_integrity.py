#!/usr/bin/env python3
"""test_integrity — write integrity of the API (docs/design.md#safe-concurrent-edits, issue 13).

One transaction per operation: concurrent PATCHes of different fields both survive, concurrent
origin adds never pass the 64-origin cap, and a change can never be separated from the level
re-evaluation it causes (kill -9 at random moments; a database left stranded by an older
controld is repaired at start).
"""

import http.client
import json
import os
import random
import subprocess
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
    """controld dies (--test-fault crash_after_change: _exit right after the change's SQL,
    before its re-evaluation, the window of the old two-transaction code): after a restart the
    disable is not there either, so the site is on level 1 with its origin enabled."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, oid = s["id"], s["origins"][0]["id"]
    c.stop()
    c.extra_args += ["--test-fault", "crash_after_change"]
    c.start()
    try:
        status, j, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oid), {"enabled": False},
                             timeout=10)
        raise AssertionError("the fault did not fire: %s %s" % (status, j))
    except OSError:
        pass
    harness.wait_until(lambda: not c.running(), what="controld to exit")
    assert c.proc.returncode == 70, c.proc.returncode
    c.extra_args = c.extra_args[:-2]
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
    c.extra_args += ["--test-fault", "fail_reevaluate"]
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
    harness.db_query(c, "UPDATE origins SET enabled = 0 WHERE id = %d" % s["origins"][0]["id"])
    c.start()
    # with SQLite the sites are re-evaluated before controld serves; on PostgreSQL (cluster
    # mode) when this replica gains the engine lease, just after it starts serving
    harness.wait_until(lambda: c.api("GET", "/v1/sites/%d" % s["id"])[1]["current_level"] == 2,
                       timeout=30, what="the stranded site switched to level 2")
    status, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert j["current_level"] == 2, j
    assert j["config_version"] > s["config_version"], (j["config_version"], s["config_version"])
    status, ev, _ = c.api("GET", "/v1/sites/%d/messages" % s["id"])
    sw = [e for e in ev["events"] if e["type"] == "level.switched"]
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "no_enabled_origins", ev
    # a site that was fine is left as it was
    status, j2, _ = c.api("GET", "/v1/sites/%d" % other["id"])
    assert j2["current_level"] == 1 and j2["config_version"] == other["config_version"], j2


# ---- strict input: stored exactly as sent, or refused ----

def raw_call(c, method, path, data, token=None, headers=None):
    """Send data (bytes) as the body; returns (status, body bytes, headers)."""
    hdrs = {"Authorization": "Bearer " + (token or c.admin_token)}
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.headers
    finally:
        conn.close()


def strict_json(payload):
    """Parse an answer as a strict client would: UTF-8 (no replacement), no duplicate keys."""
    def pairs(items):
        keys = [k for k, _ in items]
        assert len(keys) == len(set(keys)), "duplicate key in an answer: %s" % keys
        return dict(items)
    return json.loads(payload.decode("utf-8"), object_pairs_hook=pairs)


def error_of(status, payload):
    return status, strict_json(payload)["error"]


def test_strict_strings_are_refused_with_their_field(tmp):
    c = Controld(tmp).start()
    cases = [
        # (path, body bytes, status, code, field)
        ("/v1/sites", b'{"name":"a","hostnames":["shop.example.com\\u0000.attacker.net"]}',
         422, "invalid_string", "hostnames[0]"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"],'
                      b'"health_check":{"path":"/h\xff"}}',
         422, "invalid_string", "health_check.path"),
        ("/v1/sites", b'{"name":"a\\ud800","hostnames":["a.example.com"]}',
         422, "invalid_string", "name"),
        ("/v1/sites", b'{"name":"a","name":"b","hostnames":["a.example.com"]}',
         400, "duplicate_key", "name"),
        ("/v1/sites", b'{"name":"a","n\\u0061me":"b","hostnames":["a.example.com"]}',
         400, "duplicate_key", "name"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"],'
                      b'"origins":[{"address":"10.0.0.1","port":80,"port":81}]}',
         400, "duplicate_key", "origins[0].port"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"],"\xfe\xff":1}',
         422, "invalid_string", None),
        ("/v1/webhooks", b'{"url":"http://127.0.0.1:9/h","secret":"0123456789abcdef\\u0000tail"}',
         422, "invalid_string", "secret"),
        ("/v1/webhooks", b'{"url":"http://127.0.0.1:9/\xc0\xaf","secret":"0123456789abcdef"}',
         422, "invalid_string", "url"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"],"failback_hold_ms":1e400}',
         422, "out_of_range", "failback_hold_ms"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"]} {}', 400, "malformed_json", None),
        ("/v1/sites", b'{"name":"caf\xe9","hostnames":["a.example.com"]}',
         422, "invalid_string", "name"),
        ("/v1/sites", b'{"name":"a\x00b","hostnames":["a.example.com"]}',
         422, "invalid_string", "name"),
        ("/v1/sites", b'{"name":"a","hostnames":["a.example.com"],'
                      b'"health_check":{"path":"/\xed\xa0\x80"}}',
         422, "invalid_string", "health_check.path"),
    ]
    for path, data, status, code, field in cases:
        st, payload, _ = raw_call(c, "POST", path, data)
        got_status, err = error_of(st, payload)
        assert (got_status, err["code"], err["field"]) == (status, code, field), (data, st, err)
    # nothing was stored
    st, payload, _ = raw_call(c, "GET", "/v1/sites", None)
    assert strict_json(payload)["sites"] == []
    st, payload, _ = raw_call(c, "GET", "/v1/webhooks", None)
    assert strict_json(payload)["webhooks"] == []


def test_heartbeat_version_must_be_utf8(tmp):
    c = Controld(tmp).start()
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201, n
    st, payload, _ = raw_call(c, "POST", "/v1/node/heartbeat",
                              b'{"version":"1.0\xff","config_version":0,"observations":[]}',
                              token=n["token"])
    status, err = error_of(st, payload)
    assert status == 422 and err["field"] == "version", err
    st, payload, _ = raw_call(c, "POST", "/v1/node/heartbeat",
                              '{"version":"1.0-\u00e9","config_version":0,"observations":[]}'
                              .encode(), token=n["token"])
    assert st in (200, 204), payload
    st, payload, _ = raw_call(c, "GET", "/v1/nodes", None)
    assert strict_json(payload)["nodes"][0]["version"] == "1.0-\u00e9"


def test_what_is_stored_is_what_was_sent(tmp):
    """Escapes and non-ASCII text come back byte for byte."""
    c = Controld(tmp).start()
    body = {"name": "cafe-1", "hostnames": ["a.example.com"],
            "health_check": {"path": "/h\u00e9?q=\U0001F600"}}
    st, payload, _ = raw_call(c, "POST", "/v1/sites", json.dumps(body).encode())
    assert st == 201, payload
    s = strict_json(payload)
    st, payload, _ = raw_call(c, "GET", "/v1/sites/%d" % s["id"], None)
    s = strict_json(payload)
    assert s["health_check"]["path"] == body["health_check"]["path"], s


def test_fuzzed_bodies_never_store_or_emit_bad_text(tmp):
    """Valid bodies mutated with NUL, invalid UTF-8, surrogates and duplicate keys: every answer
    is strict UTF-8 JSON, every refusal stores nothing, and the site list stays strict JSON."""
    c = Controld(tmp).start()
    rng = random.Random(1313)
    base = b'{"name":"s%d","hostnames":["h%d.example.com"],"health_check":{"path":"/p"},' \
           b'"origins":[{"address":"10.0.0.1","port":80,"host_header":"o.example.com"}]}'
    inserts = [b"\\u0000", b"\x00", b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\\ud800",
               b"\\udc00x", b"\xf4\x90\x80\x80", b"\xc3"]
    created = 0
    for i in range(300):
        data = bytearray(base % (i, i))
        kind = rng.randrange(3)
        if kind == 0:  # inside or next to a string
            spots = [k for k in range(len(data)) if data[k:k + 1] == b'"']
            at = rng.choice(spots)
            data[at:at] = rng.choice(inserts)
        elif kind == 1:  # a duplicate key in some object
            key = rng.choice([b'"name":"x",', b'"path":"/q",', b'"port":81,'])
            opens = [k + 1 for k in range(len(data)) if data[k:k + 1] == b"{"]
            at = rng.choice(opens)
            data[at:at] = key
        else:  # raw byte flips
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.choice([0, 0x80, 0xff, 0xc3, 0x22, 0x5c])
        st, payload, _ = raw_call(c, "POST", "/v1/sites", bytes(data))
        j = strict_json(payload)
        if st == 201:
            created += 1
            # accepted: it was valid, and it is stored exactly as sent
            sent = strict_json(bytes(data))
            assert j["name"] == sent["name"], (bytes(data), j)
            assert j["health_check"]["path"] == sent.get("health_check", {}).get("path", "/"), j
        else:
            assert 400 <= st < 500 and "error" in j, (st, j)
    st, payload, _ = raw_call(c, "GET", "/v1/sites?limit=1000", None)
    assert len(strict_json(payload)["sites"]) == created
    assert created < 300  # the mutations were refused at least sometimes


# ---- revision, ETag, If-Match, Idempotency-Key ----

def test_etag_and_if_match(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, oid = s["id"], s["origins"][0]["id"]
    path = "/v1/sites/%d" % sid
    status, j, h = c.api("GET", path)
    assert h.get("ETag") == '"%d"' % j["revision"], (h.get("ETag"), j["revision"])
    etag = h.get("ETag")
    # a matching If-Match changes and moves the revision on
    status, j2, h2 = c.api("PATCH", path, {"failback": "manual"}, headers={"If-Match": etag})
    assert status == 200 and j2["revision"] == j["revision"] + 1, j2
    assert h2.get("ETag") == '"%d"' % j2["revision"]
    # the old tag is refused, and nothing changes
    status, e, h3 = c.api("PATCH", path, {"failback": "auto"}, headers={"If-Match": etag})
    assert status == 412 and e["error"]["code"] == "precondition_failed", e
    assert h3.get("ETag") == h2.get("ETag"), h3.get("ETag")
    status, j3, _ = c.api("GET", path)
    assert j3["failback"] == "manual" and j3["revision"] == j2["revision"], j3
    # origin routes use the site's revision
    opath = "%s/origins/%d" % (path, oid)
    status, e, _ = c.api("PATCH", opath, {"weight": 5}, headers={"If-Match": etag})
    assert status == 412, e
    status, o, h4 = c.api("PATCH", opath, {"weight": 5}, headers={"If-Match": h2.get("ETag")})
    assert status == 200 and o["weight"] == 5, o
    assert h4.get("ETag") == '"%d"' % (j2["revision"] + 1), h4.get("ETag")
    status, e, _ = c.api("POST", path + "/origins", {"address": "10.0.0.3"},
                         headers={"If-Match": etag})
    assert status == 412, e
    status, e, _ = c.api("DELETE", opath, headers={"If-Match": '"999"'})
    assert status == 412, e
    status, e, _ = c.api("DELETE", path, headers={"If-Match": 'W/' + h4.get("ETag")})
    assert status == 412, e  # weak tags never match
    # a switch that moves the level moves the revision on, and its answer carries the new tag
    status, card, h5 = c.api("POST", path + "/switch", {"level": 2},
                             headers={"If-Match": h4.get("ETag")})
    assert status == 200 and card["current_level"] == 2, card
    _, j5, h6 = c.api("GET", path)
    assert j5["revision"] == j2["revision"] + 2, j5
    assert h5.get("ETag") == h6.get("ETag") == '"%d"' % j5["revision"], (h5.get("ETag"),
                                                                         h6.get("ETag"))
    status, _, _ = c.api("PATCH", path, {"failback": "manual"}, headers={"If-Match": h5.get("ETag")})
    assert status == 200
    # "*" matches any existing site; without If-Match writes go through as before
    status, _, _ = c.api("PATCH", path, {"failback": "auto"}, headers={"If-Match": "*"})
    assert status == 200
    status, _, _ = c.api("DELETE", path, headers={"If-Match": "*"})
    assert status == 204
    status, _, _ = c.api("DELETE", path, headers={"If-Match": "*"})
    assert status == 404


def test_if_match_makes_read_modify_write_safe(tmp):
    """Two clients GET, change and PATCH with If-Match: exactly one wins each round, the loser
    gets 412 and the winner's change is what is stored."""
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}])
    path = "/v1/sites/%d" % s["id"]
    for r in range(10):
        _, _, h = c.api("GET", path)
        tag = h.get("ETag")
        res = run_together([
            lambda: c.api("PATCH", path, {"failback_hold_ms": 1000 + r}, headers={"If-Match": tag}),
            lambda: c.api("PATCH", path, {"failback_hold_ms": 2000 + r}, headers={"If-Match": tag}),
        ])
        codes = sorted(x[0] for x in res)
        assert codes == [200, 412], codes
        winner = [x for x in res if x[0] == 200][0][1]
        _, j, _ = c.api("GET", path)
        assert j["failback_hold_ms"] == winner["failback_hold_ms"], (j, winner)


def test_idempotency_key_replays_the_first_answer(tmp):
    c = Controld(tmp).start()
    body = {"name": "shop", "hostnames": ["shop.example.com"]}
    key = {"Idempotency-Key": "create-shop-1"}
    s1, j1, h1 = c.api("POST", "/v1/sites", body, headers=key)
    assert s1 == 201, j1
    s2, j2, h2 = c.api("POST", "/v1/sites", body, headers=key)
    assert (s2, j2) == (s1, j1), (s2, j2)
    assert h2.get("Idempotent-Replayed") == "true" and h2.get("ETag") == h1.get("ETag")
    # the same key with another body is refused with a clear code, nothing created
    s3, e, _ = c.api("POST", "/v1/sites", {"name": "other", "hostnames": ["o.example.com"]},
                     headers=key)
    assert s3 == 422 and e["error"]["code"] == "idempotency_key_reused", e
    # and on another route too
    s4, e, _ = c.api("POST", "/v1/sites/%d/origins" % j1["id"], {"address": "10.0.0.9"},
                     headers=key)
    assert s4 == 422 and e["error"]["code"] == "idempotency_key_reused", e
    _, lst, _ = c.api("GET", "/v1/sites")
    assert [x["name"] for x in lst["sites"]] == ["shop"], lst
    # a refused request does not burn its key: fixed and resent, it goes through once
    bad = {"name": "x y", "hostnames": ["x.example.com"]}
    s5, e, _ = c.api("POST", "/v1/sites", bad, headers={"Idempotency-Key": "k2"})
    assert s5 == 422, e
    good = {"name": "xy", "hostnames": ["x.example.com"]}
    s6, j6, _ = c.api("POST", "/v1/sites", good, headers={"Idempotency-Key": "k3"})
    s7, j7, _ = c.api("POST", "/v1/sites", good, headers={"Idempotency-Key": "k3"})
    assert s6 == s7 == 201 and j6 == j7
    # origins, webhook tests and nodes: created once; a node's token is never stored
    okey = {"Idempotency-Key": "origin-1"}
    a = c.api("POST", "/v1/sites/%d/origins" % j1["id"], {"address": "10.0.0.5"}, headers=okey)
    b = c.api("POST", "/v1/sites/%d/origins" % j1["id"], {"address": "10.0.0.5"}, headers=okey)
    assert a[0] == b[0] == 201 and a[1] == b[1], (a, b)
    _, site, _ = c.api("GET", "/v1/sites/%d" % j1["id"])
    assert len(site["origins"]) == 1, site
    nkey = {"Idempotency-Key": "node-1"}
    n1 = c.api("POST", "/v1/nodes", {"name": "edge-1"}, headers=nkey)
    n2 = c.api("POST", "/v1/nodes", {"name": "edge-1"}, headers=nkey)
    assert n1[0] == n2[0] == 201 and n1[1]["id"] == n2[1]["id"], (n1, n2)
    assert n1[1]["token"] and n2[1]["token"] is None, n2
    stored = " ".join(r[0] or "" for r in harness.db_query(c, "SELECT body FROM idempotency_keys"))
    assert n1[1]["token"] not in stored
    # malformed keys are refused
    s8, e, _ = c.api("POST", "/v1/sites", good, headers={"Idempotency-Key": "x" * 129})
    assert s8 == 400 and e["error"]["field"] == "Idempotency-Key", e
    # concurrent requests with one key create one site
    ckey = {"Idempotency-Key": "race"}
    body = {"name": "race", "hostnames": ["race.example.com"]}
    res = run_together([lambda: c.api("POST", "/v1/sites", body, headers=ckey)] * 8)
    assert all(x[0] == 201 for x in res) and len({x[1]["id"] for x in res}) == 1, res


def test_idempotency_keys_expire_after_a_day(tmp):
    c = Controld(tmp).start()
    body = {"name": "shop", "hostnames": ["shop.example.com"]}
    s1, j1, _ = c.api("POST", "/v1/sites", body, headers={"Idempotency-Key": "old"})
    c.stop()
    harness.db_query(c, "UPDATE idempotency_keys SET created_at = created_at - 86400001")
    c.start()
    # expired: the key is free again (the name is taken now, so this answers 409)
    s2, e, _ = c.api("POST", "/v1/sites", body, headers={"Idempotency-Key": "old"})
    assert s2 == 409, e
    # a new write prunes expired keys
    c.api("POST", "/v1/sites", {"name": "b", "hostnames": ["b.example.com"]},
          headers={"Idempotency-Key": "new"})
    keys = [r[0] for r in harness.db_query(c, "SELECT key FROM idempotency_keys")]
    # stored under the presenting token: "<token id>:<key>" (docs/design.md#safe-concurrent-edits)
    assert len(keys) == 1 and keys[0].split(":", 1)[1] == "new", keys


# ---- node heartbeats cannot grow the database ----

def test_junk_heartbeat_observations_are_not_stored(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}])
    sid, o1, o2 = s["id"], s["origins"][0]["id"], s["origins"][1]["id"]
    other = make_site(c, "other", [{"address": "10.0.1.1"}])
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    tok = n["token"]
    rng = random.Random(7)
    for round_ in range(5):
        obs = [{"site_id": rng.randrange(1, 10**9), "origin_id": rng.randrange(1, 10**9),
                "requests": 5, "failures": 1, "skipped": False} for _ in range(5000)]
        # real origins under the wrong site count as junk too
        obs.append({"site_id": other["id"], "origin_id": o1, "requests": 1, "failures": 0,
                    "skipped": False})
        obs.append({"site_id": sid, "origin_id": o1, "requests": 10 + round_, "failures": 2,
                    "skipped": False})
        st, body, _ = c.api("POST", "/v1/node/heartbeat",
                            {"version": "t", "config_version": 0, "observations": obs}, token=tok)
        assert st == 204, body
    rows = harness.db_query(c, "SELECT site_id, origin_id, requests FROM node_observations")
    assert rows == [(sid, o1, 14)], rows
    # the status card shows the real one
    st, card, _ = c.api("GET", "/v1/sites/%d/status" % sid)
    o = card["levels"][0]["origins"][0]
    assert o["node_observations"]["requests"] == 14, o
    # deleting the origin forgets its observations
    st, _, _ = c.api("DELETE", "/v1/sites/%d/origins/%d" % (sid, o1))
    assert st == 204
    assert harness.db_query(c, "SELECT COUNT(*) FROM node_observations") == [(0,)]


# ---- a full disk: 507 storage_full, /healthz degraded, nothing half-written ----

def _mount_tmpfs(path, size):
    """Mount a small tmpfs at path; True when it worked (needs root and mount rights)."""
    if os.geteuid() != 0:
        return False
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def test_full_disk_answers_507_and_recovers(tmp):
    """The database on a 4 MiB tmpfs, the rest of it filled: writes answer 507 storage_full,
    /healthz says degraded, every site listed was acknowledged (nothing half-written), and
    once space is freed writes succeed and /healthz is ok again. Without mount rights the
    database is capped with PRAGMA max_page_count instead (SQLite's own SQLITE_FULL)."""
    fs = os.path.join(tmp, "fs")
    mounted = _mount_tmpfs(fs, "4m")
    filler = os.path.join(fs, "filler")
    args = []
    if mounted:
        db = os.path.join(fs, "controld.db")
    else:
        os.makedirs(fs, exist_ok=True)
        db = os.path.join(fs, "controld.db")
        args = ["--test-max-pages", "120"]
    print("disk full via %s" % ("a 4 MiB tmpfs" if mounted else "max_page_count"))
    c = Controld(tmp, db=db, extra_args=args)
    try:
        c.start()
        acked = set()
        st, j, _ = c.api("POST", "/v1/sites", {"name": "first", "hostnames": ["first.example.com"]})
        assert st == 201, j
        acked.add(j["id"])
        if mounted:
            with open(filler, "wb") as f:  # fill the rest of the file system
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
        full = None
        for i in range(400):
            body = {"name": "s%d" % i,
                    "hostnames": ["h%d-%d.example.com" % (i, k) for k in range(30)],
                    "origins": [{"address": "o%d-%d.example.net" % (i, k)} for k in range(30)]}
            st, j, _ = c.api("POST", "/v1/sites", body)
            if st == 201:
                acked.add(j["id"])
                continue
            assert st == 507, (st, j)  # never a generic 500
            assert j["error"]["code"] == "storage_full", j
            full = j
            break
        assert full is not None, "the disk never filled"
        st, h, _ = c.api("GET", "/healthz", token=None)
        assert st == 200 and h["status"] == "degraded" and h["storage"] == "full", h
        # reads still work and show exactly the acknowledged sites, whole
        st, lst, _ = c.api("GET", "/v1/sites?limit=1000")
        assert st == 200 and {s["id"] for s in lst["sites"]} == acked, lst
        for s in lst["sites"]:
            assert s["name"] == "first" or len(s["origins"]) == 30, s
        # other writes are refused the same way
        st, j, _ = c.api("PATCH", "/v1/sites/%d" % min(acked),
                         {"hostnames": ["x%d.example.com" % k for k in range(30)]})
        assert st in (200, 507), (st, j)
        # free space: writes work again and /healthz recovers
        if mounted:
            os.unlink(filler)
        else:
            c.stop()
            c.extra_args = [a for a in c.extra_args if a not in args]
            c.start()
        st, j, _ = c.api("POST", "/v1/sites", {"name": "after", "hostnames": ["after.example.com"]})
        assert st == 201, j
        st, h, _ = c.api("GET", "/healthz", token=None)
        assert h["status"] == "ok", h
        c.stop()
    finally:
        c.kill9()
        if mounted:
            subprocess.run(["umount", "-l", fs], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def _fill(path):
    """Write zeros to path until its file system takes no more (64 KiB, then 4 KiB writes)."""
    with open(path, "wb", buffering=0) as f:
        for block in (65536, 4096, 512):
            try:
                while True:
                    f.write(b"\0" * block)
            except OSError:
                pass


def test_start_on_a_full_disk_says_why(tmp):
    """A database on a full tmpfs at start: controld exits non-zero with a line naming the file
    and saying its directory's file system is full and how many bytes are free (SQLite alone
    says only "disk I/O error"); with space freed it starts with the data it had. Needs root
    and mount rights (tests/run.sh runs as root; without them the case fails, never passes
    unchecked)."""
    fs = os.path.join(tmp, "fs")
    assert _mount_tmpfs(fs, "2m"), "needs root and mount rights for a tmpfs"
    db = os.path.join(fs, "controld.db")
    c = Controld(tmp, db=db)
    try:
        c.start()
        make_site(c, "kept")
        c.stop()
        filler = os.path.join(fs, "filler")
        _fill(filler)
        c._spawn([c.binary, "--listen", "127.0.0.1:%d" % c.port, "--db", c.db],
                 {"CDNCA_ADMIN_TOKEN": c.admin_token})
        rc = c.proc.wait(30)
        assert rc != 0, rc
        log = open(c.log_path, encoding="utf-8", errors="replace").read()
        line = [ln for ln in log.splitlines() if "cannot open database %s" % db in ln]
        assert line, log[-2000:]
        assert "the filesystem of %s is full (" % fs in line[-1], line[-1]
        assert " bytes free" in line[-1], line[-1]
        os.unlink(filler)
        c.start()
        st, lst, _ = c.api("GET", "/v1/sites")
        assert st == 200 and [s["name"] for s in lst["sites"]] == ["kept"], lst
        c.stop()
    finally:
        c.kill9()
        subprocess.run(["umount", "-l", fs], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_database_file_moved_away_refuses_writes(tmp):
    """The database file renamed (or deleted) under a running controld: the open handle would
    take writes into a file no later start opens (its WAL stays at the old name). Writes answer
    503 db_unavailable and store nothing, /healthz says down and the log names the file; once
    the file is back, writes work again and every acknowledged one survives a restart."""
    c = Controld(tmp, db=os.path.join(tmp, "controld.db")).start()
    st, j, _ = c.api("POST", "/v1/sites", {"name": "before", "hostnames": ["before.example.com"]})
    assert st == 201, j
    moved = os.path.join(tmp, "moved.db")
    os.rename(c.db, moved)
    st, j, _ = c.api("POST", "/v1/sites", {"name": "away", "hostnames": ["away.example.com"]})
    assert st == 503 and j["error"]["code"] == "db_unavailable", (st, j)
    st, h, _ = c.api("GET", "/healthz", token=None)
    assert st == 503 and h["db"] == "down", h
    log = open(c.log_path, errors="replace").read()
    assert "was moved or deleted while open" in log and c.db in log, log[-2000:]
    os.rename(moved, c.db)
    st, j, _ = c.api("POST", "/v1/sites", {"name": "back", "hostnames": ["back.example.com"]})
    assert st == 201, j
    st, h, _ = c.api("GET", "/healthz", token=None)
    assert st == 200 and h["status"] == "ok", h
    c.restart(kill=True)
    st, lst, _ = c.api("GET", "/v1/sites")
    assert st == 200 and sorted(s["name"] for s in lst["sites"]) == ["back", "before"], lst


# ---- the database file at start ----

def test_empty_database_file_is_warned_about(tmp):
    db = os.path.join(tmp, "controld.db")
    open(db, "wb").close()
    c = Controld(tmp, db=db).start()
    c.stop()
    log = open(c.log_path, encoding="utf-8", errors="replace").read()
    assert "is an empty file" in log, log[-2000:]


def test_missing_database_with_its_wal_left_is_refused(tmp):
    """The database file moved away under a running controld that is then killed: its last
    writes are in the controld.db-wal left at the old name, and a start used to create an empty
    database over it. Now the start (and --check-config) is refused with a line naming the
    database and the -wal and what to do; nothing is created. With the file put back, the
    writes are all there; with the -wal and -shm removed instead, a start begins empty."""
    c = Controld(tmp, db=os.path.join(tmp, "controld.db")).start()
    make_site(c, "kept")
    moved = os.path.join(tmp, "moved.db")
    os.rename(c.db, moved)
    c.kill9()
    wal = c.db + "-wal"
    size = os.path.getsize(wal)
    assert size > 0, size
    c._spawn([c.binary, "--listen", "127.0.0.1:%d" % c.port, "--db", c.db],
             {"CDNCA_ADMIN_TOKEN": c.admin_token})
    try:
        rc = c.proc.wait(30)
    except subprocess.TimeoutExpired:
        raise AssertionError("controld started (on an empty database) instead of refusing")
    assert rc != 0, rc
    log = open(c.log_path, encoding="utf-8", errors="replace").read()
    assert "database %s is missing but %s" % (c.db, c.db) in log, log[-2000:]
    assert "Put the database file back" in log and "remove %s-wal and %s-shm" % (c.db, c.db) \
        in log, log[-2000:]
    assert not os.path.exists(c.db) and os.path.getsize(wal) == size
    r = subprocess.run([c.binary, "--check-config", "--db", c.db], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "database %s is missing but" % c.db in r.stderr, r
    assert not os.path.exists(c.db)
    # put back: every acknowledged write is there
    os.rename(moved, c.db)
    c.start()
    st, lst, _ = c.api("GET", "/v1/sites")
    assert st == 200 and [s["name"] for s in lst["sites"]] == ["kept"], lst
    # deleted instead, and the -wal and -shm given up: an empty database
    os.unlink(c.db)
    c.kill9()
    assert os.path.getsize(wal) > 0
    for side in ("-wal", "-shm"):
        if os.path.exists(c.db + side):
            os.unlink(c.db + side)
    c.start()
    st, lst, _ = c.api("GET", "/v1/sites")
    assert st == 200 and lst["sites"] == [], lst
    c.stop()


def test_damaged_database_is_refused_at_start(tmp):
    c = Controld(tmp).start()
    for i in range(40):
        make_site(c, "s%d" % i, [{"address": "10.0.0.%d" % (i + 1)}])
    c.stop()
    size = os.path.getsize(c.db)
    assert size > 3 * 4096, size
    with open(c.db, "r+b") as f:  # scribble over a b-tree page in the middle
        f.seek((size // 4096 // 2) * 4096)
        f.write(bytes(random.Random(5).randrange(256) for _ in range(4096)))
    c._spawn([c.binary, "--listen", "127.0.0.1:%d" % c.port, "--db", c.db],
             {"CDNCA_ADMIN_TOKEN": c.admin_token})
    rc = c.proc.wait(30)
    assert rc != 0, rc
    log = open(c.log_path, encoding="utf-8", errors="replace").read()
    assert "integrity check" in log or "malformed" in log, log[-2000:]


# ---- internal targets ----

def test_internal_targets_are_refused(tmp):
    c = Controld(tmp).start()
    for addr in ["169.254.169.254", "::ffff:169.254.169.254", "0.0.0.0", "::", "fe80::1",
                 "100.100.100.200", "2852039166"]:
        st, e, _ = c.api("POST", "/v1/sites", {"name": "m", "hostnames": ["m.example.com"],
                                               "origins": [{"address": "10.0.0.1"},
                                                           {"address": addr}]})
        if st == 422 and e["error"]["code"] == "invalid_value":
            continue  # not an address or hostname at all: refused anyway
        assert st == 422 and e["error"]["code"] == "target_refused", (addr, st, e)
        assert e["error"]["field"] == "origins[1].address", e
    s = make_site(c, "shop", [{"address": "10.0.0.1"}, {"address": "127.0.0.1", "level": 2}])
    st, e, _ = c.api("POST", "/v1/sites/%d/origins" % s["id"], {"address": "169.254.169.254"})
    assert st == 422 and e["error"]["field"] == "address", e
    opath = "/v1/sites/%d/origins/%d" % (s["id"], s["origins"][0]["id"])
    st, e, _ = c.api("PATCH", opath, {"address": "169.254.1.1"})
    assert st == 422 and e["error"]["code"] == "target_refused", e
    for url in ["http://169.254.169.254/latest/meta-data", "http://[::ffff:a9fe:a9fe]/",
                "http://0.0.0.0:8080/", "http://2852039166/"]:
        st, e, _ = c.api("POST", "/v1/webhooks", {"url": url, "secret": "0123456789abcdef"})
        assert st == 422 and e["error"]["field"] == "url", (url, st, e)
    # nothing of that was stored
    _, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert [o["address"] for o in j["origins"]] == ["10.0.0.1", "127.0.0.1"], j
    _, w, _ = c.api("GET", "/v1/webhooks")
    assert w["webhooks"] == []


def test_deny_targets_flag(tmp):
    """--deny-targets adds CIDRs; a name is checked when it resolves (webhook to localhost with
    127.0.0.0/8 denied: no connection is made)."""
    from receiver import Receiver
    rx = Receiver().start()
    try:
        c = Controld(tmp, extra_args=["--deny-targets", "10.0.0.0/8,127.0.0.0/8",
                                      "--webhook-retry-ms", "100"]).start()
        st, e, _ = c.api("POST", "/v1/sites", {"name": "a", "hostnames": ["a.example.com"],
                                               "origins": [{"address": "10.9.9.9"}]})
        assert st == 422 and e["error"]["code"] == "target_refused", e
        st, j, _ = c.api("POST", "/v1/sites", {"name": "a", "hostnames": ["a.example.com"],
                                               "origins": [{"address": "192.168.0.10"}]})
        assert st == 201, j
        url = rx.url.replace("127.0.0.1", "localhost")
        st, hook, _ = c.api("POST", "/v1/webhooks", {"url": url + "/h",
                                                     "secret": "0123456789abcdef"})
        assert st == 201, hook
        st, d, _ = c.api("POST", "/v1/webhooks/%d/test" % hook["id"])
        assert st == 202, d

        def attempted():
            _, dl, _ = c.api("GET", "/v1/webhooks/%d/deliveries" % hook["id"])
            x = dl["deliveries"][0]
            return x if x["attempts"] >= 1 else None
        x = harness.wait_until(attempted, timeout=15, what="a delivery attempt")
        assert x["state"] != "delivered" and x["last_status"] is None, x
        time.sleep(0.5)
        assert rx.snapshot() == [], rx.snapshot()
        # a bad list is refused at start
        bad = Controld(tmp, name="bad", extra_args=["--deny-targets", "10.0.0.0/40"])
        bad._spawn([bad.binary, "--listen", "127.0.0.1:%d" % bad.port, "--db", bad.db,
                    "--deny-targets", "10.0.0.0/40"], {"CDNCA_ADMIN_TOKEN": bad.admin_token})
        assert bad.proc.wait(10) == 2
        assert "deny-targets" in open(bad.log_path).read()
    finally:
        rx.stop()


# ---- a body over 1 MiB ----

def test_oversized_body_is_answered_413_every_time(tmp):
    """2 MiB bodies: the client sends everything, then reads a 413 (no broken pipe), five times
    in a row, on fresh connections and on one kept-alive connection; a client waiting for
    100 Continue gets the 413 without sending the body."""
    import socket
    c = Controld(tmp).start()
    big = b'{"name":"' + b"a" * (2 * 1024 * 1024) + b'"}'
    for i in range(5):
        st, payload, _ = raw_call(c, "POST", "/v1/sites", big)
        assert st == 413, (i, st, payload[:200])
        assert strict_json(payload)["error"]["code"] == "payload_too_large"
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    try:
        for i in range(5):
            conn.request("POST", "/v1/sites", body=big,
                         headers={"Authorization": "Bearer " + c.admin_token,
                                  "Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 413, (i, resp.status, body[:200])
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    finally:
        conn.close()
    s = socket.create_connection((harness.HOST, c.port), timeout=10)
    try:
        s.sendall(("POST /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n"
                   "Expect: 100-continue\r\n\r\n" % (c.admin_token, len(big))).encode())
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 413"), head[:100]
    finally:
        s.close()
    # and the server is fine afterwards
    st, j, _ = c.api("POST", "/v1/sites", {"name": "ok", "hostnames": ["ok.example.com"]})
    assert st == 201, j


def test_nul_in_a_path_matches_nothing(tmp):
    c = Controld(tmp).start()
    s = make_site(c, "shop", [{"address": "10.0.0.1"}])
    for method, path in [("DELETE", "/v1/sites/%d%%00" % s["id"]),
                         ("DELETE", "/v1/sites/%d%%00/origins/1" % s["id"]),
                         ("GET", "/v1/sites/%d%%00" % s["id"]),
                         ("GET", "/v1/sites?after=0%00")]:
        st, j, _ = c.api(method, path)
        assert st in (400, 404), (method, path, st, j)
    st, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert st == 200 and len(j["origins"]) == 1, j
    st, j, _ = c.api("GET", "/v1/sites/%%%02x" % (0x30 + s["id"]))  # other escapes still decode
    assert st == 200 and j["id"] == s["id"], j


if __name__ == "__main__":
    harness.main()
