#!/usr/bin/env python3
"""test_team — the API a team shares (docs/design.md#fleet-view, "Tokens and roles", "Audit").

Fleet: a few hundred sites in mixed states (on a backup level by a manual switch, health checks
paused, every level down, manual failback available) against GET /v1/summary and the state= /
q= filters of GET /v1/sites with their pagination.
Tokens: created with a role (the secret shown once), listed without secrets, names unique,
optional expiry, revocation effective on the next request, CDNCA_ADMIN_TOKEN as the bootstrap
admin named "bootstrap" and its rotation by restart. (The role x route matrix is in
test_auth_matrix.py.)
Audit: one record per accepted write of every kind, with the token, method, path, site, status
and a summary; none for refused requests; paging and the site filter; data.by on a manual
switch; pruning by age.
OpenAPI: the served document is the repository's, it names every route of the route tables with
the same role and nothing else, and the harness's check refuses a route missing from it (every
integration test's answers are checked by harness.py)."""

import copy
import glob
import json
import os
import re
import time

import harness
from harness import Controld, Origin, wait_until

FAST = ["--probe-interval-ms", "300"]
WAIT = 40.0


def site_body(i, origins, **extra):
    body = {"name": "fleet-%03d" % i, "hostnames": ["f%03d.example.com" % i], "origins": origins}
    body.update(extra)
    return body


def walk(c, query, limit):
    """Every site id of a filtered listing, page by page (at most 200 pages)."""
    ids, after = [], None
    for _ in range(200):
        path = "/v1/sites?limit=%d%s%s" % (limit, query, "&after=%d" % after if after else "")
        status, body, _ = c.api("GET", path)
        assert status == 200, (path, status, body)
        assert len(body["sites"]) <= limit, body
        ids += [s["id"] for s in body["sites"]]
        if body["next"] is None:
            return ids
        assert body["next"] == ids[-1], body  # the last site of the page, in any order
        after = body["next"]
    raise AssertionError("paging did not end")


def summary(c):
    status, body, _ = c.api("GET", "/v1/summary")
    assert status == 200, (status, body)
    return body


def test_fleet_summary_and_filters(tmp):
    o = Origin("fleet", tmpdir=tmp).start()
    o.set(health_path_status={"/down": 503})
    c = Controld(tmp, extra_args=FAST).start()
    up = [{"level": 1, "address": o.address, "port": o.port, "scheme": "http"},
          {"level": 2, "address": o.address, "port": o.port, "scheme": "http"}]
    groups = {"plain": [], "backup": [], "paused": [], "down": [], "failback": []}
    for i in range(300):
        off = {"enabled": False}  # no probing: these sites' states come from config alone
        if i < 200:
            kind, body = "plain", site_body(i, up, health_check=off)
        elif i < 240:
            kind, body = "backup", site_body(i, up, health_check=off)
        elif i < 270:  # checks on, then one of the two origins disabled: paused
            kind, body = "paused", site_body(i, up, health_check={
                "enabled": True, "path": "/ok", "timeout_ms": 2000})
        elif i < 280:  # both levels fail their checks
            kind, body = "down", site_body(i, up, health_check={
                "enabled": True, "path": "/down", "timeout_ms": 2000})
        else:  # manual failback, switched to level 2 by hand while level 1 is healthy
            kind, body = "failback", site_body(i, up, failback="manual", health_check={
                "enabled": True, "path": "/ok", "timeout_ms": 2000})
        status, site, _ = c.api("POST", "/v1/sites", body)
        assert status == 201, (status, site)
        groups[kind].append(site["id"])
        if kind == "paused":
            status, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d"
                                    % (site["id"], site["origins"][1]["id"]), {"enabled": False})
            assert status == 200, (status, body)
    for sid in groups["backup"]:
        status, card, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2})
        assert status == 200 and card["current_level"] == 2, (status, card)

    def healthy_l1(sid):
        status, card, _ = c.api("GET", "/v1/sites/%d/status" % sid)
        return status == 200 and card["levels"][0]["health"] == "healthy"
    for sid in groups["failback"]:
        wait_until(lambda: healthy_l1(sid), timeout=WAIT, what="level 1 of site %d healthy" % sid)
        status, card, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2})
        assert status == 200, (status, card)

    def settled():
        s = summary(c)
        return s if s["all_levels_unhealthy"] == 10 and s["failback_available"] == 20 else None
    s = wait_until(settled, timeout=WAIT, what="the down sites' checks to fail")
    # on a backup: the 40 switched by hand and the 20 waiting for a manual failback
    assert s == {"sites": 300, "on_primary": 240, "on_backup": 60, "all_levels_unhealthy": 10,
                 "failback_available": 20, "paused": 30, "nodes_online": 0,
                 "nodes_lagging": 0}, s
    # the summary's flags agree with every status card of those sites
    for sid in groups["down"]:
        status, card, _ = c.api("GET", "/v1/sites/%d/status" % sid)
        assert card["all_levels_unhealthy"] is True, card
    for sid in groups["failback"][:5]:
        status, card, _ = c.api("GET", "/v1/sites/%d/status" % sid)
        assert card["failback_available"] is True and card["current_level"] == 2, card

    assert walk(c, "&state=on_backup", 7) == sorted(groups["backup"] + groups["failback"])
    assert walk(c, "&state=paused", 8) == groups["paused"]
    assert walk(c, "&state=all_down", 3) == groups["down"]
    assert walk(c, "&state=failback_available", 100) == groups["failback"]
    assert walk(c, "", 64) == sorted(sum(groups.values(), []))
    # q: a substring of the name or of a hostname, any case; combined with a state
    assert walk(c, "&q=fleet-01", 4) == [groups["plain"][i] for i in range(10, 20)]
    assert walk(c, "&q=F123.EXAMPLE", 10) == [groups["plain"][123]]
    assert walk(c, "&q=fleet-2&state=on_backup", 10) == groups["backup"] + groups["failback"]
    assert walk(c, "&q=fleet-29&state=all_down", 10) == []
    assert walk(c, "&q=.example.com&state=paused", 50) == groups["paused"]
    assert walk(c, "&q=%25", 10) == []  # "%" is a character, not a wildcard
    # the listing's records are the full site documents
    status, body, _ = c.api("GET", "/v1/sites?state=paused&limit=1")
    assert body["sites"][0]["health_check"]["state"] == "paused", body

    # a site switched back to its first level leaves the backup count at once
    sid = groups["backup"][0]
    status, _, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1})
    assert status == 200
    assert summary(c)["on_backup"] == 59
    assert sid not in walk(c, "&state=on_backup", 100)
    # enabling the second origin of a paused site ends the pause; adding one: same
    for sid in groups["paused"][:2]:
        status, site, _ = c.api("GET", "/v1/sites/%d" % sid)
        assert status == 200
        status, _, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, site["origins"][1]["id"]),
                             {"enabled": True})
        assert status == 200
    assert summary(c)["paused"] == 28
    sid = groups["paused"][2]
    status, _, _ = c.api("POST", "/v1/sites/%d/origins" % sid,
                         {"level": 3, "address": o.address, "port": o.port, "scheme": "http"})
    assert status == 201
    assert summary(c)["paused"] == 27
    # a deleted site leaves every count
    status, _, _ = c.api("DELETE", "/v1/sites/%d" % groups["down"][0])
    assert status == 204
    s = summary(c)
    assert s["sites"] == 299 and s["all_levels_unhealthy"] == 9, s

    # bad filters: 400 with the field, nothing listed
    for query, field in (("state=bogus", "state"), ("state=", "state"),
                         ("state=all_levels_unhealthy", "state"), ("q=" + "x" * 254, "q"),
                         ("limit=0&state=paused", "limit")):
        status, body, _ = c.api("GET", "/v1/sites?" + query)
        assert status == 400, (query, status, body)
        assert body["error"]["code"] == "invalid_query" and body["error"]["field"] == field, body
    c.stop()


def test_sites_sorted_by_last_change(tmp):
    c = Controld(tmp).start()
    ids = []
    for i in range(5):
        status, site, _ = c.api("POST", "/v1/sites", {"name": "s%d" % i,
                                                      "hostnames": ["s%d.example.com" % i],
                                                      "origins": [{"address": "10.0.0.1"},
                                                                  {"address": "10.0.0.2",
                                                                   "level": 2}]})
        assert status == 201
        ids.append(site["id"])
        time.sleep(0.01)  # distinct updated_at
    for i in (1, 3):
        time.sleep(0.01)
        status, _, _ = c.api("PATCH", "/v1/sites/%d" % ids[i], {"failback": "manual"})
        assert status == 200
    time.sleep(0.01)
    status, _, _ = c.api("POST", "/v1/sites/%d/switch" % ids[0], {"level": 2})  # a switch counts
    assert status == 200
    want = [ids[0], ids[3], ids[1], ids[4], ids[2]]
    assert walk(c, "&sort=changed", 2) == want
    assert walk(c, "&sort=changed", 100) == want
    assert walk(c, "&sort=id", 2) == ids
    assert walk(c, "&sort=changed&state=on_backup", 2) == [ids[0]]
    assert walk(c, "&sort=changed&q=S3", 2) == [ids[3]]
    status, body, _ = c.api("GET", "/v1/sites?sort=name")
    assert status == 400 and body["error"]["field"] == "sort", body
    c.stop()


def test_summary_counts_nodes(tmp):
    c = Controld(tmp, extra_args=["--node-online-ms", "60000"]).start()
    tokens = []
    for name in ("edge-a", "edge-b", "edge-c"):
        status, node, _ = c.api("POST", "/v1/nodes", {"name": name})
        assert status == 201, node
        tokens.append(node["token"])
    s = summary(c)
    assert s["nodes_online"] == 0 and s["nodes_lagging"] == 0, s
    status, site, _ = c.api("POST", "/v1/sites", {"name": "n", "hostnames": ["n.example.com"],
                                                  "origins": [{"address": "10.0.0.1"}]})
    assert status == 201
    status, cfg, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tokens[0])
    assert status == 200, (status, cfg)
    seq = cfg["seq"]
    # a and b heartbeat on the last publication's seq, c one behind
    for tok, applied in ((tokens[0], seq), (tokens[1], seq), (tokens[2], seq - 1)):
        status, body, _ = c.api("POST", "/v1/node/heartbeat",
                                {"version": "t", "config_version": applied}, token=tok)
        assert status == 204, (status, body)
    s = summary(c)
    assert s["nodes_online"] == 3 and s["nodes_lagging"] == 1, s
    assert s["sites"] == 1 and s["on_primary"] == 1, s
    c.stop()


def bearer(tok):
    return {"Authorization": "Bearer " + tok}


def as_token(c, tok, method, path, body=None):
    return c.api(method, path, body=body, token=tok)


def test_tokens_create_list_revoke(tmp):
    c = Controld(tmp).start()
    status, body, _ = c.api("GET", "/v1/tokens")
    assert status == 200 and [(t["name"], t["role"]) for t in body["tokens"]] == [
        ("bootstrap", "admin")], body
    boot = body["tokens"][0]
    assert boot["expires_at"] is None and boot["created_at"], boot
    made = {}
    for name, role in (("dash", "read"), ("oncall", "operator"), ("ci", "admin")):
        status, tok, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
        assert status == 201, (status, tok)
        assert set(tok) == {"id", "name", "role", "token", "created_at", "expires_at"}, tok
        assert tok["name"] == name and tok["role"] == role and len(tok["token"]) >= 32, tok
        made[name] = tok
    status, body, _ = c.api("GET", "/v1/tokens")
    listed = body["tokens"]
    assert [t["name"] for t in listed] == ["bootstrap", "dash", "oncall", "ci"], listed
    for t in listed:  # never a secret in the list
        assert "token" not in t and set(t) == {"id", "name", "role", "created_at",
                                               "expires_at"}, t
    assert made["dash"]["token"] not in str(body)
    # each token works with its role
    assert as_token(c, made["dash"]["token"], "GET", "/v1/sites")[0] == 200
    status, err, _ = as_token(c, made["dash"]["token"], "POST", "/v1/sites",
                              {"name": "x", "hostnames": ["x.example.com"]})
    assert status == 403 and err["error"]["code"] == "forbidden_role", err
    assert as_token(c, made["oncall"]["token"], "GET", "/v1/tokens")[0] == 403
    status, tok, _ = as_token(c, made["ci"]["token"], "POST", "/v1/tokens",
                              {"name": "made-by-ci", "role": "read"})
    assert status == 201, (status, tok)

    # every role learns who it is
    for name in ("dash", "oncall", "ci"):
        status, me, _ = as_token(c, made[name]["token"], "GET", "/v1/tokens/self")
        assert status == 200 and me["id"] == made[name]["id"], (status, me)
        assert me["name"] == name and me["role"] == made[name]["role"] and "token" not in me, me
    status, me, _ = c.api("GET", "/v1/tokens/self")
    assert (me["name"], me["role"]) == ("bootstrap", "admin"), me

    # bad input: a clear error, nothing stored
    for body, code, field in (({"name": "dash", "role": "read"}, 409, "name"),
                              ({"name": "bootstrap", "role": "admin"}, 409, "name"),
                              ({"name": "x", "role": "root"}, 422, "role"),
                              ({"name": "x"}, 422, "role"),
                              ({"role": "read"}, 422, "name"),
                              ({"name": "has space", "role": "read"}, 422, "name"),
                              ({"name": "y" * 65, "role": "read"}, 422, "name"),
                              ({"name": "x", "role": "read", "expires_at": "tomorrow"}, 422,
                               "expires_at"),
                              ({"name": "x", "role": "read", "expires_at": 1893456000}, 422,
                               "expires_at"),
                              ({"name": "x", "role": "read",
                                "expires_at": "2020-01-01T00:00:00Z"}, 422, "expires_at"),
                              ({"name": "x", "role": "read", "secret": "mine"}, 400, "secret")):
        status, err, _ = c.api("POST", "/v1/tokens", body)
        assert status == code, (body, status, err)
        assert err["error"]["field"] == field, (body, err)
    status, body, _ = c.api("GET", "/v1/tokens")
    assert len(body["tokens"]) == 5, body

    # revocation: the very next request with it is 401, also when it was just used (cached)
    tok = made["oncall"]["token"]
    assert as_token(c, tok, "GET", "/v1/summary")[0] == 200
    status, _, _ = c.api("DELETE", "/v1/tokens/%d" % made["oncall"]["id"])
    assert status == 204
    status, err, _ = as_token(c, tok, "GET", "/v1/summary")
    assert status == 401 and err["error"]["code"] == "unauthorized", (status, err)
    assert c.api("DELETE", "/v1/tokens/%d" % made["oncall"]["id"])[0] == 404
    # a node token is not an API token: not listed, not deletable here
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201
    status, body, _ = c.api("GET", "/v1/tokens")
    assert "edge-1" not in [t["name"] for t in body["tokens"]], body
    c.stop()


def test_revocation_during_a_suspended_request(tmp):
    """Revoking a token answers the requests it holds open at once (long-polls are what a
    token keeps suspended: the node protocol's), and the revocation is audited."""
    import threading
    c = Controld(tmp).start()
    status, admin, _ = c.api("POST", "/v1/tokens", {"name": "ops-admin", "role": "admin"})
    assert status == 201
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-held"}, token=admin["token"])
    assert status == 201
    status, cfg, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=node["token"])
    seq = cfg["seq"] if status == 200 else 0
    got = {}

    def poll(key, path):
        t0 = time.monotonic()
        try:
            got[key] = (c.api("GET", path, token=node["token"], timeout=30)[0],
                        time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            got[key] = (repr(e), time.monotonic() - t0)
    threads = [threading.Thread(target=poll, args=("config", "/v1/node/config?since=%d"
                                                   "&wait_ms=20000" % seq)),
               threading.Thread(target=poll, args=("tasks", "/v1/node/tasks?wait_ms=20000"))]
    for th in threads:
        th.start()
    time.sleep(1.0)  # both held by controld by now
    assert not got, got
    t0 = time.monotonic()
    status, _, _ = c.api("DELETE", "/v1/nodes/%d" % node["id"], token=admin["token"])
    assert status == 204
    for th in threads:
        th.join(timeout=15)
    waited = time.monotonic() - t0
    assert got.get("config", (None,))[0] == 401, got
    assert waited < 5, (waited, got)  # answered at once, not at wait_ms
    assert got.get("tasks", (None,))[0] == 401, got
    rows = audit(c)
    assert [(r["method"], r["path"], r["token"]["name"]) for r in rows[-1:]] == [
        ("DELETE", "/v1/nodes/%d" % node["id"], "ops-admin")], rows
    c.stop()


def test_token_expiry(tmp):
    c = Controld(tmp).start()
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
    status, tok, _ = c.api("POST", "/v1/tokens", {"name": "short", "role": "read",
                                                  "expires_at": soon})
    assert status == 201 and tok["expires_at"] == soon, (status, tok)
    later = "2999-01-01T00:00:00.250+01:00"
    status, tok2, _ = c.api("POST", "/v1/tokens", {"name": "long", "role": "read",
                                                   "expires_at": later})
    assert status == 201 and tok2["expires_at"] == "2998-12-31T23:00:00Z", (status, tok2)
    assert as_token(c, tok["token"], "GET", "/v1/sites")[0] == 200

    def expired():
        return as_token(c, tok["token"], "GET", "/v1/sites")[0] == 401
    wait_until(expired, timeout=10, what="the token to expire")
    status, body, _ = c.api("GET", "/v1/tokens")
    assert [t["name"] for t in body["tokens"]] == ["bootstrap", "long"], body
    assert as_token(c, tok2["token"], "GET", "/v1/sites")[0] == 200
    c.stop()


def test_bootstrap_token_rotation(tmp):
    c = Controld(tmp).start()
    status, tok, _ = c.api("POST", "/v1/tokens", {"name": "ops", "role": "admin"})
    assert status == 201
    old = c.admin_token
    c.stop()
    c.admin_token = "adm-rotated-" + "0123456789abcdef"
    c.start()
    assert c.api("GET", "/v1/sites")[0] == 200
    assert as_token(c, tok["token"], "GET", "/v1/sites")[0] == 200  # API tokens survive
    status, body, _ = c.api("GET", "/v1/tokens")
    if harness.pg_mode():
        # cluster mode (docs/design.md#cluster-mode): the environment's token is added, the earlier one stays
        # (replicas started with different tokens must not revoke each other's); rotation is an
        # explicit DELETE, done here
        assert c.api("GET", "/v1/sites", token=old)[0] == 200
        names = sorted(t["name"] for t in body["tokens"])
        assert names[:2] == ["bootstrap", "bootstrap-" + names[1][10:]] and names[2] == "ops", body
        new = [t for t in body["tokens"] if t["name"] == names[1]][0]
        assert as_token(c, tok["token"], "DELETE", "/v1/tokens/%d" % new["id"])[0] == 204
        assert c.api("GET", "/v1/sites")[0] == 401
        c.stop()
        return
    assert c.api("GET", "/v1/sites", token=old)[0] == 401  # the earlier bootstrap token
    assert [(t["name"], t["role"]) for t in body["tokens"]] == [("ops", "admin"),
                                                                 ("bootstrap", "admin")], body
    # without CDNCA_ADMIN_TOKEN the stored bootstrap token stays
    c.stop()
    c.pass_admin_token = False
    c.start()
    assert c.api("GET", "/v1/sites")[0] == 200
    # the bootstrap token may be revoked like any other; the API tokens still work
    boot = [t for t in body["tokens"] if t["name"] == "bootstrap"][0]
    assert as_token(c, tok["token"], "DELETE", "/v1/tokens/%d" % boot["id"])[0] == 204
    assert c.api("GET", "/v1/sites")[0] == 401
    c.stop()


def audit(c, query=""):
    """Every audit record (paged through with after= and limit=5)."""
    out, after = [], 0
    for _ in range(200):
        status, body, _ = c.api("GET", "/v1/audit?limit=5&after=%d%s" % (after, query))
        assert status == 200, (status, body)
        out += body["audit"]
        if body["next"] is None:
            return out
        after = body["next"]
    raise AssertionError("audit paging did not end")


def test_audit_of_every_write(tmp):
    c = Controld(tmp).start()
    ops = {}
    for name, role in (("ops", "operator"), ("viewer", "read")):
        status, tok, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
        assert status == 201
        ops[name] = tok
    op, viewer = ops["ops"]["token"], ops["viewer"]["token"]
    expected = [("POST", "/v1/tokens", 201, "bootstrap", None, "created token %d (ops): "
                 "name=ops, role=operator" % ops["ops"]["id"]),
                ("POST", "/v1/tokens", 201, "bootstrap", None, None)]
    status, site, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.example.com"],
        "origins": [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}]})
    assert status == 201
    sid, o1, o2 = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    expected.append(("POST", "/v1/sites", 201, "bootstrap", sid,
                     "created site %d (shop): name=shop, hostnames, origins" % sid))

    def write(method, path, body, tok, want_status, summary=None, site_id=None):
        status, got, _ = c.api(method, path, body, token=tok)
        assert status == want_status, (method, path, status, got)
        expected.append((method, path, want_status, tok_name[tok], site_id, summary))
        return got
    tok_name = {c.admin_token: "bootstrap", op: "ops", viewer: "viewer"}
    write("PATCH", "/v1/sites/%d" % sid, {"failback": "manual"}, c.admin_token, 200,
          "changed site %d: failback=manual" % sid, sid)
    write("POST", "/v1/sites/%d/origins" % sid, {"address": "10.0.0.3", "level": 3},
          c.admin_token, 201, None, sid)
    write("PATCH", "/v1/sites/%d/origins/%d" % (sid, o2), {"enabled": False}, op, 200,
          "changed origin %d of site %d: enabled=false" % (o2, sid), sid)
    write("PATCH", "/v1/sites/%d/origins/%d" % (sid, o2), {"enabled": True}, op, 200, None, sid)
    write("POST", "/v1/sites/%d/switch" % sid, {"level": 2}, op, 200,
          "switch site %d: level=2" % sid, sid)
    node = write("POST", "/v1/nodes", {"name": "edge-1"}, c.admin_token, 201,
                 None, None)
    hook = write("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/hook",
                                          "secret": "a-very-secret-value"},
                 c.admin_token, 201, None, None)
    write("POST", "/v1/webhooks/%d/test" % hook["id"], {}, op, 202,
          "test webhook %d" % hook["id"], None)
    write("DELETE", "/v1/webhooks/%d" % hook["id"], None, c.admin_token, 204,
          "deleted webhook %d" % hook["id"], None)
    write("DELETE", "/v1/nodes/%d" % node["id"], None, c.admin_token, 204, None, None)
    write("DELETE", "/v1/sites/%d/origins/%d" % (sid, o1 + 2), None, c.admin_token, 204,
          None, sid)
    write("DELETE", "/v1/tokens/%d" % ops["viewer"]["id"], None, c.admin_token, 204,
          "deleted token %d" % ops["viewer"]["id"], None)
    write("DELETE", "/v1/sites/%d" % sid, None, c.admin_token, 204, "deleted site %d" % sid, sid)

    # refused requests leave no record: role, validation, not found, no token, conflict
    refused = [("POST", "/v1/sites", {"name": "x", "hostnames": ["x.example.com"]}, op, 403),
               ("PATCH", "/v1/sites/%d" % sid, {"failback": "sometimes"}, c.admin_token, 404),
               ("POST", "/v1/sites", {"name": "bad", "hostnames": []}, c.admin_token, 422),
               ("POST", "/v1/sites", {"name": "bad", "hostnames": ["b.example.com"], "x": 1},
                c.admin_token, 400),
               ("POST", "/v1/tokens", {"name": "ops", "role": "read"}, c.admin_token, 409),
               ("DELETE", "/v1/nodes/999", None, c.admin_token, 404),
               ("POST", "/v1/nodes", {"name": "n"}, None, 401),
               ("POST", "/v1/nodes", {"name": "n"}, viewer, 401)]  # viewer was revoked
    for method, path, body, tok, want in refused:
        status, got, _ = c.api(method, path, body, token=tok)
        assert status == want, (method, path, status, got)

    rows = audit(c)
    assert len(rows) == len(expected), "\n".join(
        "%s %s %s %s" % (r["method"], r["path"], r["status"], r["summary"]) for r in rows)
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids), ids
    for r, (method, path, status, who, site_id, summary) in zip(rows, expected):
        assert set(r) == {"id", "at", "token", "method", "path", "site_id", "status",
                          "summary"}, r
        assert (r["method"], r["path"], r["status"], r["token"]["name"]) == (
            method, path, status, who), (r, method, path)
        assert r["token"]["id"] and r["at"].endswith("Z"), r
        assert r["site_id"] == site_id, (r, site_id)
        if summary is not None:
            assert r["summary"] == summary, (r["summary"], summary)
        assert "a-very-secret-value" not in r["summary"], r  # never a secret
    assert rows[2]["token"]["id"] == 1, rows[2]  # the bootstrap token
    # the site filter, with paging
    mine = audit(c, "&site_id=%d" % sid)
    assert [r["id"] for r in mine] == [r["id"] for r in rows if r["site_id"] == sid], mine
    assert len(mine) == 8, mine
    status, body, _ = c.api("GET", "/v1/audit?limit=2&after=%d" % rows[-3]["id"])
    assert [r["id"] for r in body["audit"]] == ids[-2:] and body["next"] is None, body
    for q in ("limit=0", "limit=1001", "after=-1", "site_id=0", "site_id=x"):
        status, body, _ = c.api("GET", "/v1/audit?" + q)
        assert status == 400 and body["error"]["code"] == "invalid_query", (q, status, body)
    # a read token may read the log; the manual switch's event names who switched
    status, body, _ = c.api("GET", "/v1/audit?limit=1", token=op)
    assert status == 200 and len(body["audit"]) == 1, body
    status, body, _ = c.api("GET", "/v1/notifications?limit=1000")
    sw = [e for e in body["events"] if e["type"] == "level.switched"
          and e["data"]["reason"] == "manual"]
    assert len(sw) == 1 and sw[0]["data"]["by"] == "ops", sw
    auto = [e for e in body["events"] if e["type"] == "level.switched"
            and e["data"]["reason"] != "manual"]
    assert all("by" not in e["data"] for e in auto), auto
    c.stop()


def test_audit_commits_with_its_write(tmp):
    # the write's re-evaluation fails: the write, its events and its audit record all roll back
    c = Controld(tmp, extra_args=["--test-fault", "fail_reevaluate"]).start()
    status, body, _ = c.api("POST", "/v1/sites", {"name": "s", "hostnames": ["s.example.com"],
                                                  "origins": [{"address": "10.0.0.1"}]})
    assert status == 500, (status, body)
    assert c.api("GET", "/v1/sites")[1]["sites"] == []
    assert audit(c) == []
    status, _, _ = c.api("POST", "/v1/nodes", {"name": "edge"})  # no site: no re-evaluation
    assert status == 201
    assert [r["path"] for r in audit(c)] == ["/v1/nodes"]
    c.stop()
    # killed between the change and its commit: neither is there after the restart
    c = Controld(tmp, extra_args=["--test-fault", "crash_after_change"], name="crash").start()
    try:
        c.api("POST", "/v1/sites", {"name": "s", "hostnames": ["s.example.com"]}, timeout=5)
    except (ConnectionError, OSError):
        pass
    wait_until(lambda: not c.running(), timeout=10, what="controld to exit")
    c.extra_args = []
    c.start()
    assert c.api("GET", "/v1/sites")[1]["sites"] == []
    assert audit(c) == []
    c.stop()


def test_audit_retention(tmp):
    c = Controld(tmp, extra_args=["--audit-retention-days", "30"]).start()
    for i in range(3):
        status, _, _ = c.api("POST", "/v1/nodes", {"name": "edge-%d" % i})
        assert status == 201
    c.stop()
    now = int(time.time() * 1000)
    # 2,500 rows older than 30 days (one statement, SQLite and PostgreSQL alike), 1 inside
    harness.db_query(c, "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n "
                        "WHERE i < 2499) INSERT INTO audit (at, token_id, token_name, method, "
                        "path, status, summary) SELECT %d - i, 1, 'bootstrap', 'POST', "
                        "'/v1/nodes', 201, 'old' FROM n" % (now - 31 * 86400000))
    harness.db_query(c, "INSERT INTO audit (at, token_id, token_name, method, path, status, "
                        "summary) VALUES (%d, 1, 'bootstrap', 'POST', '/v1/nodes', 201, 'old')"
                        % (now - 29 * 86400000))
    c.start()
    # with SQLite the prune runs at start; on PostgreSQL (cluster mode) when this replica gains
    # the engine lease, just after it starts serving
    wait_until(lambda: harness.db_query(c, "SELECT COUNT(*) FROM audit WHERE summary = 'old'")
               == [(1,)], timeout=30, what="the old audit rows pruned")
    rows = audit(c)
    assert len(rows) == 4, [r["summary"] for r in rows]  # 3 fresh, 1 inside 30 days
    assert sum(r["summary"] == "old" for r in rows) == 1
    status, body, _ = c.api("GET", "/healthz", token=None)
    assert status == 200
    # every row old: the newest stays, so ids go on from it (SQLite numbers from the highest)
    c.stop()
    top = harness.db_query(c, "SELECT MAX(id) FROM audit")[0][0]
    harness.db_query(c, "UPDATE audit SET at = %d" % (now - 40 * 86400000))
    c.start()
    wait_until(lambda: harness.db_query(c, "SELECT id FROM audit") == [(top,)], timeout=30,
               what="every audit row but the newest pruned")
    status, _, _ = c.api("POST", "/v1/nodes", {"name": "edge-after"})
    assert status == 201
    assert audit(c)[-1]["id"] == top + 1, audit(c)
    c.stop()
    # a bad value is refused at start
    bad = Controld(tmp, extra_args=["--audit-retention-days", "0"], name="bad")
    try:
        bad.start(timeout=5)
        raise AssertionError("controld started with --audit-retention-days 0")
    except AssertionError as e:
        assert "exited with status 2" in str(e), e


SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ROW = re.compile(r'\{\s*"(GET|POST|PUT|PATCH|DELETE)"\s*,\s*"(/[^"]*)"\s*,\s*AUTH_([A-Z]+)\s*,')


def route_rows():
    rows = set()
    for path in glob.glob(os.path.join(SRC, "controld", "api*.c")):
        with open(path, encoding="utf-8") as f:
            rows |= {(m.group(1), m.group(2), m.group(3).lower()) for m in ROW.finditer(f.read())}
    return rows


def test_openapi_document_matches_the_route_tables(tmp):
    with open(harness.OPENAPI, encoding="utf-8") as f:  # as built: the one controld serves
        doc = json.load(f)
    assert doc["openapi"].startswith("3.1"), doc["openapi"]
    in_doc = set()
    for tpl, item in doc["paths"].items():
        for method, op in item.items():
            # the table's "/ui*" serves /ui, /ui/ and every file under it
            pattern = "/ui*" if tpl.startswith("/ui") else re.sub(r"\{[^}]+\}", ":id", tpl)
            in_doc.add((method.upper(), pattern, op["x-cdnca-auth"]))
            assert op["responses"], (method, tpl)
            for name in re.findall(r"\{([^}]+)\}", tpl):  # every path parameter described
                assert any(p["name"] == name and p["in"] == "path"
                           for p in op.get("parameters", [])), (method, tpl, name)
    rows = route_rows()
    assert len(rows) >= 30, rows
    assert rows - in_doc == set(), "routes missing from controld/openapi.json (or with another " \
        "role): %s" % sorted(rows - in_doc)
    assert in_doc - rows == set(), "operations in controld/openapi.json that no route serves " \
        "(or with another role): %s" % sorted(in_doc - rows)

    c = Controld(tmp).start()
    status, served, headers = c.api("GET", "/v1/openapi.json", token=None)
    assert status == 200 and headers.get("Content-Type") == "application/json", (status, headers)
    assert served == doc
    c.stop()


def test_harness_refuses_what_the_document_lacks():
    doc = harness.openapi()
    # the answers the suite gets pass
    doc.check("GET", "/v1/summary", 200, "application/json", b"{}", {
        "sites": 1, "on_primary": 1, "on_backup": 0, "all_levels_unhealthy": 0,
        "failback_available": 0, "paused": 0, "nodes_online": 0, "nodes_lagging": 0})
    doc.check("GET", "/v1/no-such-route", 404, "application/json", b"{}",
              {"error": {"code": "not_found", "message": "no such route", "field": None}})
    bad = [("GET", "/v1/summary", 200, {"sites": 1}),                        # fields missing
           ("GET", "/v1/summary", 200, dict(json.loads(json.dumps({           # a field too many
               "sites": 1, "on_primary": 1, "on_backup": 0, "all_levels_unhealthy": 0,
               "failback_available": 0, "paused": 0, "nodes_online": 0, "nodes_lagging": 0,
               "extra": 1})))),
           ("GET", "/v1/summary", 418, {"error": {"code": "x", "message": "x", "field": None}}),
           ("GET", "/v1/no-such-route", 200, {}),                             # a route not there
           ("PUT", "/v1/summary", 200, {}),
           ("GET", "/v1/sites/1", 404, {"error": {"code": "not_found"}})]    # not an Error
    for method, path, status, body in bad:
        try:
            doc.check(method, path, status, "application/json", b"{}", body)
        except AssertionError:
            continue
        raise AssertionError("the check let through %s %s %s %r" % (method, path, status, body))
    # a route taken out of the document fails the check of its answer
    copy_doc = harness.OpenAPIDoc()
    copy_doc.doc = copy.deepcopy(copy_doc.doc)
    del copy_doc.doc["paths"]["/v1/summary"]
    copy_doc.routes = [(rx, tpl) for rx, tpl in copy_doc.routes if tpl != "/v1/summary"]
    try:
        copy_doc.check("GET", "/v1/summary", 200, "application/json", b"{}", {})
    except AssertionError as e:
        assert "not in controld/openapi.json" in str(e), e
    else:
        raise AssertionError("a route missing from the document passed the check")


if __name__ == "__main__":
    harness.main()
