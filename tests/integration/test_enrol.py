#!/usr/bin/env python3
"""test_enrol — enrolment keys end to end (docs/design.md#enrolment-keys).

The admin routes with bad input and the roles that may not call them; POST /v1/node/enrol with
an expired, used-up, revoked or unknown key (one 401 enrolment_key_invalid, nothing stored, no
audit record), a taken name (409, no use counted); 16 noded processes started at once with one
key of max_uses 10 (exactly 10 enrolled, the other 6 exit with status 3); a noded restarted
after enrolment without the key; the token file's mode; one audit record per use.
"""

import http.client
import json
import os
import stat
import subprocess
import time

import harness
from harness import Controld, Noded, db_query, wait_until

INVALID = "enrolment_key_invalid"


def make_key(c, name, **kw):
    body = {"name": name}
    body.update(kw)
    status, k, _ = c.api("POST", "/v1/enrolment-keys", body)
    assert status == 201, (status, k)
    assert len(k["key"]) == 64 and k["uses"] == 0 and k["state"] == "active", k
    return k


def enrol(c, key, name):
    return c.api("POST", "/v1/node/enrol", {"key": key, "name": name}, token=None)


def node_names(c):
    status, body, _ = c.api("GET", "/v1/nodes")
    assert status == 200, (status, body)
    return sorted(n["name"] for n in body["nodes"])


def enrol_audits(c):
    status, body, _ = c.api("GET", "/v1/audit?limit=1000")
    assert status == 200, (status, body)
    return [a for a in body["audit"] if a["path"] == "/v1/node/enrol"]


def key_by_id(c, kid):
    status, body, _ = c.api("GET", "/v1/enrolment-keys")
    assert status == 200, (status, body)
    for k in body["enrolment_keys"]:
        assert "key" not in k, k  # never the secret
        if k["id"] == kid:
            return k
    raise AssertionError("key %d not listed: %r" % (kid, body))


def test_admin_routes_and_bad_input(tmp):
    c = Controld(tmp).start()
    k = make_key(c, "fleet", expires_at="2999-01-01T00:00:00Z", max_uses=3)
    assert k["expires_at"] == "2999-01-01T00:00:00Z" and k["max_uses"] == 3, k
    unlimited = make_key(c, "forever", expires_at=None, max_uses=None)
    assert unlimited["expires_at"] is None and unlimited["max_uses"] is None, unlimited
    bad = [
        ({}, 422, "required", "name"),
        ({"name": "a b"}, 422, "invalid_value", "name"),
        ({"name": "x" * 65}, 422, "too_long", "name"),
        ({"name": "fleet"}, 409, "conflict", "name"),
        ({"name": "k2", "role": "admin"}, 400, "unknown_field", "role"),
        ({"name": "k2", "max_uses": 0}, 422, "out_of_range", "max_uses"),
        ({"name": "k2", "max_uses": -1}, 422, "out_of_range", "max_uses"),
        ({"name": "k2", "max_uses": 1.5}, 422, "out_of_range", "max_uses"),
        ({"name": "k2", "max_uses": "5"}, 422, "invalid_type", "max_uses"),
        ({"name": "k2", "expires_at": "soon"}, 422, "invalid_value", "expires_at"),
        ({"name": "k2", "expires_at": "2001-01-01T00:00:00Z"}, 422, "invalid_value", "expires_at"),
        ({"name": "k2", "expires_at": 5}, 422, "invalid_type", "expires_at"),
    ]
    for body, want, code, field in bad:
        status, err, _ = c.api("POST", "/v1/enrolment-keys", body)
        assert status == want and err["error"]["code"] == code, (body, status, err)
        assert err["error"]["field"] == field, (body, err)
    status, err, _ = c.api("POST", "/v1/enrolment-keys", raw=b'{"name": "k3",')
    assert status == 400, (status, err)
    status, body, _ = c.api("GET", "/v1/enrolment-keys")
    assert [x["name"] for x in body["enrolment_keys"]] == ["fleet", "forever"], body
    # an Idempotency-Key replay does not show the secret again
    hdr = {"Idempotency-Key": "mk-1"}
    status, first, _ = c.api("POST", "/v1/enrolment-keys", {"name": "idem"}, headers=hdr)
    assert status == 201 and first["key"], (status, first)
    status, again, h = c.api("POST", "/v1/enrolment-keys", {"name": "idem"}, headers=hdr)
    assert status == 201 and again["key"] is None and again["id"] == first["id"], again
    # revoke: 204, then listed as revoked with its time; an unknown id is 404
    status, _, _ = c.api("DELETE", "/v1/enrolment-keys/%d" % k["id"])
    assert status == 204
    listed = key_by_id(c, k["id"])
    assert listed["state"] == "revoked" and listed["revoked_at"], listed
    status, err, _ = c.api("DELETE", "/v1/enrolment-keys/999999")
    assert status == 404, (status, err)
    # read and operator tokens: 403 on every admin route
    for role in ("read", "operator"):
        status, tok, _ = c.api("POST", "/v1/tokens", {"name": "t-" + role, "role": role})
        assert status == 201, tok
        for method, path, body in (("GET", "/v1/enrolment-keys", None),
                                   ("POST", "/v1/enrolment-keys", {"name": "nope"}),
                                   ("DELETE", "/v1/enrolment-keys/%d" % unlimited["id"], None)):
            status, err, _ = c.api(method, path, body, token=tok["token"])
            assert status == 403 and err["error"]["code"] == "forbidden_role", (role, path, err)
    assert key_by_id(c, unlimited["id"])["state"] == "active"
    # no token at all is 401; a node token is the wrong kind
    status, _, _ = c.api("GET", "/v1/enrolment-keys", token=None)
    assert status == 401


def test_refused_keys_store_nothing(tmp):
    c = Controld(tmp).start()
    expired = make_key(c, "expired")
    db_query(c, "UPDATE enrolment_keys SET expires_at = 1 WHERE id = %d" % expired["id"])
    used = make_key(c, "used", max_uses=1)
    status, n, _ = enrol(c, used["key"], "first")
    assert status == 201 and n["token"] and n["name"] == "first", (status, n)
    assert n["enrolment_key"] == {"id": used["id"], "name": "used"}, n
    revoked = make_key(c, "revoked")
    assert c.api("DELETE", "/v1/enrolment-keys/%d" % revoked["id"])[0] == 204
    assert key_by_id(c, expired["id"])["state"] == "expired"
    assert key_by_id(c, used["id"])["state"] == "used_up"
    before = (node_names(c), len(enrol_audits(c)))
    answers = set()
    wrong = "0" * 64
    for key in (expired["key"], used["key"], revoked["key"], wrong, "x", used["key"].upper()):
        status, err, _ = enrol(c, key, "intruder")
        assert status == 401, (key[:8], status, err)
        assert err["error"]["code"] == INVALID, err
        answers.add((err["error"]["message"], err["error"]["field"]))
    assert len(answers) == 1, answers  # the same answer whatever the key was
    # an admin token is no key (the route takes none, and ignores one)
    status, err, _ = c.api("POST", "/v1/node/enrol", {"key": c.admin_token, "name": "intruder"})
    assert status == 401 and err["error"]["code"] == INVALID, err
    assert (node_names(c), len(enrol_audits(c))) == before
    for kid in (expired["id"], revoked["id"]):
        assert key_by_id(c, kid)["uses"] == 0
    assert key_by_id(c, used["id"])["uses"] == 1
    # bad bodies: 400 / 422 naming the field, before any key is looked at
    live = make_key(c, "live", max_uses=5)
    for body, want, field in (({"name": "a"}, 422, "key"), ({"key": live["key"]}, 422, "name"),
                              ({"key": live["key"], "name": "a b"}, 422, "name"),
                              ({"key": 5, "name": "a"}, 422, "key"),
                              ({"key": "k" * 300, "name": "a"}, 422, "key"),
                              ({"key": live["key"], "name": "a", "role": "admin"}, 400, "role")):
        status, err, _ = c.api("POST", "/v1/node/enrol", body, token=None)
        assert status == want and err["error"]["field"] == field, (body, status, err)
    # anyone may call the route: it takes 4 KiB of body, announced or sent chunked, not 1 MiB
    big = json.dumps({"key": live["key"], "name": "a", "pad": "p" * 5000})
    status, err, _ = c.api("POST", "/v1/node/enrol", raw=big.encode(), token=None)
    assert status == 413 and err["error"]["code"] == "payload_too_large", (status, err)
    assert "4096" in err["error"]["message"], err
    conn = http.client.HTTPConnection(harness.HOST, c.port, timeout=30)
    try:
        conn.putrequest("POST", "/v1/node/enrol")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        part = big.encode()
        conn.send(b"%x\r\n" % len(part) + part + b"\r\n0\r\n\r\n")
        r = conn.getresponse()
        assert r.status == 413, (r.status, r.read())
        r.read()
    finally:
        conn.close()
    assert key_by_id(c, live["id"])["uses"] == 0
    # a taken name: 409, and the key's use is not counted
    status, err, _ = enrol(c, live["key"], "first")
    assert status == 409 and err["error"]["field"] == "name", (status, err)
    assert key_by_id(c, live["id"])["uses"] == 0
    status, n, _ = enrol(c, live["key"], "second")
    assert status == 201, (status, n)
    assert key_by_id(c, live["id"])["uses"] == 1
    # the node token works on the node protocol
    status, _, _ = c.api("POST", "/v1/node/heartbeat", {"version": "t", "config_version": 0,
                                                        "observations": []}, token=n["token"])
    assert status in (200, 204), status
    # one audit record per use, naming the node and the key, never a secret
    audits = enrol_audits(c)
    assert len(audits) == 2, audits
    for a in audits:
        assert a["token"] == {"id": None, "name": None} and a["status"] == 201, a
        assert "with enrolment key" in a["summary"], a
        for secret in (used["key"], live["key"], n["token"]):
            assert secret not in a["summary"], a
    assert audits[1]["summary"] == "enrolled node %d (second) with enrolment key %d (live)" % (
        n["id"], live["id"]), audits[1]


def start_enrolling(tmp, c, name, keyfile, extra=None):
    """A noded with no token and a key file, not waited for."""
    d = Noded(c, None, tmp, name=name,
              extra_args=["--enrol-key-file", keyfile, "--proxy-threads", "1"] + (extra or []))
    os.makedirs(d.state_dir, exist_ok=True)
    curl = c.url
    d._spawn([d.binary, "--controld", curl, "--listen", "127.0.0.1:%d" % d.port,
              "--admin-listen", "127.0.0.1:%d" % d.admin_port, "--state-dir", d.state_dir,
              "--name", name] + d.extra_args)
    return d


def test_sixteen_nodes_one_key_of_ten(tmp):
    c = Controld(tmp).start()
    k = make_key(c, "fleet", max_uses=10)
    keyfile = os.path.join(tmp, "enrol.key")
    with open(keyfile, "w") as f:
        f.write(k["key"] + "\n")
    os.chmod(keyfile, 0o600)
    nodes = [start_enrolling(tmp, c, "edge-%02d" % i, keyfile) for i in range(16)]

    def settled():
        done = 0
        for d in nodes:
            if d.proc.poll() is not None:
                done += 1
            elif d.admin("GET", "/healthz", timeout=2)[0] == 200:
                done += 1
        return done == len(nodes)
    wait_until(settled, timeout=60, what="every noded enrolled or exited")
    running = [d for d in nodes if d.proc.poll() is None]
    exited = [d for d in nodes if d.proc.poll() is not None]
    assert len(running) == 10, [(d.name, d.proc.poll()) for d in nodes]
    assert len(exited) == 6
    for d in exited:
        assert d.proc.returncode == 3, (d.name, d.proc.returncode, d.log_tail())
        assert INVALID in d.log_tail(), d.log_tail()
        assert not os.path.exists(os.path.join(d.state_dir, "node-token"))
    assert node_names(c) == sorted(d.name for d in running)
    assert key_by_id(c, k["id"])["uses"] == 10 and key_by_id(c, k["id"])["state"] == "used_up"
    assert len(enrol_audits(c)) == 10
    for d in running:
        path = os.path.join(d.state_dir, "node-token")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, oct(os.stat(path).st_mode)
        with open(d.log_path, errors="replace") as f:
            log = f.read()
        with open(path) as f:
            token = f.read().strip()
        assert k["key"] not in log and token not in log, d.name  # never logged
    # every enrolled node talks to controld with its token: seen online
    wait_until(lambda: all(n["online"] for n in c.api("GET", "/v1/nodes")[1]["nodes"]),
               timeout=30, what="every enrolled node online")
    for d in running:
        d.stop()


def test_restart_needs_no_key(tmp):
    c = Controld(tmp).start()
    k = make_key(c, "one", max_uses=1)
    keyfile = os.path.join(tmp, "enrol.key")
    with open(keyfile, "w") as f:
        f.write(k["key"])
    d = Noded(c, None, tmp, name="edge-r", env={"CDNCA_ENROL_KEY": k["key"]})
    d.start()
    token_path = os.path.join(d.state_dir, "node-token")
    assert stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
    with open(token_path) as f:
        token = f.read().strip()
    assert token and k["key"] not in open(d.log_path).read()
    assert token not in open(d.log_path).read()
    d.stop()
    # the key is used up: a restart without it (and with it) runs on the stored token
    assert key_by_id(c, k["id"])["state"] == "used_up"
    d.env = {}
    d.start()
    wait_until(lambda: c.api("GET", "/v1/nodes")[1]["nodes"][0]["online"], timeout=30,
               what="the restarted node online")
    d.stop()
    d.extra_args = ["--enrol-key-file", keyfile]
    d.start()
    d.stop()
    assert node_names(c) == ["edge-r"] and len(enrol_audits(c)) == 1
    # --check-config: a token file is a token source; without it, no key and no token is an error
    base = [d.binary, "--check-config", "--controld", c.url, "--state-dir", d.state_dir]
    env = {k2: v for k2, v in os.environ.items() if not k2.startswith("CDNCA_")}
    r = subprocess.run(base, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    empty = os.path.join(tmp, "empty-state")
    os.makedirs(empty)
    r = subprocess.run(base[:-1] + [empty], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no node token" in r.stderr, (r.returncode, r.stderr)
    r = subprocess.run(base[:-1] + [empty, "--enrol-key-file", os.path.join(tmp, "missing")],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "enrol-key-file" in r.stderr, (r.returncode, r.stderr)
    # a start with no token and no key: exit 2, saying so
    r = subprocess.run([d.binary, "--controld", c.url, "--state-dir", empty], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no node token" in r.stderr, (r.returncode, r.stderr)


def test_taken_name_and_unreachable_controld(tmp):
    c = Controld(tmp).start()
    k = make_key(c, "k", max_uses=5)
    status, _, _ = c.api("POST", "/v1/nodes", {"name": "taken"})
    assert status == 201
    keyfile = os.path.join(tmp, "enrol.key")
    with open(keyfile, "w") as f:
        f.write(k["key"] + "\n")
    d = start_enrolling(tmp, c, "taken", keyfile)
    assert d.proc.wait(timeout=30) == 3, d.log_tail()
    assert "409" in d.log_tail() and "taken" in d.log_tail(), d.log_tail()
    assert key_by_id(c, k["id"])["uses"] == 0
    # controld away at the first start: retried with backoff until it answers
    c.stop()
    d2 = start_enrolling(tmp, c, "late", keyfile)
    time.sleep(1.5)
    assert d2.proc.poll() is None, d2.log_tail()
    c.start()
    wait_until(lambda: d2.admin("GET", "/healthz", timeout=2)[0] == 200, timeout=60,
               what="the late node enrolled and serving")
    assert "late" in node_names(c)
    assert "retrying" in d2.log_tail(), d2.log_tail()
    d2.stop()


if __name__ == "__main__":
    harness.main()
