#!/usr/bin/env python3
"""test_auth_matrix — every route of controld against every kind of credential (docs/design.md#tokens-and-roles, docs/design.md#node-protocol).

The routes are read from the route tables in controld/api*.c at test time (the
`{"METHOD", "/pattern", AUTH_...` rows), so a new route is covered as soon as it is written.
Each ":id" takes the id of an existing record of the resource named by the segment before it.

For routes that take an API token (AUTH_READ, AUTH_OPERATOR, AUTH_ADMIN: the least role they
take) and AUTH_NODE routes: no Authorization header -> 401, an unknown token -> 401, malformed
headers -> 401, the other kind of token -> 403 forbidden (a node token on an API route, the admin
token on a node route). AUTH_NONE routes answer without a token (and ignore a bad one);
POST /v1/node/enrol, whose credential is the enrolment key in its body
(docs/design.md#enrolment-keys), answers an empty body 422 whatever the header says.
The role matrix: a read, an operator and an admin token against every API route: a role below
the route's is 403 forbidden_role, a role at or above it gets past the check.
After all the rejected calls the stored state (sites, origins, nodes, webhooks) is unchanged.
"""

import glob
import os
import re

import harness
from harness import Controld

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", "controld"))
ROW = re.compile(r'\{\s*"(GET|POST|PUT|PATCH|DELETE)"\s*,\s*"(/[^"]*)"\s*,\s*(AUTH_[A-Z]+)\s*,')
# segment before ":id" -> key of the ids dict
RESOURCE = {"sites": "site", "origins": "origin", "nodes": "node", "webhooks": "webhook",
            "tokens": "token", "enrolment-keys": "enrolment_key"}
# AUTH_NONE routes under /v1/node/: the credential is in the body (an empty body: 422)
NODE_OPEN = {"/v1/node/enrol"}
ROLES = ["AUTH_READ", "AUTH_OPERATOR", "AUTH_ADMIN"]  # increasing power
ROLE_OF = {"AUTH_READ": "read", "AUTH_OPERATOR": "operator", "AUTH_ADMIN": "admin"}


def route_rows():
    """[(method, pattern, auth, file)] from controld/api*.c, in file order."""
    rows = []
    for path in sorted(glob.glob(os.path.join(SRC, "api*.c"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in ROW.finditer(text):
            rows.append((m.group(1), m.group(2), m.group(3), os.path.basename(path)))
    return rows


def concrete(pattern, ids):
    """The pattern with each ":id" replaced by an existing id and a final "*" by nothing."""
    segs = pattern.split("/")
    out = []
    for i, s in enumerate(segs):
        if s == ":id":
            res = RESOURCE.get(segs[i - 1]) if i > 0 else None
            out.append(str(ids.get(res, 1)))
        else:
            out.append(s)
    path = "/".join(out)
    if path.endswith("*"):
        path = path[:-1]
    return path


def setup_records(c):
    """A site with two origins, a node, and a webhook when that route exists; returns (ids, token)."""
    status, site, _ = c.api("POST", "/v1/sites", {
        "name": "authm", "hostnames": ["authm.example.com"],
        "origins": [{"address": "10.0.0.1"}, {"address": "10.0.0.2", "level": 2}]})
    assert status == 201, (status, site)
    ids = {"site": site["id"], "origin": site["origins"][1]["id"]}
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-authm"})
    assert status == 201, (status, node)
    ids["node"] = node["id"]
    status, hook, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/hook",
                                                     "secret": "s3cret-for-the-test"})
    if status == 201:
        ids["webhook"] = hook["id"]
    else:
        # no webhook route (or it refuses this body): ids of nothing still exercise auth
        assert status in (404, 405, 422), (status, hook)
    return ids, node["token"]


def snapshot(c, ids):
    """Everything stored that the rejected calls could have touched."""
    snap = {}
    for key, path in (("sites", "/v1/sites?limit=1000"), ("site", "/v1/sites/%d" % ids["site"]),
                      ("webhooks", "/v1/webhooks")):
        status, body, _ = c.api("GET", path)
        if key == "webhooks" and status == 404:
            continue
        assert status == 200, (path, status, body)
        snap[key] = body
    status, nodes, _ = c.api("GET", "/v1/nodes")
    assert status == 200, (status, nodes)
    # presence fields move on their own; identity must not
    snap["nodes"] = sorted((n["id"], n["name"]) for n in nodes["nodes"])
    return snap


def call(c, method, path, auth_header):
    """One request with the given raw Authorization value (None = no header)."""
    headers = {}
    if auth_header is not None:
        headers["Authorization"] = auth_header
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return c.api(method, path, body=body, token=None, headers=headers, timeout=20)


def expect(results, what, status, body, want, code=None):
    ok = status == want
    if ok and want in (401, 403):
        code = code or ("unauthorized" if want == 401 else "forbidden")
        ok = (isinstance(body, dict) and isinstance(body.get("error"), dict)
              and body["error"].get("code") == code)
    if not ok:
        results.append("%s: got %s %r, want %s %s" % (what, status, body, want, code or ""))


def test_routes_are_found():
    rows = route_rows()
    kinds = {a for _, _, a, _ in rows}
    assert len(rows) >= 20, rows
    assert {"AUTH_NONE", "AUTH_NODE"} | set(ROLES) <= kinds, kinds
    for method, pattern, auth, fname in rows:
        if pattern in NODE_OPEN:
            assert auth == "AUTH_NONE", (method, pattern, auth, fname)
        elif pattern.startswith("/v1/node/"):
            assert auth == "AUTH_NODE", (method, pattern, auth, fname)
        elif pattern == "/v1/openapi.json":
            assert auth == "AUTH_NONE", (method, pattern, auth, fname)
        elif pattern.startswith("/v1/"):
            assert auth in ROLES, (method, pattern, auth, fname)
            if method != "GET":  # read tokens only read
                assert auth != "AUTH_READ", (method, pattern, auth, fname)
        else:
            assert auth == "AUTH_NONE", (method, pattern, auth, fname)


def test_matrix(tmp):
    c = Controld(tmp).start()
    ids, node_token = setup_records(c)
    before = snapshot(c, ids)
    admin = c.admin_token
    bad = []
    malformed = ["Basic x", "Basic " + admin, "Bearer", "Bearer ", "Bearer  ", admin,
                 "Token " + admin, "Bearer " + admin + "x", "Bearer x" + admin,
                 "Bearer " + admin[:-1], "Bearer " + "a" * 5000, "Bearer " + node_token + " x"]
    rows = route_rows()
    checked = 0
    for method, pattern, auth, fname in rows:
        path = concrete(pattern, ids)
        what = "%s %s (%s, %s)" % (method, path, auth, fname)
        if auth == "AUTH_NONE":
            paths = [path] if not pattern.endswith("*") else [path + "/", path + "/index.html"]
            for p in paths:
                for hdr in (None, "Bearer unknown-token", "Basic x", "Bearer " + admin):
                    status, body, _ = call(c, method, p, hdr)
                    if pattern in NODE_OPEN:
                        if status != 422:
                            bad.append("%s with %r: got %s %r, want 422 (no key in the body)"
                                       % (what, hdr, status, body))
                    elif status >= 400:
                        bad.append("%s with %r: got %s %r, want it served without a token"
                                   % (what.replace(path, p), hdr, status, body))
            checked += 1
            continue
        # the route must be served at all (a table missing from api_tables answers 404)
        status, body, _ = call(c, method, path, None)
        if status == 404 or status == 405:
            bad.append("%s: not served (%s %r): is its table in api_tables?" % (what, status, body))
            continue
        expect(bad, what + " without Authorization", status, body, 401)
        status, body, _ = call(c, method, path, "Bearer unknown-" + admin)
        expect(bad, what + " with an unknown token", status, body, 401)
        for hdr in malformed:
            status, body, _ = call(c, method, path, hdr)
            expect(bad, "%s with Authorization %r" % (what, hdr[:40]), status, body, 401)
        if auth in ROLES:
            status, body, _ = call(c, method, path, "Bearer " + node_token)
            expect(bad, what + " with a node token", status, body, 403)
            if method == "GET":  # the positive control, where it changes nothing
                status, body, _ = call(c, method, path, "Bearer " + admin)
                if status in (401, 403):
                    bad.append("%s: the admin token is refused (%s %r)" % (what, status, body))
        else:
            status, body, _ = call(c, method, path, "Bearer " + admin)
            expect(bad, what + " with the admin token", status, body, 403)
        checked += 1
    after = snapshot(c, ids)
    assert not bad, "%d of the auth checks failed:\n  %s" % (len(bad), "\n  ".join(bad))
    assert checked == len(rows), (checked, len(rows))
    assert after == before, "rejected calls changed stored data:\nbefore %r\nafter  %r" % (
        before, after)


def missing(pattern):
    """The pattern with every ":id" an id that does not exist (the role check comes first)."""
    return concrete(pattern, {}).replace("/1", "/999999")


def test_role_matrix(tmp):
    c = Controld(tmp).start()
    ids, node_token = setup_records(c)
    tokens = {}
    for role in ("read", "operator", "admin"):
        status, tok, _ = c.api("POST", "/v1/tokens", {"name": "matrix-" + role, "role": role})
        assert status == 201, (status, tok)
        tokens[role] = tok["token"]
    ids["token"] = tok["id"]
    before = snapshot(c, ids)
    bad = []
    checked = 0
    for method, pattern, auth, fname in route_rows():
        if auth not in ROLES:
            continue
        need = ROLES.index(auth)
        for have, role in enumerate(("read", "operator", "admin")):
            what = "%s %s (%s, %s) with a %s token" % (method, pattern, auth, fname, role)
            if have < need:
                # refused on the real records: were it let through, the snapshot would show it
                status, body, _ = call(c, method, concrete(pattern, ids), "Bearer " + tokens[role])
                expect(bad, what, status, body, 403, "forbidden_role")
            else:
                # allowed: records that do not exist, or an empty body, so nothing changes
                path = missing(pattern) if ":id" in pattern else concrete(pattern, ids)
                status, body, _ = call(c, method, path, "Bearer " + tokens[role])
                if status in (401, 403) or status >= 500:
                    bad.append("%s: got %s %r, want it past the role check" % (what, status, body))
            checked += 1
    after = snapshot(c, ids)
    assert not bad, "%d of the role checks failed:\n  %s" % (len(bad), "\n  ".join(bad))
    assert checked >= 3 * 25, checked
    assert after == before, "refused calls changed stored data:\nbefore %r\nafter  %r" % (
        before, after)

    # an operator may switch levels and change the origin keys the served document marks
    # x-cdnca-auth "operator" (the field table's FIELD_OPERATOR rows: enabled), nothing else
    site, origin = ids["site"], ids["origin"]
    op = "Bearer " + tokens["operator"]
    status, doc, _ = c.api("GET", "/v1/openapi.json", token=None)
    assert status == 200, status
    props = doc["components"]["schemas"]["OriginInput"]["properties"]
    mine = sorted(k for k, v in props.items() if v.get("x-cdnca-auth") == "operator")
    assert mine == ["enabled"], mine  # docs/api.md, "API for teams", names each
    status, o, _ = c.api("GET", "/v1/sites/%d" % site)
    o = next(x for x in o["origins"] if x["id"] == origin)
    valid = {"level": 1, "address": "10.9.9.9", "port": 8443, "scheme": "https",
             "host_header": "h.example", "weight": 3, "description": "d"}
    assert set(valid) == set(props) - set(mine), sorted(props)  # a new key needs a value here
    for key in valid:
        for body in ({key: valid[key]}, dict({key: valid[key]}, **{m: o[m] for m in mine})):
            status, err, _ = call_body(c, "PATCH", "/v1/sites/%d/origins/%d" % (site, origin),
                                       op, body)
            assert status == 403 and err["error"]["code"] == "forbidden_role", (body, status, err)
            assert err["error"]["field"] == key, err
            assert "enabled" in err["error"]["message"], err
    assert snapshot(c, ids) == before
    status, o, _ = call_body(c, "PATCH", "/v1/sites/%d/origins/%d" % (site, origin), op,
                             {"enabled": False})
    assert status == 200 and o["enabled"] is False, (status, o)
    status, card, _ = call_body(c, "POST", "/v1/sites/%d/switch" % site, op, {"level": 1})
    assert status == 200, (status, card)
    status, err, _ = call_body(c, "PATCH", "/v1/sites/%d" % site, op, {"failback": "manual"})
    assert status == 403 and err["error"]["code"] == "forbidden_role", (status, err)
    # read: every GET, no write
    rd = "Bearer " + tokens["read"]
    status, body, _ = call_body(c, "GET", "/v1/sites/%d/status" % site, rd, None)
    assert status == 200, (status, body)
    status, err, _ = call_body(c, "POST", "/v1/sites/%d/switch" % site, rd, {"level": 2})
    assert status == 403 and err["error"]["code"] == "forbidden_role", (status, err)
    assert "read" in err["error"]["message"], err


def call_body(c, method, path, auth_header, body):
    return c.api(method, path, body=body, token=None, headers={"Authorization": auth_header},
                 timeout=20)


def test_revoked_node_token(tmp):
    c = Controld(tmp).start()
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-gone"})
    assert status == 201, node
    status, _, _ = c.api("POST", "/v1/node/heartbeat",
                         {"version": "0.1.0", "config_version": 0}, token=node["token"])
    assert status == 204, status
    status, _, _ = c.api("DELETE", "/v1/nodes/%d" % node["id"])
    assert status == 204, status
    for method, path in (("POST", "/v1/node/heartbeat"), ("GET", "/v1/node/config?wait_ms=0"),
                         ("GET", "/v1/sites")):
        status, body, _ = call(c, method, path, "Bearer " + node["token"])
        assert status == 401, (method, path, status, body)
        assert body["error"]["code"] == "unauthorized", body


if __name__ == "__main__":
    harness.main()
