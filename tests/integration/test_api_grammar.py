#!/usr/bin/env python3
"""test_api_grammar — secrets write-only below admin, and one grammar for every route
(docs/design.md#secrets, #query-parameters-and-lists, #safe-concurrent-edits; docs/api.md).

Secrets: a site's health-check header values and a webhook URL's userinfo and query come back
masked ("***") to read and operator tokens in lists, single records (cached or not), the status
card (also the switch's answer) and audit summaries, in full to admin; a PATCH that sends the masked value back keeps the stored secret.
Grammar: If-Match on the level switch (a stale tag is 412, nothing switched) and refused (400) on
a write without a revision; every route refuses a query parameter it does not take (400 naming
it) and the OpenAPI document lists exactly the ones it takes; deliveries page with after= to the
end; an Idempotency-Key is the token's own (another token's same key is no replay); two
Idempotency-Key headers are 400 and create nothing."""

import glob
import http.client
import json
import os
import re

import harness
from harness import Controld

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", "controld"))
ROW = re.compile(r'\{\s*"(GET|POST|PUT|PATCH|DELETE)"\s*,\s*"(/[^"]*)"\s*,\s*(AUTH_[A-Z]+)\s*,'
                 r'\s*\w+\s*,\s*(NULL|"[^"]*")\s*(?:,\s*\w+\s*)?\}')

SECRET = "s3cret-health-token"
HOOK_URL = "http://u:pw@127.0.0.1:9/h?k=v"  # short enough for the audit summary to show it
HOOK_MASKED = "http://***@127.0.0.1:9/h?***"


def make_token(c, name, role):
    status, tok, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
    assert status == 201, (status, tok)
    return tok["token"]


def secret_site(c, name="shop"):
    body = {"name": name, "hostnames": [name + ".example.com"],
            "health_check": {"path": "/healthz",
                             "headers": {"X-Health-Token": SECRET, "X-Env": "prod"}},
            "origins": [{"address": "10.0.0.1", "level": 1}, {"address": "10.0.0.2", "level": 2}]}
    status, site, _ = c.api("POST", "/v1/sites", body)
    assert status == 201, (status, site)
    assert site["health_check"]["headers"]["X-Health-Token"] == SECRET, site  # admin wrote it
    return site


def get(c, path, token):
    status, body, hdrs = c.api("GET", path, token=token)
    assert status == 200, (path, status, body)
    return body, hdrs


def test_read_and_operator_tokens_see_secrets_masked(tmp):
    c = Controld(tmp).start()
    site = secret_site(c)
    sid = site["id"]
    status, hook, _ = c.api("POST", "/v1/webhooks", {"url": HOOK_URL, "secret": "x" * 32})
    assert status == 201, (status, hook)
    tokens = {"read": make_token(c, "dash", "read"), "operator": make_token(c, "oncall", "operator")}
    # the admin's rendering first: a cached body must never reach a lower role
    body, _ = get(c, "/v1/sites/%d" % sid, harness.DEFAULT)
    assert body["health_check"]["headers"] == {"X-Health-Token": SECRET, "X-Env": "prod"}, body
    for role, tok in tokens.items():
        for _ in range(2):  # twice: the second read may come from the reply cache
            one, _ = get(c, "/v1/sites/%d" % sid, tok)
            assert one["health_check"]["headers"] == {"X-Health-Token": "***", "X-Env": "***"}, \
                (role, one)
            assert one["revision"] == site["revision"], one
        lst, _ = get(c, "/v1/sites", tok)
        assert lst["sites"][0]["health_check"]["headers"]["X-Health-Token"] == "***", (role, lst)
        hooks, _ = get(c, "/v1/webhooks", tok)
        assert [h["url"] for h in hooks["webhooks"]] == [HOOK_MASKED], (role, hooks)
        one_hook, _ = get(c, "/v1/webhooks/%d" % hook["id"], tok)
        assert one_hook["url"] == HOOK_MASKED, (role, one_hook)
        audit, _ = get(c, "/v1/audit?limit=100", tok)
        card, _ = get(c, "/v1/sites/%d/status" % sid, tok)
        assert card["health_check"]["headers"]["X-Health-Token"] == "***", (role, card)
        for path in ("/v1/sites/%d" % sid, "/v1/sites", "/v1/webhooks", "/v1/audit?limit=100",
                     "/v1/webhooks/%d" % hook["id"], "/v1/sites/%d/status" % sid):
            _, raw, _ = harness.http_call(harness.HOST, c.port, "GET", path,
                                          headers={"Authorization": "Bearer " + tok})
            text = json.dumps(raw)
            assert SECRET not in text and "u:pw" not in text and "k=v" not in text, (role, path)
        made = [a["summary"] for a in audit["audit"] if a["path"] == "/v1/webhooks"]
        assert made and "url=" + HOOK_MASKED in made[0], made
    # admin sees the values, also after the lower roles' reads
    body, _ = get(c, "/v1/sites/%d" % sid, harness.DEFAULT)
    assert body["health_check"]["headers"]["X-Health-Token"] == SECRET, body
    card, _ = get(c, "/v1/sites/%d/status" % sid, harness.DEFAULT)
    assert card["health_check"]["headers"]["X-Health-Token"] == SECRET, card
    # the operator's switch answers the card, masked
    status, card, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2},
                            token=tokens["operator"])
    assert status == 200 and card["health_check"]["headers"]["X-Health-Token"] == "***", card
    hooks, _ = get(c, "/v1/webhooks", harness.DEFAULT)
    assert hooks["webhooks"][0]["url"] == HOOK_URL, hooks
    # a site without secrets reads the same for every role
    status, plain, _ = c.api("POST", "/v1/sites", {"name": "plain",
                                                   "hostnames": ["plain.example.com"]})
    assert status == 201, plain
    a, _ = get(c, "/v1/sites/%d" % plain["id"], harness.DEFAULT)
    r, _ = get(c, "/v1/sites/%d" % plain["id"], tokens["read"])
    assert a == r, (a, r)


def test_patch_with_the_mask_keeps_the_secret(tmp):
    c = Controld(tmp).start()
    site = secret_site(c)
    sid = site["id"]
    read = make_token(c, "dash", "read")
    shown, _ = get(c, "/v1/sites/%d" % sid, read)
    hc = shown["health_check"]
    # what a client holding the masked record sends back: one value kept, one changed
    headers = dict(hc["headers"], **{"X-Env": "staging"})
    status, after, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {"headers": headers}})
    assert status == 200, (status, after)
    assert after["health_check"]["headers"] == {"X-Health-Token": SECRET, "X-Env": "staging"}, after
    stored = harness.db_query(c, "SELECT hc_options FROM sites WHERE id = %d" % sid)[0][0]
    assert SECRET in stored and "***" not in stored, stored
    # a new value replaces it; a header left out is gone
    status, after, _ = c.api("PATCH", "/v1/sites/%d" % sid,
                             {"health_check": {"headers": {"X-Health-Token": "new-one"}}})
    assert status == 200 and after["health_check"]["headers"] == {"X-Health-Token": "new-one"}, after


def test_switch_honours_if_match(tmp):
    c = Controld(tmp).start()
    site = secret_site(c)
    sid = site["id"]
    status, _, hdrs = c.api("GET", "/v1/sites/%d" % sid)
    stale = hdrs.get("ETag")
    assert stale == '"%d"' % site["revision"], stale
    status, _, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"failback": "manual"})
    assert status == 200
    op = make_token(c, "oncall", "operator")
    status, err, hdrs = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2}, token=op,
                              headers={"If-Match": stale})
    assert status == 412 and err["error"]["code"] == "precondition_failed", (status, err)
    card, _ = get(c, "/v1/sites/%d/status" % sid, op)
    assert card["current_level"] == 1, card  # nothing switched
    status, _, hdrs = c.api("GET", "/v1/sites/%d" % sid)
    status, card, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 2}, token=op,
                            headers={"If-Match": hdrs.get("ETag")})
    assert status == 200 and card["current_level"] == 2, (status, card)
    # a write without a revision refuses If-Match instead of ignoring it; nothing is created
    status, err, _ = c.api("POST", "/v1/sites", {"name": "b", "hostnames": ["b.example.com"]},
                           headers={"If-Match": '"1"'})
    assert status == 400 and err["error"]["code"] == "if_match_not_supported", (status, err)
    assert err["error"]["field"] == "If-Match", err
    status, err, _ = c.api("POST", "/v1/tokens", {"name": "t", "role": "read"},
                           headers={"If-Match": "*"})
    assert status == 400 and err["error"]["code"] == "if_match_not_supported", (status, err)
    lst, _ = get(c, "/v1/sites", harness.DEFAULT)
    assert [s["name"] for s in lst["sites"]] == ["shop"], lst
    toks, _ = get(c, "/v1/tokens", harness.DEFAULT)
    assert "t" not in [t["name"] for t in toks["tokens"]], toks


def route_rows():
    """[(method, pattern, auth, query list or None)] from controld/api*.c."""
    rows = []
    for path in sorted(glob.glob(os.path.join(SRC, "api*.c"))):
        with open(path, encoding="utf-8") as f:
            for m in ROW.finditer(f.read()):
                q = None if m.group(4) == "NULL" else m.group(4).strip('"')
                rows.append((m.group(1), m.group(2), m.group(3), q))
    return rows


def openapi_path(pattern):
    return re.sub(r"/:id", "/{id}", pattern)


def test_unknown_query_parameters_are_refused_everywhere(tmp):
    rows = route_rows()
    assert len(rows) > 40, rows
    # the OpenAPI document lists exactly the query parameters each route takes
    with open(os.path.join(SRC, "openapi.json"), encoding="utf-8") as f:
        doc = json.load(f)
    for method, pattern, _, q in rows:
        if pattern.endswith("*") or pattern == "/docs/api":
            continue
        want = openapi_path(pattern)
        found = [p for p in doc["paths"] if re.sub(r"\{[^}]+\}", "{id}", p) == want]
        assert len(found) == 1, (method, pattern, found)
        op = doc["paths"][found[0]][method.lower()]
        listed = sorted(p["name"] for p in op.get("parameters", []) if p.get("in") == "query")
        assert listed == sorted((q or "").split(",") if q else []), (method, pattern, listed, q)
    c = Controld(tmp).start()
    site = secret_site(c)
    status, hook, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/h",
                                                     "secret": "x" * 32})
    assert status == 201, hook
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201, node
    before, _ = get(c, "/v1/audit?limit=1000", harness.DEFAULT)
    for method, pattern, auth, q in rows:
        if q == "*":
            continue
        token = node["token"] if auth == "AUTH_NODE" else harness.DEFAULT
        path = pattern.replace(":id", "1").rstrip("*") + "?zz_unknown=1"
        if q:  # a parameter the route takes beside it changes nothing
            path += "&limit=5" if "limit" in q.split(",") else ""
        status, err, _ = c.api(method, path, {} if method in ("POST", "PATCH") else None,
                               token=token)
        assert status == 400, (method, path, status, err)
        assert err["error"]["code"] == "unknown_query_parameter", (method, path, err)
        assert err["error"]["field"] == "zz_unknown", (method, path, err)
    # the one the issue names: deliveries no longer take before=
    status, err, _ = c.api("GET", "/v1/webhooks/%d/deliveries?before=5" % hook["id"])
    assert status == 400 and err["error"]["field"] == "before", err
    # nothing was written by any of them
    after, _ = get(c, "/v1/audit?limit=1000", harness.DEFAULT)
    assert after == before, (before, after)
    lst, _ = get(c, "/v1/sites", harness.DEFAULT)
    assert [s["id"] for s in lst["sites"]] == [site["id"]], lst
    # the dashboard's files take any (cache busting)
    status, _, _ = c.api("GET", "/ui/?v=1", token=None)
    assert status == 200


def test_deliveries_page_with_after_to_the_end(tmp):
    c = Controld(tmp).start()
    status, hook, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/h",
                                                     "secret": "x" * 32})
    assert status == 201, hook
    made = []
    for _ in range(7):
        status, d, _ = c.api("POST", "/v1/webhooks/%d/test" % hook["id"])
        assert status == 202, d
        made.append(d["id"])
    seen, after, pages = [], None, 0
    while True:
        pages += 1
        assert pages <= 4, "paging with after= did not end"
        path = "/v1/webhooks/%d/deliveries?limit=3" % hook["id"]
        if after is not None:
            path += "&after=%d" % after
        page, _ = get(c, path, harness.DEFAULT)
        assert len(page["deliveries"]) <= 3, page
        seen += [d["id"] for d in page["deliveries"]]
        if page["next"] is None:
            break
        assert page["next"] == seen[-1], page
        after = page["next"]
    assert seen == sorted(made), (seen, made)  # oldest first, each once
    assert pages == 3, pages


def test_idempotency_keys_are_per_token(tmp):
    c = Controld(tmp).start()
    other = make_token(c, "ci", "admin")
    body = {"name": "shop", "hostnames": ["shop.example.com"]}
    key = {"Idempotency-Key": "create-shop"}
    status, first, hdrs = c.api("POST", "/v1/sites", body, headers=key)
    assert status == 201 and hdrs.get("Idempotent-Replayed") is None, first
    status, again, hdrs = c.api("POST", "/v1/sites", body, headers=key)
    assert status == 201 and again == first and hdrs.get("Idempotent-Replayed") == "true"
    # the same key from another token is that token's own request: no replay of the first answer
    status, err, hdrs = c.api("POST", "/v1/sites", body, headers=key, token=other)
    assert status == 409 and hdrs.get("Idempotent-Replayed") is None, (status, err)
    status, mine, hdrs = c.api("POST", "/v1/sites", {"name": "b", "hostnames": ["b.example.com"]},
                               headers=key, token=other)
    assert status == 201 and mine["name"] == "b" and hdrs.get("Idempotent-Replayed") is None, mine
    status, replay, hdrs = c.api("POST", "/v1/sites",
                                 {"name": "b", "hostnames": ["b.example.com"]},
                                 headers=key, token=other)
    assert status == 201 and replay == mine and hdrs.get("Idempotent-Replayed") == "true"


def test_two_idempotency_key_headers_are_refused(tmp):
    c = Controld(tmp).start()
    data = json.dumps({"name": "shop", "hostnames": ["shop.example.com"]}).encode()
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    try:
        conn.putrequest("POST", "/v1/sites")
        conn.putheader("Authorization", "Bearer " + c.admin_token)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(data)))
        conn.putheader("Idempotency-Key", "one")
        conn.putheader("Idempotency-Key", "two")
        conn.endheaders(data)
        resp = conn.getresponse()
        err = json.loads(resp.read())
        assert resp.status == 400, (resp.status, err)
    finally:
        conn.close()
    assert err["error"]["code"] == "duplicate_header", err
    assert err["error"]["field"] == "Idempotency-Key", err
    lst, _ = get(c, "/v1/sites", harness.DEFAULT)
    assert lst["sites"] == [], lst
    # one header is fine
    status, site, _ = c.api("POST", "/v1/sites", json.loads(data), headers={"Idempotency-Key": "one"})
    assert status == 201, site


if __name__ == "__main__":
    harness.main()
