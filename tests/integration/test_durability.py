#!/usr/bin/env python3
"""test_durability — acknowledged API writes and tokens survive kill -9 and restarts (docs/design.md#storage-and-state).

A burst of site creations from several threads is acknowledged (201), controld is killed with
SIGKILL, and after a restart on the same database every acknowledged site is there with its
origins exactly as the 201 showed it. Tokens (admin and node) survive restarts too.
"""

import threading

import harness
from harness import Controld

THREADS = 6
BURST = 1000


def site_body(i):
    return {"name": "site-%d" % i, "hostnames": ["s%d.example.com" % i, "www.s%d.example.com" % i],
            "origins": [{"address": "10.%d.%d.1" % (i // 250, i % 250), "port": 8000 + i % 1000},
                        {"address": "o%d.example.net" % i, "scheme": "http", "level": 2}]}


def burst(c, indices, acked, errors, stop=None):
    """POST the sites of indices; record each 201 body in acked (by index)."""
    for i in indices:
        if stop is not None and stop.is_set():
            return
        try:
            status, j, _ = c.api("POST", "/v1/sites", site_body(i), timeout=30)
        except OSError as e:  # connection refused/reset once controld is killed
            if stop is None:
                errors.append("site %d: %s" % (i, e))
            return
        if status == 201:
            acked[i] = j
        elif stop is None:
            errors.append("site %d: %s %s" % (i, status, j))


def all_sites(c):
    sites, after = {}, 0
    for _ in range(1000):
        status, j, _ = c.api("GET", "/v1/sites?limit=100&after=%d" % after)
        assert status == 200, j
        for s in j["sites"]:
            sites[s["id"]] = s
        if j["next"] is None:
            return sites
        after = j["next"]
    raise AssertionError("pagination did not end")


def check_present(c, acked):
    stored = all_sites(c)
    missing = [i for i, s in acked.items() if s["id"] not in stored]
    assert not missing, "acknowledged sites lost after kill -9: %s" % missing[:20]
    for i, s in acked.items():
        assert stored[s["id"]] == s, "site %d differs after restart:\n%s\n%s" % (
            i, s, stored[s["id"]])
        assert len(s["origins"]) == 2 and s["name"] == "site-%d" % i
    return stored


def test_burst_then_kill9(tmp):
    c = Controld(tmp).start()
    acked, errors = {}, []
    threads = [threading.Thread(target=burst, args=(c, range(t, BURST, THREADS), acked, errors))
               for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    c.kill9()  # right after the last 201
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:10]
    assert len(acked) == BURST
    c.start()
    stored = check_present(c, acked)
    assert len(stored) == BURST
    # ids are unique and the database takes new writes after recovery
    assert len({s["id"] for s in acked.values()}) == BURST
    status, j, _ = c.api("POST", "/v1/sites", site_body(BURST))
    assert status == 201, j


def test_kill9_during_burst(tmp):
    c = Controld(tmp).start()
    acked, errors = {}, []
    stop = threading.Event()
    threads = [threading.Thread(target=burst,
                                args=(c, range(t, 100000, THREADS), acked, errors, stop))
               for t in range(THREADS)]
    for t in threads:
        t.start()
    harness.wait_until(lambda: len(acked) >= 150, timeout=120, what="150 acknowledged sites")
    c.kill9()  # requests are in flight now
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    snapshot = dict(acked)
    c.start()
    stored = check_present(c, snapshot)
    # writes that were not acknowledged may or may not be there, but never half-written
    for s in stored.values():
        assert len(s["origins"]) == 2 and len(s["hostnames"]) == 2, s


def test_tokens_survive_restart(tmp):
    c = Controld(tmp).start()
    status, n, _ = c.api("POST", "/v1/nodes", {"name": "edge-1"})
    assert status == 201, n
    status, s, _ = c.api("POST", "/v1/sites", site_body(1))
    assert status == 201
    # restart without CDNCA_ADMIN_TOKEN: the stored admin token still works
    c.pass_admin_token = False
    c.restart()
    status, j, _ = c.api("GET", "/v1/sites/%d" % s["id"])
    assert status == 200 and j == s, (status, j)
    # the node token still authenticates (known, wrong kind for an admin route)
    status, j, _ = c.api("GET", "/v1/sites", token=n["token"])
    assert status == 403, (status, j)
    status, j, _ = c.api("GET", "/v1/sites", token="not-a-token-at-all")
    assert status == 401, (status, j)
    # after kill -9 as well
    c.restart(kill=True)
    assert c.api("GET", "/v1/sites")[0] == 200
    assert c.api("GET", "/v1/sites", token=n["token"])[0] == 403
    # a new admin token from the environment replaces the old one (rotation by restart) with
    # SQLite; on PostgreSQL (cluster mode, docs/design.md#cluster-mode) it is only ensured to exist, so replicas
    # started with different tokens do not revoke each other's: rotation is an explicit DELETE
    old = c.admin_token
    c.admin_token = "rotated-admin-token-0123456789"
    c.pass_admin_token = True
    c.restart()
    assert c.api("GET", "/v1/sites")[0] == 200
    assert c.api("GET", "/v1/sites", token=old)[0] == (200 if harness.pg_mode() else 401)
    assert c.api("GET", "/v1/sites", token=n["token"])[0] == 403
    status, lst, _ = c.api("GET", "/v1/nodes")
    assert [x["name"] for x in lst["nodes"]] == ["edge-1"], lst


if __name__ == "__main__":
    harness.main()
