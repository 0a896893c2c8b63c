#!/usr/bin/env python3
"""test_api — controld's REST API (docs/design.md#command-lines, docs/design.md#rest-api) against a real controld on loopback.

Every status code of docs/design.md#errors-and-limits is provoked, and after every rejected request the stored state (the
full site list and the node list) is compared with what it was before: bad input never
changes stored data.
"""

import json
import os
import re
import subprocess
import threading
import time

import harness
from harness import Controld

ORIGIN_KEYS = {"id", "level", "address", "port", "scheme", "host_header", "weight", "enabled",
               "description", "health"}
NODE_HEARTBEAT = "/v1/node/heartbeat"


# ---- helpers ----

def site_body(name, hosts=None, origins=None, **extra):
    b = {"name": name, "hostnames": hosts if hosts is not None else [name + ".example.com"]}
    if origins is not None:
        b["origins"] = origins
    b.update(extra)
    return b


def two_origins():
    return [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "scheme": "http", "level": 2}]


def create(c, body):
    status, j, _ = c.api("POST", "/v1/sites", body)
    assert status == 201, (status, j)
    return j


def snapshot(c):
    """Everything the API shows as stored: all sites and all nodes."""
    s1, sites, _ = c.api("GET", "/v1/sites?limit=1000")
    s2, nodes, _ = c.api("GET", "/v1/nodes")
    assert s1 == 200 and s2 == 200, (s1, sites, s2, nodes)
    assert sites["next"] is None
    return {"sites": sites["sites"], "nodes": nodes["nodes"]}


def assert_error(status, j, want_status, code=None, field=None):
    assert status == want_status, "status %s (want %s): %r" % (status, want_status, j)
    assert isinstance(j, dict) and isinstance(j.get("error"), dict), j
    e = j["error"]
    assert set(e) == {"code", "message", "field"}, e
    assert isinstance(e["code"], str) and e["code"], e
    assert isinstance(e["message"], str) and e["message"], e
    if code is not None:
        assert e["code"] == code, e
    if field is not None:
        assert e["field"] == field, "field %r (want %r): %r" % (e["field"], field, e)
    return e


def rejected(c, method, path, body=None, want=422, field=None, code=None, **kw):
    """Send a request that must fail with want (and field), and check nothing stored changed."""
    before = snapshot(c)
    status, j, _ = c.api(method, path, body, **kw)
    e = assert_error(status, j, want, code=code, field=field)
    after = snapshot(c)
    assert after == before, "%s %s (%s) changed stored data:\nbefore %s\nafter  %s" % (
        method, path, status, json.dumps(before), json.dumps(after))
    return e


def run_bin(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([os.path.join(harness.BUILD, "controld", "controld")] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, env=e,
                          text=True)


def node_route_exists(c):
    """True once the node protocol routes are served (an admin token then gets 403, not 404)."""
    status, _, _ = c.api("POST", NODE_HEARTBEAT, {})
    return status == 403


# ---- command line ----

def test_cli_version_help(tmp):
    r = run_bin("--version")
    assert r.returncode == 0 and re.match(r"controld \d+\.\d+\.\d+", r.stdout), r
    r = run_bin("--help")
    assert r.returncode == 0, r
    for opt in ("--listen", "--db", "--config", "--probe-interval-ms", "--probe-batch"):
        assert opt in r.stdout, (opt, r.stdout)


def test_cli_bad_options(tmp):
    r = run_bin("--bogus-flag", "1")
    assert r.returncode == 2 and "bogus-flag" in r.stderr, r
    r = run_bin("--probe-batch", "many")
    assert r.returncode == 2 and "probe-batch" in r.stderr, r
    r = run_bin("--probe-interval-ms", "5")  # below the minimum
    assert r.returncode == 2 and "probe-interval-ms" in r.stderr, r
    r = run_bin("--log-format", "xml")
    assert r.returncode == 2 and "log-format" in r.stderr, r
    cfg = os.path.join(tmp, "c.json")
    with open(cfg, "w") as f:
        json.dump({"probe_batch": 10, "no_such_key": 1}, f)
    r = run_bin("--config", cfg)
    assert r.returncode == 2 and "no_such_key" in r.stderr, r
    with open(cfg, "w") as f:
        json.dump({"probe_batch": "ten"}, f)
    r = run_bin("--config", cfg)
    assert r.returncode == 2 and "probe_batch" in r.stderr.replace("-", "_"), r
    with open(cfg, "w") as f:
        f.write("{not json")
    r = run_bin("--config", cfg)
    assert r.returncode == 2 and cfg in r.stderr, r
    r = run_bin("--config", os.path.join(tmp, "missing.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr, r
    r = run_bin("--db", os.path.join(tmp, "x.db"), env={"CDNCA_ADMIN_TOKEN": "short"})
    assert r.returncode == 2 and "CDNCA_ADMIN_TOKEN" in r.stderr, r


def test_cli_weak_admin_token_refused(tmp):
    """docs/operations.md#admin-token-strength: the example env file's placeholder, a short
    token and a token of one repeated character are refused at start and by --check-config,
    with the command that makes a good one; nothing is created. A strong token passes."""
    example = os.path.join(harness.HERE, "..", "..", "deploy", "controld.env.example")
    with open(example) as f:
        placeholder = [ln.split("=", 1)[1].strip() for ln in f
                       if ln.startswith("CDNCA_ADMIN_TOKEN=")][0]
    db = os.path.join(tmp, "x.db")
    for weak in (placeholder, "3f9c2a7be41d08f65c9e2b7a1d4f80c", "z" * 64):
        for args in (("--db", db), ("--check-config", "--db", db)):
            r = run_bin(*args, env={"CDNCA_ADMIN_TOKEN": weak})
            assert r.returncode == 2, (weak, args, r)
            assert "CDNCA_ADMIN_TOKEN is refused" in r.stderr, (weak, args, r)
            assert "openssl rand -hex 32" in r.stderr, (weak, args, r)
            assert weak not in r.stderr + r.stdout, "the token was printed"
            assert not os.path.exists(db), "a database was created"
    strong = "3f9c2a7be41d08f65c9e2b7a1d4f80c36e5b9a2d7c1f04e8b3a6d9c2f5e8b1a4"
    r = run_bin("--check-config", "--db", db, env={"CDNCA_ADMIN_TOKEN": strong})
    assert r.returncode == 0 and "configuration OK" in r.stdout, r


def test_config_file_applies(tmp):
    cfg = os.path.join(tmp, "c.json")
    with open(cfg, "w") as f:
        json.dump({"log_format": "json", "probe_batch": 10, "listen": "127.0.0.1:1"}, f)
    c = Controld(tmp, extra_args=["--config", cfg])
    c.start()  # the harness's --listen flag overrides the file's listen
    assert c.api("GET", "/healthz", token=None)[0] == 200
    c.stop()
    lines = [ln for ln in open(c.log_path).read().splitlines() if not ln.startswith("----")]
    assert lines, "no log lines"
    for ln in lines:
        json.loads(ln)  # log_format from the file: every line is JSON


# ---- open routes and auth ----

def test_healthz_and_metrics_open(tmp):
    c = Controld(tmp).start()
    status, j, _ = c.api("GET", "/healthz", token=None)
    migrations = [int(f[:4]) for f in os.listdir(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "schema", "sqlite")) if f.endswith(".sql")]
    # the version is the last migration's number (numbers may leave gaps)
    assert status == 200 and j["status"] == "ok" and j["schema_version"] == max(migrations), j
    c.api("GET", "/v1/sites")
    status, text, h = c.api("GET", "/metrics", token=None)
    assert status == 200 and h.get("Content-Type", "").startswith("text/plain"), (status, h)
    assert "cdnca_http_requests_total" in text, text
    assert re.search(r'cdnca_http_requests_total\{[^}]*code="200"[^}]*\} \d+', text), text


def test_auth_401_403(tmp):
    c = Controld(tmp).start()
    create(c, site_body("a"))
    for path in ("/v1/sites", "/v1/sites/1", "/v1/nodes"):
        rejected(c, "GET", path, want=401, token=None, code="unauthorized")
        rejected(c, "GET", path, want=401, token="wrong-token-0123456789", code="unauthorized")
        rejected(c, "GET", path, want=401, token=None,
                 headers={"Authorization": "Basic " + c.admin_token})
    rejected(c, "POST", "/v1/sites", site_body("b"), want=401, token=None)
    rejected(c, "POST", "/v1/sites", site_body("b"), want=401, token="x" * 300)
    rejected(c, "DELETE", "/v1/sites/1", want=401, token="nope-nope-nope-nope")
    # a node token is authenticated but of the wrong kind for admin routes
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201, n
    for method, path, body in (("GET", "/v1/sites", None), ("POST", "/v1/sites", site_body("c")),
                               ("DELETE", "/v1/sites/1", None), ("GET", "/v1/nodes", None),
                               ("POST", "/v1/nodes", {"name": "edge-2"})):
        rejected(c, method, path, body, want=403, token=n["token"], code="forbidden")
    # the admin token from the environment works
    assert c.api("GET", "/v1/sites")[0] == 200
    # an admin token is the wrong kind on node routes (once they exist)
    status, j, _ = c.api("POST", NODE_HEARTBEAT, {})
    assert status in (403, 404), (status, j)


# ---- sites: create, read, list, patch, delete ----

def test_create_with_defaults(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("shop", ["Shop.Example.com", "www.shop.example.com"],
                            two_origins()))
    assert isinstance(s["id"], int) and s["id"] > 0
    assert s["name"] == "shop"
    assert s["hostnames"] == ["shop.example.com", "www.shop.example.com"]
    assert s["failback"] == "auto" and s["failback_hold_ms"] == 0
    assert s["health_check"] == {"enabled": True, "state": "active", "path": "/",
                                 "timeout_ms": 5000, "unhealthy_after": 3, "healthy_after": 2,
                                 "checkpoints": False, "type": "http", "method": "GET",
                                 "headers": {}, "expected_codes": None, "expected_body": None,
                                 "port": None, "interval_ms": None, "level_min_healthy": 1}, \
        s["health_check"]
    assert s["node_retry"] == {"retries": 2, "retry_budget_ms": 15000, "fail_count": 3,
                               "fail_window_ms": 10000, "skip_ms": 30000,
                               "half_open_requests": 1, "retry_on_status": [502, 503, 504],
                               "backup_levels": True, "failure_ratio": None,
                               "failure_min_volume": 20}, \
        s["node_retry"]
    assert s["current_level"] == 1 and s["config_version"] == 1
    o1, o2 = s["origins"]
    assert set(o1) == ORIGIN_KEYS, o1
    assert (o1["level"], o1["address"], o1["port"], o1["scheme"]) == (1, "10.0.0.1", 443, "https")
    assert (o2["level"], o2["address"], o2["port"], o2["scheme"]) == (2, "10.0.0.2", 80, "http")
    for o in (o1, o2):
        assert o["weight"] == 1 and o["enabled"] is True and o["health"] == "unknown"
        assert o["host_header"] is None and o["id"] > 0
    assert o1["id"] != o2["id"]
    # GET shows exactly what POST answered
    status, g, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert status == 200 and g == s, (g, s)


def test_create_minimal_and_explicit(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("min"))
    assert s["origins"] == [] and s["health_check"]["enabled"] is False
    assert s["health_check"]["state"] == "disabled"
    # one origin: health checks default to off
    s = create(c, site_body("one", origins=[{"address": "origin.example.net", "port": 8443}]))
    assert s["health_check"]["enabled"] is False and s["origins"][0]["port"] == 8443
    # everything given explicitly is kept
    body = site_body("full", ["full.example.com"], [
        {"level": 3, "address": "2001:db8::1", "port": 8080, "scheme": "http",
         "host_header": "Origin.Full.Example.com", "weight": 5, "enabled": True},
        {"level": 1, "address": "10.1.1.1", "enabled": True},
        {"level": 1, "address": "10.1.1.2", "enabled": False}],
        failback="manual", failback_hold_ms=60000,
        health_check={"enabled": True, "path": "/healthz", "timeout_ms": 2000,
                      "unhealthy_after": 5, "healthy_after": 4, "checkpoints": True,
                      "type": "http", "method": "HEAD", "headers": {"X-Probe": "1"},
                      "expected_codes": ["200-299", "301"], "expected_body": None,
                      "port": 8081, "interval_ms": 2000, "level_min_healthy": 2},
        node_retry={"retries": 1, "retry_budget_ms": 5000, "fail_count": 7,
                    "fail_window_ms": 2000, "skip_ms": 1000, "half_open_requests": 2,
                    "retry_on_status": [500, 503], "backup_levels": False,
                    "failure_ratio": 0.25, "failure_min_volume": 50})
    s = create(c, body)
    assert s["failback"] == "manual" and s["failback_hold_ms"] == 60000
    assert s["failback_ramp"] is None
    # the failback ramp: set, shown with its defaults, stored, and cleared with null
    ramp = {"steps": [1, 10, 50, 100], "step_ms": 60000}
    s2 = create(c, site_body("ramped", failback_ramp=ramp))
    want = dict(ramp, max_failure_ratio=0.05, min_requests=50)
    assert s2["failback_ramp"] == want, s2["failback_ramp"]
    status, g, _ = c.api("GET", "/v1/sites/%d" % s2["id"])
    assert status == 200 and g["failback_ramp"] == want, g
    status, g, _ = c.api("PATCH", "/v1/sites/%d" % s2["id"], {"failback_ramp": None})
    assert status == 200 and g["failback_ramp"] is None, g
    hc = dict(body["health_check"], state="active")
    assert s["health_check"] == hc, s["health_check"]
    assert s["node_retry"] == body["node_retry"], s["node_retry"]
    levels = [(o["level"], o["address"], o["enabled"]) for o in s["origins"]]
    assert levels == [(1, "10.1.1.1", True), (1, "10.1.1.2", False), (3, "2001:db8::1", True)], \
        levels  # ordered by level, then id
    o3 = s["origins"][2]
    assert o3["host_header"] == "origin.full.example.com" and o3["weight"] == 5
    assert o3["port"] == 8080 and o3["scheme"] == "http"
    # content type with parameters is fine
    status, j, _ = c.api("POST", "/v1/sites", site_body("cs"),
                         headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 201, j


def test_get_patch_delete(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("p", origins=two_origins()))
    path = "/v1/sites/%d" % s["id"]
    status, j, _ = c.api("PATCH", path, {"failback": "manual", "health_check": {"path": "/hc"},
                                         "hostnames": ["P.example.org"]})
    assert status == 200, j
    assert j["failback"] == "manual" and j["hostnames"] == ["p.example.org"]
    assert j["health_check"]["path"] == "/hc" and j["health_check"]["timeout_ms"] == 5000
    assert j["health_check"]["enabled"] is True
    assert j["config_version"] == s["config_version"] + 1
    assert j["origins"] == s["origins"] and j["name"] == "p"
    status, g, _ = c.api("GET", path)
    assert status == 200 and g == j
    status, j2, _ = c.api("PATCH", path, {"name": "p2", "node_retry": {"retries": 0}})
    assert status == 200 and j2["name"] == "p2" and j2["node_retry"]["retries"] == 0, j2
    assert j2["node_retry"]["skip_ms"] == 30000
    # the new fields: stored, and null turns the ratio off again
    status, j2, _ = c.api("PATCH", path, {"node_retry": {"backup_levels": False,
                                                          "failure_ratio": 0.5,
                                                          "failure_min_volume": 10}})
    assert status == 200 and j2["node_retry"]["backup_levels"] is False, j2
    assert j2["node_retry"]["failure_ratio"] == 0.5 and j2["node_retry"]["failure_min_volume"] == 10
    assert j2["node_retry"]["retries"] == 0
    status, j2, _ = c.api("PATCH", path, {"node_retry": {"failure_ratio": None}})
    assert status == 200 and j2["node_retry"]["failure_ratio"] is None, j2
    assert j2["node_retry"]["backup_levels"] is False
    assert j2["config_version"] == j["config_version"] + 3
    # the old hostname is free again
    create(c, site_body("other", ["p.example.com"]))
    status, j3, _ = c.api("PATCH", path, {"health_check": {"enabled": False}})
    assert status == 200 and j3["health_check"]["state"] == "disabled", j3
    status, body, _ = c.api("DELETE", path)
    assert status == 204 and body == "", (status, body)
    rejected(c, "GET", path, want=404, code="not_found")
    rejected(c, "DELETE", path, want=404)
    rejected(c, "PATCH", path, {"failback": "auto"}, want=404)
    # its hostname and name are free again
    create(c, site_body("p2", ["p.example.org"]))


def test_pagination(tmp):
    c = Controld(tmp).start()
    ids = [create(c, site_body("s%d" % i))["id"] for i in range(7)]
    seen, after, pages = [], None, 0
    while True:
        q = "/v1/sites?limit=3" + ("&after=%d" % after if after is not None else "")
        status, j, _ = c.api("GET", q)
        assert status == 200, j
        page = [s["id"] for s in j["sites"]]
        pages += 1
        assert len(page) == (3 if pages < 3 else 1), (pages, page)
        seen += page
        if j["next"] is None:
            break
        assert j["next"] == page[-1], j
        after = j["next"]
        assert pages < 10
    assert pages == 3 and seen == sorted(ids) and seen == ids
    status, j, _ = c.api("GET", "/v1/sites?limit=7")
    assert [s["id"] for s in j["sites"]] == ids and j["next"] is None
    status, j, _ = c.api("GET", "/v1/sites")
    assert len(j["sites"]) == 7 and j["next"] is None
    status, j, _ = c.api("GET", "/v1/sites?after=%d" % ids[-1])
    assert status == 200 and j == {"sites": [], "next": None}, j
    status, j, _ = c.api("GET", "/v1/sites?limit=2&after=%d" % ids[3])
    assert [s["id"] for s in j["sites"]] == ids[4:6] and j["next"] == ids[5]
    for q, field in (("limit=0", "limit"), ("limit=abc", "limit"), ("limit=1001", "limit"),
                     ("after=-1", "after"), ("after=1x", "after")):
        rejected(c, "GET", "/v1/sites?" + q, want=400, field=field)


# ---- 400 ----

def test_400_malformed_and_unknown(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("a", origins=two_origins()))
    sp = "/v1/sites/%d" % s["id"]
    op = sp + "/origins/%d" % s["origins"][0]["id"]
    for raw in (b"{", b"", b"nope", b'{"name": "x",}', b'{"name":"x"} trailing', b"\xff\xfe"):
        rejected(c, "POST", "/v1/sites", raw=raw, want=400, code="malformed_json")
        rejected(c, "PATCH", sp, raw=raw, want=400, code="malformed_json")
        rejected(c, "POST", sp + "/origins", raw=raw, want=400)
        rejected(c, "PATCH", op, raw=raw, want=400)
        rejected(c, "POST", "/v1/nodes", raw=raw, want=400)
    for raw in (b"[1, 2]", b'"str"', b"42", b"null"):
        rejected(c, "POST", "/v1/sites", raw=raw, want=400, code="malformed_json")
        rejected(c, "PATCH", sp, raw=raw, want=400)
    cases = [
        (site_body("b", foo=1), "foo"),
        (site_body("b", origins=[{"address": "10.0.0.1", "foo": 1}]), "origins[0].foo"),
        (site_body("b", origins=[{"address": "10.0.0.1"}, {"address": "10.0.0.2", "prt": 80}]),
         "origins[1].prt"),
        (site_body("b", health_check={"enabled": False, "interval": 5}), "health_check.interval"),
        (site_body("b", node_retry={"retries": 1, "bar": 2}), "node_retry.bar"),
        (site_body("b", id=7), "id"),
    ]
    for body, field in cases:
        rejected(c, "POST", "/v1/sites", body, want=400, field=field, code="unknown_field")
    rejected(c, "PATCH", sp, {"foo": 1}, want=400, field="foo")
    rejected(c, "PATCH", sp, {"health_check": {"paht": "/"}}, want=400, field="health_check.paht")
    rejected(c, "PATCH", sp, {"origins": []}, want=400, field="origins")
    rejected(c, "PATCH", sp, {"origins": [{"address": "10.9.9.9"}], "failback": "manual"},
             want=400, field="origins")
    rejected(c, "POST", sp + "/origins", {"address": "10.0.0.3", "colour": "red"}, want=400,
             field="colour")
    rejected(c, "PATCH", op, {"port": 444, "health": "healthy"}, want=400, field="health")
    rejected(c, "POST", "/v1/nodes", {"name": "n", "extra": 1}, want=400, field="extra")


# ---- 404, 405 ----

def test_404_405(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("a", origins=two_origins()))
    t = create(c, site_body("b", origins=[{"address": "10.0.0.9"}]))
    oid_a = s["origins"][0]["id"]
    for method, path, body in (("GET", "/v1/sites/999", None),
                               ("PATCH", "/v1/sites/999", {"failback": "manual"}),
                               ("DELETE", "/v1/sites/999", None),
                               ("POST", "/v1/sites/999/origins", {"address": "10.0.0.1"}),
                               ("PATCH", "/v1/sites/%d/origins/999" % s["id"], {"port": 1}),
                               ("DELETE", "/v1/sites/%d/origins/999" % s["id"], None),
                               # an origin of another site
                               ("PATCH", "/v1/sites/%d/origins/%d" % (t["id"], oid_a), {"port": 1}),
                               ("DELETE", "/v1/sites/%d/origins/%d" % (t["id"], oid_a), None),
                               ("DELETE", "/v1/nodes/999", None),
                               ("GET", "/v1/nope", None), ("GET", "/v1/sites/abc", None),
                               ("GET", "/v1/sites/0", None), ("GET", "/nothing/here", None),
                               ("GET", "/v1/sites/1/bogus", None)):
        rejected(c, method, path, body, want=404, code="not_found")
    # unknown routes are 404 even without a token
    rejected(c, "GET", "/v1/nope", want=404, token=None)
    for method, path in (("PUT", "/v1/sites"), ("DELETE", "/v1/sites"), ("POST", "/v1/sites/1"),
                         ("PUT", "/v1/sites/1"), ("GET", "/v1/sites/1/origins/1"),
                         ("POST", "/healthz"), ("DELETE", "/metrics"), ("PATCH", "/v1/nodes")):
        rejected(c, method, path, {}, want=405, code="method_not_allowed")


# ---- 409 ----

def test_409_conflicts(tmp):
    c = Controld(tmp).start()
    a = create(c, site_body("shop", ["shop.example.com", "www.shop.example.com"]))
    b = create(c, site_body("blog", ["blog.example.com"]))
    rejected(c, "POST", "/v1/sites", site_body("shop", ["new.example.com"]), want=409,
             field="name", code="conflict")
    rejected(c, "POST", "/v1/sites", site_body("shop2", ["shop.example.com"]), want=409,
             field="hostnames[0]")
    rejected(c, "POST", "/v1/sites", site_body("shop2", ["Shop.Example.COM"]), want=409,
             field="hostnames[0]")
    rejected(c, "POST", "/v1/sites", site_body("shop2", ["new.example.com", "WWW.shop.example.com"],
                                               two_origins()), want=409, field="hostnames[1]")
    bp = "/v1/sites/%d" % b["id"]
    rejected(c, "PATCH", bp, {"name": "shop"}, want=409, field="name")
    rejected(c, "PATCH", bp, {"hostnames": ["blog.example.com", "Shop.example.com"]}, want=409,
             field="hostnames[1]")
    rejected(c, "PATCH", bp, {"name": "blog2", "hostnames": ["www.shop.example.com"]}, want=409,
             field="hostnames[0]")
    # a site may keep its own hostnames and name
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % a["id"],
                         {"name": "shop", "hostnames": ["www.shop.example.com", "shop.example.com"]})
    assert status == 200 and j["hostnames"] == ["www.shop.example.com", "shop.example.com"], j
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201
    rejected(c, "POST", "/v1/nodes", {"name": "edge-1"}, want=409, field="name")


def fill(c, sql, n):
    """Insert n rows i = 1..n with sql (an INSERT ... SELECT over g(i)) straight into the
    database controld is running on (SQLite or PostgreSQL): reaching a cap through the API
    would take minutes."""
    harness.db_query(c, "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g "
                        "WHERE i < %d) %s" % (n, sql))


def count(c, sql):
    return harness.db_query(c, sql)[0][0]


def test_409_count_caps(tmp):
    """docs/design.md#errors-and-limits: nodes, API tokens, unrevoked enrolment keys, webhooks
    and channels are capped; the create past a cap is 409 limit and stores nothing, and room
    made by a deletion or a revocation is usable at once."""
    c = Controld(tmp).start()
    # nodes: 10,000, whether made by an admin or by an enrolment key
    fill(c, "INSERT INTO nodes (name, created_at) SELECT 'bulk-' || i, 1700000000000 FROM g", 9999)
    status, k, _ = c.api("POST", "/v1/enrolment-keys", {"name": "fleet"})
    assert status == 201, (status, k)
    status, last, _ = c.api("POST", "/v1/nodes", {"name": "edge-last"})
    assert status == 201, (status, last)
    before = count(c, "SELECT COUNT(*) FROM tokens")
    rejected(c, "POST", "/v1/nodes", {"name": "edge-over"}, want=409, code="limit")
    status, j, _ = c.api("POST", "/v1/node/enrol", {"key": k["key"], "name": "edge-enrol"},
                         token=None)
    assert_error(status, j, 409, code="limit")
    assert j["error"]["message"] == "at most 10000 nodes can exist", j
    assert count(c, "SELECT COUNT(*) FROM tokens") == before
    status, keys, _ = c.api("GET", "/v1/enrolment-keys")
    assert status == 200 and keys["enrolment_keys"][0]["uses"] == 0, keys  # the use rolled back
    status, nodes, _ = c.api("GET", "/v1/nodes")
    assert status == 200 and len(nodes["nodes"]) == 10000, len(nodes["nodes"])
    status, _, _ = c.api("DELETE", "/v1/nodes/%d" % last["id"])
    assert status == 204
    status, j, _ = c.api("POST", "/v1/node/enrol", {"key": k["key"], "name": "edge-enrol"},
                         token=None)
    assert status == 201, (status, j)
    # API tokens: 1,000 (node tokens are not counted)
    have = count(c, "SELECT COUNT(*) FROM tokens WHERE kind = 'admin'")
    fill(c, "INSERT INTO tokens (kind, hash, name, role, created_at) "
         "SELECT 'admin', 'bulk-' || i, 'bulk-' || i, 'read', 1700000000000 FROM g", 999 - have)
    status, t, _ = c.api("POST", "/v1/tokens", {"name": "last", "role": "read"})
    assert status == 201, (status, t)
    status, j, _ = c.api("POST", "/v1/tokens", {"name": "over", "role": "read"})
    assert_error(status, j, 409, code="limit")
    assert j["error"]["message"] == "at most 1000 API tokens can exist", j
    status, _, _ = c.api("DELETE", "/v1/tokens/%d" % t["id"])
    assert status == 204
    status, t, _ = c.api("POST", "/v1/tokens", {"name": "over", "role": "read"})
    assert status == 201, (status, t)
    # enrolment keys: 1,000 unrevoked
    fill(c, "INSERT INTO enrolment_keys (name, hash, created_at) "
         "SELECT 'bulk-' || i, 'bulk-' || i, 1700000000000 FROM g", 998)
    status, j, _ = c.api("POST", "/v1/enrolment-keys", {"name": "k-last"})
    assert status == 201, (status, j)
    status, j, _ = c.api("POST", "/v1/enrolment-keys", {"name": "k-over"})
    assert_error(status, j, 409, code="limit")
    assert j["error"]["message"] == "at most 1000 unrevoked enrolment keys can exist", j
    status, _, _ = c.api("DELETE", "/v1/enrolment-keys/%d" % k["id"])
    assert status == 204
    status, j, _ = c.api("POST", "/v1/enrolment-keys", {"name": "k-over"})
    assert status == 201, (status, j)
    # webhooks and channels: 256 together
    for i in range(255):
        status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/%d" % i,
                                                     "secret": "s" * 16})
        assert status == 201, (i, status, j)
    status, j, _ = c.api("POST", "/v1/channels",
                         {"kind": "webhook", "name": "last", "url": "http://127.0.0.1:9/last",
                          "secret": "s" * 16})
    assert status == 201, (status, j)
    status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/over",
                                                   "secret": "s" * 16})
    assert_error(status, j, 409, code="limit")
    assert j["error"]["message"] == "at most 256 webhooks and channels can exist", j
    status, j, _ = c.api("POST", "/v1/channels",
                         {"kind": "webhook", "name": "over", "url": "http://127.0.0.1:9/over",
                          "secret": "s" * 16})
    assert_error(status, j, 409, code="limit")
    assert count(c, "SELECT COUNT(*) FROM webhooks") == 256


# ---- 413, 415 ----

def test_413_body_too_large(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("a"))
    big = json.dumps(site_body("big", ["big.example.com"],
                               health_check={"path": "/" + "x" * (1024 * 1024)})).encode()
    assert len(big) > 1024 * 1024
    rejected(c, "POST", "/v1/sites", raw=big, want=413, code="payload_too_large")
    rejected(c, "PATCH", "/v1/sites/%d" % s["id"], raw=big, want=413)
    # without Content-Length (chunked), the limit applies while reading
    status, j = post_chunked(c, "/v1/sites", big)
    assert_error(status, j, 413)
    assert snapshot(c)["sites"] == [s]
    # exactly 1 MiB is accepted, one byte more is not
    small = json.dumps(site_body("edge", ["edge.example.com"])).encode()
    exact = small + b" " * (1024 * 1024 - len(small))
    rejected(c, "POST", "/v1/sites", raw=exact + b" ", want=413)
    status, j, _ = c.api("POST", "/v1/sites", raw=exact)
    assert status == 201, (status, j)
    c.api("DELETE", "/v1/sites/%d" % j["id"])
    # a body just under the limit is read (and then judged on its values)
    ok = json.dumps(site_body("fits", ["fits.example.com"],
                              health_check={"path": "/" + "y" * 400})).encode()
    status, j = post_chunked(c, "/v1/sites", ok)
    assert status == 201, (status, j)


def post_chunked(c, path, data):
    """POST data with chunked transfer encoding (no Content-Length) -> (status, parsed)."""
    import http.client
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", "Bearer " + c.admin_token)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        try:
            for i in range(0, len(data), 65536):
                part = data[i:i + 65536]
                conn.send(b"%x\r\n" % len(part) + part + b"\r\n")
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        body = r.read()
        return r.status, json.loads(body) if body else None
    finally:
        conn.close()


def test_415_content_type(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("a", origins=two_origins()))
    sp = "/v1/sites/%d" % s["id"]
    raw = json.dumps(site_body("b")).encode()
    for ct in ("text/plain", "application/x-www-form-urlencoded", "application/jsonx",
               "application/xml"):
        hdr = {"Content-Type": ct}
        rejected(c, "POST", "/v1/sites", raw=raw, headers=hdr, want=415,
                 code="unsupported_media_type")
        rejected(c, "PATCH", sp, raw=b'{"failback":"manual"}', headers=hdr, want=415)
        rejected(c, "POST", sp + "/origins", raw=b'{"address":"10.0.0.5"}', headers=hdr, want=415)
        rejected(c, "POST", "/v1/nodes", raw=b'{"name":"n"}', headers=hdr, want=415)
    # no Content-Type at all
    before = snapshot(c)
    import http.client
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    conn.putrequest("POST", "/v1/sites")
    conn.putheader("Authorization", "Bearer " + c.admin_token)
    conn.putheader("Content-Length", str(len(raw)))
    conn.endheaders()
    conn.send(raw)
    r = conn.getresponse()
    j = json.loads(r.read())
    conn.close()
    assert_error(r.status, j, 415)
    assert snapshot(c) == before


# ---- 422 ----

def test_422_site_values(tmp):
    c = Controld(tmp).start()
    create(c, site_body("base", origins=two_origins()))

    def o(**kw):
        d = {"address": "10.0.0.1"}
        d.update(kw)
        return d
    cases = [
        (site_body("x", origins=[o(port=0)]), "origins[0].port"),
        (site_body("x", origins=[o(port=65536)]), "origins[0].port"),
        (site_body("x", origins=[o(), o(port=-1)]), "origins[1].port"),
        (site_body("x", origins=[o(port="80")]), "origins[0].port"),
        (site_body("x", origins=[o(port=80.5)]), "origins[0].port"),
        (site_body("x", origins=[o(scheme="ftp")]), "origins[0].scheme"),
        (site_body("x", origins=[o(scheme="HTTPS")]), "origins[0].scheme"),
        (site_body("x", origins=[o(level=0)]), "origins[0].level"),
        (site_body("x", origins=[o(level=17)]), "origins[0].level"),
        (site_body("x", origins=[o(weight=0)]), "origins[0].weight"),
        (site_body("x", origins=[o(enabled="yes")]), "origins[0].enabled"),
        (site_body("x", origins=[{"port": 80}]), "origins[0].address"),
        (site_body("x", origins=[o(address="bad address")]), "origins[0].address"),
        (site_body("x", origins=[o(host_header="bad host")]), "origins[0].host_header"),
        (site_body("x", origins=[o(), "10.0.0.2"]), "origins[1]"),
        (site_body("x", origins={"address": "10.0.0.1"}), "origins"),
        (site_body("x", ["bad_host.example.com"]), "hostnames[0]"),
        (site_body("x", ["ok.example.com", "-bad.example.com"]), "hostnames[1]"),
        (site_body("x", ["a..b.example.com"]), "hostnames[0]"),
        (site_body("x", [""]), "hostnames[0]"),
        (site_body("x", ["a" * 64 + ".example.com"]), "hostnames[0]"),
        (site_body("x", ["ok.example.com", "OK.example.com"]), "hostnames[1]"),
        (site_body("x", [7]), "hostnames[0]"),
        (site_body("x", []), "hostnames"),
        (site_body("x", "x.example.com"), "hostnames"),
        ({"name": "x"}, "hostnames"),
        ({"hostnames": ["x.example.com"]}, "name"),
        (site_body("bad name!"), "name"),
        (site_body(""), "name"),
        (site_body("n" * 65), "name"),
        (site_body("x", failback="sometimes"), "failback"),
        (site_body("x", failback_hold_ms=-1), "failback_hold_ms"),
        (site_body("x", failback_ramp={"steps": [10, 50], "step_ms": 1000}),
         "failback_ramp.steps"),
        (site_body("x", failback_ramp={"steps": [100], "step_ms": 1000}), "failback_ramp.steps"),
        (site_body("x", failback_ramp={"steps": list(range(1, 11)) + [100], "step_ms": 1000}),
         "failback_ramp.steps"),
        (site_body("x", failback_ramp={"steps": [50, 50, 100], "step_ms": 1000}),
         "failback_ramp.steps[1]"),
        (site_body("x", failback_ramp={"steps": [10, 100], "step_ms": 999}),
         "failback_ramp.step_ms"),
        (site_body("x", failback_ramp={"steps": [10, 100], "step_ms": 3600001}),
         "failback_ramp.step_ms"),
        (site_body("x", failback_ramp={"steps": [10, 100], "step_ms": 1000,
                                       "max_failure_ratio": 0}), "failback_ramp.max_failure_ratio"),
        (site_body("x", failback_ramp={"steps": [10, 100], "step_ms": 1000, "min_requests": 0}),
         "failback_ramp.min_requests"),
        (site_body("x", failback_ramp=[10, 100]), "failback_ramp"),
        (site_body("x", origins=[o()], health_check={"enabled": True}), "health_check.enabled"),
        (site_body("x", health_check={"enabled": True}), "health_check.enabled"),
        (site_body("x", origins=[o(), o(address="10.0.0.2", enabled=False)],
                   health_check={"enabled": True}), "health_check.enabled"),
        (site_body("x", health_check={"path": "nope"}), "health_check.path"),
        (site_body("x", health_check={"timeout_ms": 0}), "health_check.timeout_ms"),
        (site_body("x", health_check={"unhealthy_after": 0}), "health_check.unhealthy_after"),
        (site_body("x", health_check={"healthy_after": 101}), "health_check.healthy_after"),
        (site_body("x", health_check=True), "health_check"),
        (site_body("x", node_retry={"retry_on_status": [200]}), "node_retry.retry_on_status[0]"),
        (site_body("x", node_retry={"retry_on_status": [502, 600]}),
         "node_retry.retry_on_status[1]"),
        (site_body("x", node_retry={"retry_on_status": 502}), "node_retry.retry_on_status"),
        (site_body("x", node_retry={"retries": -1}), "node_retry.retries"),
        (site_body("x", node_retry={"fail_count": 0}), "node_retry.fail_count"),
        (site_body("x", node_retry={"backup_levels": "yes"}), "node_retry.backup_levels"),
        (site_body("x", node_retry={"failure_ratio": 0}), "node_retry.failure_ratio"),
        (site_body("x", node_retry={"failure_ratio": 1.5}), "node_retry.failure_ratio"),
        (site_body("x", node_retry={"failure_min_volume": 0}), "node_retry.failure_min_volume"),
    ]
    for body, field in cases:
        rejected(c, "POST", "/v1/sites", body, want=422, field=field)


def test_422_patch_and_origins(tmp):
    c = Controld(tmp).start()
    one = create(c, site_body("one", origins=[{"address": "10.0.0.1"}]))
    two = create(c, site_body("two", origins=two_origins()))
    p1, p2 = "/v1/sites/%d" % one["id"], "/v1/sites/%d" % two["id"]
    rejected(c, "PATCH", p1, {"health_check": {"enabled": True}}, want=422,
             field="health_check.enabled")
    rejected(c, "PATCH", p1, {"name": "bad name"}, want=422, field="name")
    rejected(c, "PATCH", p1, {"hostnames": []}, want=422, field="hostnames")
    rejected(c, "PATCH", p1, {"hostnames": ["x.example.com", "bad..x"]}, want=422,
             field="hostnames[1]")
    rejected(c, "PATCH", p2, {"failback": "auto", "node_retry": {"retry_on_status": [1000]}},
             want=422, field="node_retry.retry_on_status[0]")
    oid = two["origins"][0]["id"]
    op = p2 + "/origins/%d" % oid
    for body, field in (({"port": 0}, "port"), ({"port": 65536}, "port"),
                        ({"scheme": "ftp"}, "scheme"), ({"level": 0}, "level"),
                        ({"level": 17}, "level"), ({"address": ""}, "address"),
                        ({"weight": 1000}, "weight"), ({"enabled": 1}, "enabled")):
        rejected(c, "PATCH", op, body, want=422, field=field)
        rejected(c, "POST", p2 + "/origins", dict({"address": "10.0.0.3"}, **body), want=422,
                 field=field)
    rejected(c, "POST", p2 + "/origins", {"port": 80}, want=422, field="address")
    rejected(c, "POST", p2 + "/origins", [], want=400)


# ---- origins ----

def test_origins_add_patch_delete(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("o", origins=two_origins()))
    sp = "/v1/sites/%d" % s["id"]
    v = s["config_version"]
    status, o3, _ = c.api("POST", sp + "/origins", {"address": "Origin3.Example.net", "level": 2,
                                                    "scheme": "http"})
    assert status == 201, o3
    assert set(o3) == ORIGIN_KEYS and o3["address"] == "origin3.example.net", o3
    assert o3["port"] == 80 and o3["weight"] == 1 and o3["enabled"] is True
    assert o3["health"] == "unknown"
    status, o4, _ = c.api("POST", sp + "/origins", {"address": "10.0.0.4"})
    assert status == 201 and o4["port"] == 443 and o4["level"] == 1, o4
    g = c.api("GET", sp)[1]
    assert len(g["origins"]) == 4 and g["config_version"] == v + 2, g
    op = sp + "/origins/%d" % o3["id"]
    status, j, _ = c.api("PATCH", op, {"port": 8080})
    assert status == 200 and j["port"] == 8080 and j["address"] == "origin3.example.net", j
    assert j["scheme"] == "http" and j["level"] == 2
    status, j, _ = c.api("PATCH", op, {"enabled": False})
    assert status == 200 and j["enabled"] is False and j["port"] == 8080, j
    g = c.api("GET", sp)[1]
    assert g["config_version"] == v + 4
    assert [x for x in g["origins"] if x["id"] == o3["id"]][0] == j
    status, body, _ = c.api("DELETE", op)
    assert status == 204 and body == ""
    rejected(c, "DELETE", op, want=404)
    rejected(c, "PATCH", op, {"port": 1}, want=404)
    g = c.api("GET", sp)[1]
    assert o3["id"] not in [x["id"] for x in g["origins"]] and len(g["origins"]) == 3
    assert g["config_version"] == v + 5


def test_changes_nodes_are_not_sent_publish_nothing(tmp):
    """A change of what nodes are never sent (a health check, failback, a disabled origin) records
    no publication: config_version and the node's config stay, the revision (ETag) and
    updated_at move (sort=changed lists it first); a change of what they are sent is one
    publication (docs/design.md, Site-config wire format)."""
    c = Controld(tmp).start()
    s = create(c, site_body("q", origins=[{"address": "10.0.0.1"},
                                          {"address": "10.0.0.2", "level": 2},
                                          {"address": "10.0.0.3", "level": 2, "enabled": False}]))
    sp = "/v1/sites/%d" % s["id"]
    spare = sp + "/origins/%d" % s["origins"][2]["id"]
    first = sp + "/origins/%d" % s["origins"][0]["id"]
    other = create(c, site_body("r"))  # changed after q, until q's next change
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-q"})
    assert status == 201, n
    status, cfg, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=n["token"])
    assert status == 200, cfg
    seq, g = cfg["seq"], s
    for path, body in ((sp, {"failback": "manual", "failback_hold_ms": 5000}),
                       (sp, {"health_check": {"path": "/hc2", "timeout_ms": 3000}}),
                       (sp, {"health_check_shadow": {"unhealthy_after": 5}}),
                       (sp, {"name": "q", "hostnames": ["q.example.com"]}),  # as they are
                       (spare, {"port": 9000, "description": "spare, racked"}),
                       (first, {"weight": s["origins"][0]["weight"]})):
        time.sleep(0.01)
        status, j, _ = c.api("PATCH", path, body)
        assert status == 200, (path, body, status, j)
        now = c.api("GET", sp)[1]
        assert now["config_version"] == g["config_version"], (body, now)
        assert now["revision"] == g["revision"] + 1, (body, now)
        # a change all the same: the last changed first
        order = [x["id"] for x in c.api("GET", "/v1/sites?sort=changed")[1]["sites"]]
        assert order == [s["id"], other["id"]], (body, order)
        time.sleep(0.01)
        assert c.api("PATCH", "/v1/sites/%d" % other["id"], {"failback_hold_ms": 6000})[0] == 200
        status, cfg, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq,
                               token=n["token"])
        assert status == 304, (body, status, cfg)
        g = now
    assert g["failback"] == "manual" and g["health_check"]["path"] == "/hc2", g
    # what nodes are sent: one publication each
    for path, body in ((first, {"description": "primary"}), (sp, {"node_retry": {"retries": 0}}),
                       (spare, {"enabled": True})):
        status, j, _ = c.api("PATCH", path, body)
        assert status == 200, (path, body, status, j)
        now = c.api("GET", sp)[1]
        assert now["config_version"] == g["config_version"] + 1, (body, now)
        status, cfg, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq,
                               token=n["token"])
        assert status == 200 and cfg["seq"] == seq + 1, (body, status, cfg)
        seq, g = cfg["seq"], now
    site = [x for x in cfg["sites"] if x["id"] == s["id"]][0]
    assert {o["port"] for o in site["origins"] if o["id"] == s["origins"][2]["id"]} == {9000}
    assert site["config_version"] == g["config_version"], (site, g)


def test_origin_description(tmp):
    """An origin's description: free text of 0 to 200 characters, no control characters. It is
    in the API's answers, in the export document and in the config nodes are sent; a bad one is
    a 422 naming the field, and changes nothing stored."""
    c = Controld(tmp).start()
    text = "Frankfurt rack 3 \u2014 \u00e9t\u00e9 \U0001F600"
    s = create(c, site_body("d", origins=[{"address": "10.0.0.1", "description": text},
                                          {"address": "10.0.0.2", "level": 2}]))
    assert s["origins"][0]["description"] == text and s["origins"][1]["description"] == "", s
    sp = "/v1/sites/%d" % s["id"]
    op = sp + "/origins/%d" % s["origins"][1]["id"]
    full = "\u00e9" * 200  # 200 characters, 400 bytes
    status, j, _ = c.api("PATCH", op, {"description": full})
    assert status == 200 and j["description"] == full, j
    for bad in ("x" * 201, "\u00e9" * 201, "line\nbreak", "tab\there", "nul\u007f", "c1\u0085",
                42, None, ["x"]):
        rejected(c, "PATCH", op, {"description": bad}, want=422, field="description")
        rejected(c, "POST", sp + "/origins", {"address": "10.0.0.3", "description": bad},
                 want=422, field="description")
    rejected(c, "POST", "/v1/sites", site_body("e", origins=[{"address": "10.0.0.1",
                                                              "description": "x" * 201}]),
             want=422, field="origins[0].description")
    g = c.api("GET", sp)[1]
    assert [o["description"] for o in g["origins"]] == [text, full], g
    # the config nodes are sent carries it
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-d"})
    assert status == 201, n
    status, cfg, _ = c.api("GET", "/v1/node/config?since=0", token=n["token"])
    assert status == 200, cfg
    site = [x for x in cfg["sites"] if x["id"] == s["id"]][0]
    assert sorted(o["description"] for o in site["origins"]) == sorted([text, full]), site
    # and the export document, which an import reads back
    out = os.path.join(tmp, "export.json")
    c.stop()
    r = subprocess.run([c.binary, "--db", c.db, "--export", out], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    site = [x for x in doc["sites"] if x["id"] == s["id"]][0]
    assert [o["description"] for o in site["origins"]] == [text, full], site
    db2 = harness.new_db(tmp, "imported")
    r = subprocess.run([c.binary, "--db", db2, "--import", out], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c2 = Controld(tmp, db=db2, name="controld2").start()
    g2 = c2.api("GET", sp)[1]
    assert [o["description"] for o in g2["origins"]] == [text, full], g2


def test_health_check_paused_below_two(tmp):
    c = Controld(tmp).start()
    s = create(c, site_body("hc", origins=two_origins()))
    sp = "/v1/sites/%d" % s["id"]
    o1, o2 = [o["id"] for o in s["origins"]]
    assert s["health_check"]["state"] == "active"
    status, j, _ = c.api("PATCH", sp + "/origins/%d" % o2, {"enabled": False})
    assert status == 200, j
    g = c.api("GET", sp)[1]
    assert g["health_check"]["enabled"] is True and g["health_check"]["state"] == "paused", g
    # other PATCHes of the site keep the (paused) checks
    status, j, _ = c.api("PATCH", sp, {"failback": "manual"})
    assert status == 200 and j["health_check"]["state"] == "paused", j
    # asking for them again while paused is a 422
    rejected(c, "PATCH", sp, {"health_check": {"enabled": True}}, want=422,
             field="health_check.enabled")
    status, j, _ = c.api("PATCH", sp + "/origins/%d" % o2, {"enabled": True})
    assert status == 200 and j["health"] == "unknown"
    assert c.api("GET", sp)[1]["health_check"]["state"] == "active"
    assert c.api("DELETE", sp + "/origins/%d" % o1)[0] == 204
    g = c.api("GET", sp)[1]
    assert g["health_check"]["state"] == "paused" and len(g["origins"]) == 1, g
    status, j, _ = c.api("POST", sp + "/origins", {"address": "10.0.0.7"})
    assert status == 201
    assert c.api("GET", sp)[1]["health_check"]["state"] == "active"


# ---- nodes ----

def test_nodes_token_once_and_revocation(tmp):
    c = Controld(tmp).start()
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-fra-1"})
    assert status == 201, n
    assert set(n) == {"id", "name", "token"} and n["name"] == "edge-fra-1", n
    assert re.fullmatch(r"[0-9a-f]{32,}", n["token"]), n
    status, m, _ = c.api("POST", "/v1/nodes", {"name": "edge-fra-2"})
    assert status == 201 and m["token"] != n["token"]
    status, lst, _ = c.api("GET", "/v1/nodes")
    assert status == 200, lst
    assert [x["id"] for x in lst["nodes"]] == [n["id"], m["id"]]
    text = json.dumps(lst)
    assert n["token"] not in text and m["token"] not in text and "token" not in text, text
    for x in lst["nodes"]:
        for k in ("id", "name", "online", "last_seen_at", "config_seq", "version"):
            assert k in x, (k, x)
        assert x["online"] is False and x["last_seen_at"] is None
    rejected(c, "POST", "/v1/nodes", {}, want=422, field="name")
    rejected(c, "POST", "/v1/nodes", {"name": "bad name"}, want=422, field="name")
    rejected(c, "POST", "/v1/nodes", {"name": 5}, want=422, field="name")
    rejected(c, "POST", "/v1/nodes", {"name": "e" * 65}, want=422, field="name")
    # the node token is known (403 on an admin route, not 401)
    rejected(c, "GET", "/v1/sites", want=403, token=n["token"])
    routes = node_route_exists(c)
    if routes:
        status, j, _ = c.api("POST", NODE_HEARTBEAT, {"version": "t", "config_version": 0,
                                                     "observations": []}, token=n["token"])
        assert status not in (401, 403), (status, j)
    status, body, _ = c.api("DELETE", "/v1/nodes/%d" % n["id"])
    assert status == 204 and body == ""
    status, lst, _ = c.api("GET", "/v1/nodes")
    assert [x["id"] for x in lst["nodes"]] == [m["id"]]
    # revoked at once: the token is unknown now, on every route
    rejected(c, "GET", "/v1/sites", want=401, token=n["token"])
    status, j, _ = c.api("POST", NODE_HEARTBEAT, {}, token=n["token"])
    # Until the node protocol routes exist the path is a 404 (routing comes before auth);
    # once they exist the revoked token must get a 401.
    assert status == (401 if routes else 404), (status, j, routes)
    rejected(c, "DELETE", "/v1/nodes/%d" % n["id"], want=404)
    # the other node is untouched
    rejected(c, "GET", "/v1/sites", want=403, token=m["token"])


def test_revoked_node_poll_answered_at_once(tmp):
    """DELETE /v1/nodes/{id} answers that node's suspended config long-poll with 401 right away
    (it would otherwise hold until wait_ms, here 60 s: longer than the client's 30 s timeout)."""
    c = Controld(tmp).start()
    status, j, _ = c.api("POST", "/v1/nodes", {"name": "edge-revoked"})
    assert status == 201, j
    tok, nid = j["token"], j["id"]
    status, _, _ = c.api("POST", "/v1/sites", {"name": "rv", "hostnames": ["rv.example.com"]})
    assert status == 201
    status, cfg, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
    assert status == 200, cfg
    got = {}

    def poll():
        try:
            got["status"] = c.api("GET", "/v1/node/config?since=%d&wait_ms=60000" % cfg["seq"],
                                  token=tok)[0]
        except Exception as e:  # a timeout here means the poll was not answered
            got["error"] = repr(e)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)  # let the poll suspend (if it has not, it gets the 401 at once anyway)
    status, _, _ = c.api("DELETE", "/v1/nodes/%d" % nid)
    assert status == 204
    t.join(40)
    assert not t.is_alive()
    assert got.get("status") == 401, got


if __name__ == "__main__":
    harness.main()
