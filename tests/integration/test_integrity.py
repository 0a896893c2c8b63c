#!/usr/bin/env python3
"""test_integrity — write integrity of the API (DESIGN §4 "Safe concurrent edits", issue 13).

One transaction per operation: concurrent PATCHes of different fields both survive, concurrent
origin adds never pass the 64-origin cap, and a change can never be separated from the level
re-evaluation it causes (kill -9 at random moments; a database left stranded by an older
controld is repaired at start).
"""

import http.client
import json
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


if __name__ == "__main__":
    harness.main()
