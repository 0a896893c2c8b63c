#!/usr/bin/env python3
"""test_export — moving an installation to another database: controld --export FILE from a
populated controld on SQLite, controld --import FILE into a fresh database (SQLite, or
PostgreSQL on the PostgreSQL pass: the move the operations guide describes), and a controld on
the new database answers every API read as the old one did (same ids), a node keeps syncing
with its old token, a webhook's signatures still verify, API tokens still authenticate. A document that is
corrupt in any of several ways is refused with the JSON path named and nothing stored; an import
into a database that already holds a configuration is refused."""

import contextlib
import copy
import json
import os
import sqlite3
import stat
import subprocess

import harness
from harness import Controld, Noded, Origin, db_query, new_db, wait_until
from receiver import Receiver, verify_signature

SECRET = "webhook-secret-0123456789"
# one probe round at start and none after: the health engine does not move anything meanwhile
QUIET = ["--probe-interval-ms", "3600000"]


def ok(resp, want=200):
    status, body, _ = resp
    assert status == want, (status, body)
    return body


def cli(db, *args):
    """controld --db db ARGS... run to completion -> (exit code, stdout, stderr)."""
    p = subprocess.run([os.path.join(harness.BUILD, "controld", "controld"), "--db", db] +
                       list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def populate(c, origins, rx_url):
    """Sites with every kind of setting, nodes, tokens and a webhook; returns the secrets."""
    a, b, d = origins
    s1 = ok(c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test", "www.shop.test"], "failback": "manual",
        "failback_hold_ms": 60000,
        "health_check": {"enabled": True, "path": "/health", "timeout_ms": 2000,
                         "unhealthy_after": 4, "healthy_after": 3, "method": "HEAD",
                         "headers": {"X-Probe": "cdnca"}, "expected_codes": ["200-299"],
                         "interval_ms": 5000},
        "node_retry": {"retries": 1, "retry_on_status": [502, 504], "failure_ratio": 0.5},
        "origins": [{"level": 1, "address": a.address, "port": a.port, "scheme": "http"},
                    {"level": 2, "address": b.address, "port": b.port, "scheme": "http",
                     "host_header": "origin.shop.test", "weight": 5}]}), 201)
    gone = ok(c.api("POST", "/v1/sites", {"name": "gone", "hostnames": ["gone.test"]}), 201)
    s2 = ok(c.api("POST", "/v1/sites", {
        "name": "blog", "hostnames": ["blog.test"],
        "origins": [{"address": d.address, "port": d.port, "scheme": "http"}]}), 201)
    ok(c.api("DELETE", "/v1/sites/%d" % gone["id"]), 204)  # a gap in the ids
    # an origin added later and one disabled: blog's checks stay on but paused
    o3 = ok(c.api("POST", "/v1/sites/%d/origins" % s2["id"],
                  {"address": "origin3.blog.test", "level": 2}), 201)
    ok(c.api("PATCH", "/v1/sites/%d" % s2["id"], {"health_check": {"enabled": False}}))
    ok(c.api("PATCH", "/v1/sites/%d/origins/%d" % (s2["id"], o3["id"]), {"enabled": False}))
    # the operator's switch to level 2: level and pin are configuration, kept by the move
    ok(c.api("POST", "/v1/sites/%d/switch" % s1["id"], {"level": 2}))
    node = ok(c.api("POST", "/v1/nodes", {"name": "edge-1"}), 201)
    ok(c.api("POST", "/v1/nodes", {"name": "edge-2"}), 201)
    op = ok(c.api("POST", "/v1/tokens", {"name": "ci", "role": "operator"}), 201)
    ok(c.api("POST", "/v1/tokens", {"name": "dash", "role": "read",
                                    "expires_at": "2099-01-01T00:00:00Z"}), 201)
    hook = ok(c.api("POST", "/v1/webhooks", {"url": rx_url + "/hook", "secret": SECRET,
                                             "events": ["level.switched", "site.recovered"]}),
              201)
    return {"shop": s1["id"], "blog": s2["id"], "node": node, "operator": op["token"],
            "hook": hook["id"]}


def snapshot(c):
    """Every API-visible object, without what is runtime state (health, presence)."""
    sites = ok(c.api("GET", "/v1/sites?limit=1000"))["sites"]
    out = {"sites": [], "site": {}, "nodes": [], "tokens": None, "webhooks": None}
    for s in sites:
        one = ok(c.api("GET", "/v1/sites/%d" % s["id"]))
        for x in (s, one):
            for o in x["origins"]:
                o.pop("health")
        out["sites"].append(s)
        out["site"][s["id"]] = one
    for n in ok(c.api("GET", "/v1/nodes"))["nodes"]:
        out["nodes"].append({k: n[k] for k in ("id", "name", "created_at")})
    out["tokens"] = ok(c.api("GET", "/v1/tokens"))
    out["webhooks"] = ok(c.api("GET", "/v1/webhooks"))
    out["hooks"] = {w["id"]: ok(c.api("GET", "/v1/webhooks/%d" % w["id"]))
                    for w in out["webhooks"]["webhooks"]}
    summary = ok(c.api("GET", "/v1/summary"))
    out["summary"] = {k: v for k, v in summary.items() if not k.startswith("nodes")}
    return out


def differences(a, b, path=""):
    """The paths where a and b differ, with both values (a failure message that names them)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), "%s/%s" % (path, k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, "%s[%d]" % (path, i))
        return out
    return [] if a == b else ["%s: %r != %r" % (path or "/", a, b)]


def node_status(n):
    return ok(n.admin("GET", "/status", timeout=5))


def node_site(n, site_id):
    for s in node_status(n).get("sites", []):
        if s.get("id") == site_id:
            return s
    return None


def test_move_keeps_everything(tmp):
    rx = Receiver().start()
    origins = [Origin(x, tmpdir=tmp).start() for x in ("a", "b", "d")]
    old = Controld(tmp, name="old", extra_args=QUIET)
    # the source is SQLite on both passes: moving off SQLite is what this test is about
    old.db = os.path.join(tmp, "old.db")
    old.start()
    sec = populate(old, origins, rx.url)
    n = Noded(old, sec["node"]["token"], tmp,
              extra_args=["--heartbeat-interval-ms", "500", "--config-wait-ms", "1000"]).start()
    wait_until(lambda: node_site(n, sec["shop"]), 20, "the node has the first config")
    before = snapshot(old)
    assert before["site"][sec["shop"]]["current_level"] == 2, before["site"][sec["shop"]]
    old.stop()

    doc = os.path.join(tmp, "export.json")
    rc, out, err = cli(old.db, "--export", doc)
    assert rc == 0, (out, err)
    assert "2 sites, 4 origins, 2 nodes, 3 API tokens, 1 webhooks" in out, out
    assert stat.S_IMODE(os.stat(doc).st_mode) == 0o600
    with open(doc) as f:
        text = f.read()
    j = json.loads(text)
    assert j["format"] == "cdnca-export" and j["version"] == 1, j
    # token hashes only: no secret a client or node presents is in the document
    for secret in (sec["node"]["token"], sec["operator"], old.admin_token):
        assert secret not in text
    assert SECRET in text  # the webhook's secret is: signatures must keep verifying

    target = new_db(tmp, "new")
    rc, out, err = cli(target, "--import", doc)
    assert rc == 0, (out, err)
    assert "imported from" in out and "2 sites, 4 origins" in out, out

    # the new controld takes the old one's address; the node is not touched
    new = Controld(tmp, name="new", extra_args=QUIET, admin_token=old.admin_token, db=target)
    new.port, new.url = old.port, old.url
    # the fleet view's state came with the import, before any engine looks at a site: the
    # summary's counts are right from the new controld's first answer
    flags = ("SELECT id, state_on_backup, state_all_down, state_failback_available, state_paused "
             "FROM sites ORDER BY id")
    with contextlib.closing(sqlite3.connect(old.db)) as con:
        want = con.execute(flags).fetchall()
    assert [r[1] for r in want] == [1, 0], want  # shop on its backup level, blog on its primary
    got = db_query(new, flags)
    assert got == want, (got, want)
    new.start()
    after = snapshot(new)
    assert after == before, differences(before, after)[:40]

    # the API token created on the old controld authenticates on the new one, with its role
    ok(new.api("GET", "/v1/sites", token=sec["operator"]))
    st, body, _ = new.api("DELETE", "/v1/sites/%d" % sec["blog"], token=sec["operator"])
    assert st == 403, (st, body)

    # the node, still running with its old token, syncs from the new controld
    st, body, _ = new.api("GET", "/v1/node/config?since=0&wait_ms=0", token=sec["node"]["token"])
    assert st == 200, (st, body)
    ok(new.api("PATCH", "/v1/sites/%d" % sec["blog"], {"name": "blog-moved"}))
    wait_until(lambda: (node_site(n, sec["blog"]) or {}).get("name") == "blog-moved", 30,
               "the node takes a change from the new controld")
    assert node_status(n)["seq"] > j["publication_seq"], node_status(n)
    wait_until(lambda: any(x["id"] == sec["node"]["id"] and x["online"]
                           for x in ok(new.api("GET", "/v1/nodes"))["nodes"]), 20,
               "the node's heartbeats reach the new controld")
    st, body, _ = n.visit("GET", "/after-move", "shop.test", timeout=10)
    assert st == 200, (st, body)

    # the webhook's secret came along: a delivery from the new controld verifies
    ok(new.api("POST", "/v1/webhooks/%d/test" % sec["hook"]), 202)
    req = wait_until(lambda: rx.snapshot()[-1] if rx.snapshot() else None, 20, "a delivery")
    assert verify_signature(SECRET, req), req.headers

    # a site created after the move does not clash with an imported id
    s = ok(new.api("POST", "/v1/sites", {"name": "later", "hostnames": ["later.test"]}), 201)
    assert s["id"] > max(before["site"]), s
    rx.stop()


def corrupt(doc, fn):
    d = copy.deepcopy(doc)
    fn(d)
    return d


def test_bad_documents_change_nothing(tmp):
    rx = Receiver().start()
    origins = [Origin(x, tmpdir=tmp).start() for x in ("a", "b", "d")]
    old = Controld(tmp, name="old", extra_args=QUIET)
    old.db = os.path.join(tmp, "old.db")  # documents from a SQLite installation, as in a move
    old.start()
    populate(old, origins, rx.url)
    old.stop()
    good = os.path.join(tmp, "good.json")
    rc, out, err = cli(old.db, "--export", good)
    assert rc == 0, err
    with open(good) as f:
        doc = json.load(f)

    def set_(path, value):
        def fn(d):
            cur = d
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] = value
        return fn

    cases = [
        ("format", set_(["format"], "something-else")),
        ("version", set_(["version"], 2)),
        ("sites[0].origins[1].port", set_(["sites", 0, "origins", 1, "port"], 70000)),
        ("sites[0].colour", set_(["sites", 0, "colour"], "red")),
        ("sites[1].hostnames[0]", set_(["sites", 1, "hostnames"], ["shop.test"])),
        ("sites[1].id", set_(["sites", 1, "id"], doc["sites"][0]["id"])),
        ("sites[0].health_check.enabled", lambda d: d["sites"][0]["health_check"].pop("enabled")),
        ("sites[0].current_level", set_(["sites", 0, "current_level"], 17)),
        ("nodes[0].token_sha256", set_(["nodes", 0, "token_sha256"], "a-plaintext-token")),
        ("nodes[1].name", set_(["nodes", 1, "name"], doc["nodes"][0]["name"])),
        ("tokens[1].role", set_(["tokens", 1, "role"], "root")),
        ("webhooks[0].events[0]", set_(["webhooks", 0, "events"], ["no.such.event"])),
        ("webhooks[0].url", set_(["webhooks", 0, "url"], "ftp://example.com/")),
        ("webhooks[0].secret", set_(["webhooks", 0, "secret"], "short")),
        # what the API refuses as a target (cloud metadata) is refused here too
        ("webhooks[0].url", set_(["webhooks", 0, "url"], "http://169.254.169.254/latest")),
        ("sites[1].origins[0].address",
         set_(["sites", 1, "origins", 0, "address"], "169.254.169.254")),
    ]
    target = new_db(tmp, "target")
    for i, (path, fn) in enumerate(cases):
        f = os.path.join(tmp, "bad%d.json" % i)
        with open(f, "w") as fh:
            json.dump(corrupt(doc, fn), fh)
        rc, out, err = cli(target, "--import", f)
        assert rc == 1, (path, out, err)
        assert ("refused at %s:" % path) in err and "nothing was imported" in err, (path, err)
    # not JSON at all, and JSON cut short
    f = os.path.join(tmp, "cut.json")
    with open(good) as src, open(f, "w") as dst:
        dst.write(src.read()[:500])
    rc, out, err = cli(target, "--import", f)
    assert rc == 1 and "not valid JSON" in err, err
    # every refusal left the database empty: the good document is accepted afterwards
    rc, out, err = cli(target, "--import", good)
    assert rc == 0, (out, err)
    # ... and now it holds a configuration: a second import is refused and changes nothing
    rc, out, err = cli(target, "--import", good)
    assert rc == 1 and "already holds sites" in err and "empty database" in err, err
    c = Controld(tmp, name="target", extra_args=QUIET, admin_token=old.admin_token,
                 db=target).start()
    sites = ok(c.api("GET", "/v1/sites"))["sites"]
    assert sorted(s["name"] for s in sites) == ["blog", "shop"], sites
    rx.stop()


def test_target_with_only_its_bootstrap_token(tmp):
    """A database a controld has started on once (it holds the bootstrap admin token and nothing
    else) takes an import; one with a site does not; --export of a missing file creates none."""
    src = Controld(tmp, name="src", extra_args=QUIET + ["--webhook-retry-ms", "3600000"]).start()
    ok(src.api("POST", "/v1/sites", {"name": "one", "hostnames": ["one.test"]}), 201)
    # a delivery that cannot be made (nothing listens there) stays pending in the outbox
    hook = ok(src.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:1/none",
                                               "secret": SECRET}), 201)
    ok(src.api("POST", "/v1/webhooks/%d/test" % hook["id"]), 202)
    src.stop()
    doc = os.path.join(tmp, "x.json")
    rc, out, err = cli(src.db, "--export", doc)
    assert rc == 0, err
    # the export says what it leaves behind
    assert "1 webhook deliveries still pending in the outbox are not exported" in out, out
    fresh = Controld(tmp, name="fresh", extra_args=QUIET).start()
    fresh.stop()
    rc, out, err = cli(fresh.db, "--import", doc)
    assert rc == 0, (out, err)
    # the imported bootstrap token replaced the target's: src's admin token works there
    c = Controld(tmp, name="fresh", extra_args=QUIET, db=fresh.db, admin_token=src.admin_token)
    c.pass_admin_token = False
    c.start()
    assert [s["name"] for s in ok(c.api("GET", "/v1/sites"))["sites"]] == ["one"]
    c.stop()
    used = Controld(tmp, name="used", extra_args=QUIET).start()
    ok(used.api("POST", "/v1/sites", {"name": "mine", "hostnames": ["mine.test"]}), 201)
    used.stop()
    rc, out, err = cli(used.db, "--import", doc)
    assert rc == 1 and "already holds sites" in err, err
    missing = os.path.join(tmp, "typo.db")
    rc, out, err = cli(missing, "--export", os.path.join(tmp, "y.json"))
    assert rc == 1 and "no database" in err, err
    assert not os.path.exists(missing)
    rc, out, err = cli(src.db, "--export")
    assert rc == 2 and "needs a FILE" in err, err
    # a database that cannot be reached: refused, said so
    rc, out, err = cli("host=%s dbname=nowhere connect_timeout=2" % os.path.join(tmp, "no-pg"),
                       "--import", doc)
    assert rc == 1 and "cannot open the database" in err, err


if __name__ == "__main__":
    harness.main()
