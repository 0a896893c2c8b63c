#!/usr/bin/env python3
"""Cluster mode, signals between replicas (docs/design.md#cluster-mode, issue 15 cases 3 and 4): several controld
replicas on one PostgreSQL database; a change committed on one replica reaches node long-polls
suspended on another through LISTEN/NOTIFY (not the 1 s fallback poll), and a node revoked on
one replica is cut off and refused on every replica within 1 s.

Always runs on PostgreSQL (its own throwaway cluster, pgfixture.py); exits 77 (skipped) when the
server binaries are missing."""

import json
import statistics
import sys
import threading
import time

import harness
import pgfixture
from harness import Controld, wait_until

# nothing probes in these tests: the replicas' probe rounds would only add load
QUIET = ["--probe-interval-ms", "86400000"]


def replicas(tmp, n):
    """n controld replicas on one fresh PostgreSQL database, sharing the admin token."""
    db = pgfixture.new_database()
    first = Controld(tmp, extra_args=QUIET, name="r0", db=db)
    out = [first]
    for i in range(1, n):
        out.append(Controld(tmp, extra_args=QUIET, name="r%d" % i, db=db,
                            admin_token=first.admin_token))
    for c in out:
        c.start()
    # every replica listens before the test writes (the listener connects in its own thread)
    for c in out:
        wait_until(lambda c=c: "signals: listening" in open(c.log_path).read(), 10,
                   "%s listening for the other replicas" % c.name)
    return out


def enrol(c, name):
    st, body, _ = c.api("POST", "/v1/nodes", {"name": name})
    assert st == 201, body
    return body["id"], body["token"]


def site_body(name, host):
    return {"name": name, "hostnames": [host],
            "origins": [{"level": 1, "address": "127.0.0.1", "port": 9, "scheme": "http"}]}


def current_seq(c, tok):
    st, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
    if st == 304:
        return 0
    assert st == 200, body
    return body["seq"]


def test_concurrent_writes_reach_a_third_replica(tmp):
    """Case 3: writes on A and B at the same time while a node long-polls C: every acknowledged
    change reaches the node, the seqs it sees only grow, the publications are numbered without a
    gap, and each wake-up on C comes from a notification (well under the 1 s fallback poll)."""
    a, b, c = replicas(tmp, 3)
    _, tok = enrol(a, "edge")

    # the node on C: long-polls and applies every answer (full or delta), as noded does
    state = {"seq": 0, "sites": {}, "seqs": [], "stop": False, "errors": []}
    changed = threading.Event()

    def node():
        while not state["stop"]:
            st, body, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=5000" % state["seq"],
                                token=tok, timeout=20)
            if st == 304:
                continue
            if st != 200:
                state["errors"].append((st, body))
                return
            if body["seq"] <= state["seq"] and not body["full"]:
                state["errors"].append(("seq went back", state["seq"], body["seq"]))
            if body["full"]:
                state["sites"] = {}
            for s in body["sites"]:
                state["sites"][s["id"]] = s["name"]
            for d in body["deleted"]:
                state["sites"].pop(d, None)
            state["seq"] = body["seq"]
            state["seqs"].append(body["seq"])
            changed.set()

    t = threading.Thread(target=node, daemon=True)
    t.start()

    # writers: each creates sites and renames them, on its own replica
    acked = {}  # site id -> the last name a replica acknowledged
    lock = threading.Lock()
    failures = []
    per_writer = 15

    def writer(rep, tag):
        for i in range(per_writer):
            st, body, _ = rep.api("POST", "/v1/sites",
                                  site_body("%s-%d" % (tag, i), "%s%d.test" % (tag, i)))
            if st != 201:
                failures.append((tag, st, body))
                return
            sid = body["id"]
            with lock:
                acked[sid] = body["name"]
            st, body, _ = rep.api("PATCH", "/v1/sites/%d" % sid, {"name": "%s-%d-r" % (tag, i)})
            if st != 200:
                failures.append((tag, st, body))
                return
            with lock:
                acked[sid] = body["name"]

    ws = [threading.Thread(target=writer, args=(a, "a")), threading.Thread(target=writer,
                                                                          args=(b, "b"))]
    for w in ws:
        w.start()
    for w in ws:
        w.join(120)
    assert not failures, failures
    assert len(acked) == 2 * per_writer

    def node_has_all():
        assert not state["errors"], state["errors"]
        return all(state["sites"].get(sid) == name for sid, name in acked.items())
    wait_until(node_has_all, 15, "every acknowledged change on the node polling C")
    assert state["seqs"] == sorted(set(state["seqs"])), state["seqs"]  # strictly increasing

    # the publications are numbered in commit order without a gap (the ordered-write row)
    rows = pgfixture.psql(a.db, "SELECT seq FROM publications ORDER BY seq")
    seqs = [int(r[0]) for r in rows]
    # every write published once (a probe round may add its own publications)
    assert len(seqs) >= 4 * per_writer, len(seqs)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    assert state["seq"] == seqs[-1], (state["seq"], seqs[-1])

    # wake-up latency: a change on A (or B) to the answer of the poll suspended on C
    lat, lat_send = [], []
    sid = next(iter(acked))
    for i in range(12):
        writer_rep = a if i % 2 == 0 else b
        time.sleep(0.3)  # the poll is suspended on C again
        changed.clear()
        before = state["seq"]
        t0 = time.monotonic()
        st, body, _ = writer_rep.api("PATCH", "/v1/sites/%d" % sid, {"name": "lat-%d" % i})
        assert st == 200, body
        t1 = time.monotonic()
        assert changed.wait(5), "the node on C did not get change %d" % i
        t2 = time.monotonic()
        assert state["seq"] > before
        lat.append((t2 - t1) * 1000.0)
        lat_send.append((t2 - t0) * 1000.0)
    state["stop"] = True
    lat.sort()
    med = statistics.median(lat)
    print("wake-up latency on C after a write on A/B (ms, from the write's answer): median %.1f, "
          "max %.1f, all %s; from sending the write: median %.1f, max %.1f"
          % (med, lat[-1], json.dumps([round(x, 1) for x in lat]),
             statistics.median(lat_send), max(lat_send)), flush=True)
    # the fallback poll would take up to 1000 ms (500 ms on average): notifications are faster
    assert med < 250, lat
    assert lat[-1] < 800, lat
    t.join(10)


def test_revocation_holds_on_every_replica(tmp):
    """Case 4: a node long-polling B is deleted on A: its poll on B is answered 401 within 1 s and
    its token is refused on B and C (whose token caches held it) within 1 s."""
    a, b, c = replicas(tmp, 3)
    nid, tok = enrol(a, "edge")
    # no site: nothing (a probe round's publication either) can answer the poll but the revocation
    seq = current_seq(b, tok)
    assert seq == 0
    # the token is in B's and C's caches now
    for rep in (b, c):
        assert rep.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq, token=tok)[0] == 304

    out = {}

    def poll():
        out["r"] = b.api("GET", "/v1/node/config?since=%d&wait_ms=30000" % seq, token=tok,
                         timeout=40)
        out["t"] = time.monotonic()
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.5)  # suspended on B
    assert t.is_alive(), out
    t0 = time.monotonic()
    st, _, _ = a.api("DELETE", "/v1/nodes/%d" % nid)
    assert st == 204
    t1 = time.monotonic()
    # refused on C within the contract's 1 s (its cache held the token; the notification, not
    # the cache entry's own 1 s life, must do it: measured below)
    wait_until(lambda: c.api("GET", "/v1/node/config?since=%d&wait_ms=0" % seq,
                             token=tok)[0] == 401, 1.0, "the token refused on C", interval=0.005)
    refused_c_ms = (time.monotonic() - t1) * 1000.0
    t.join(5)
    assert not t.is_alive(), "the poll on B was not cut"
    st_b, body_b, _ = out["r"]
    cut_ms = (out["t"] - t1) * 1000.0
    print("revocation on A -> 401 on the poll suspended on B: %.1f ms after the DELETE "
          "answered (%.1f ms after it was sent); refused on C after %.1f ms"
          % (cut_ms, (out["t"] - t0) * 1000.0, refused_c_ms), flush=True)
    assert st_b == 401, (st_b, body_b)
    assert cut_ms < 1000, cut_ms
    # a cache entry lives up to 1 s by itself: far less shows the notification cleared it
    assert refused_c_ms < 500, refused_c_ms
    for rep in (a, b, c):
        st, body, _ = rep.api("GET", "/v1/node/config?since=0&wait_ms=0", token=tok)
        assert st == 401, (rep.name, st, body)
        st, body, _ = rep.api("POST", "/v1/node/heartbeat",
                              {"version": "1", "config_version": 0}, token=tok)
        assert st == 401, (rep.name, st, body)


def test_admin_token_revoked_everywhere(tmp):
    """A token deleted on A is refused on B and C at once (cdnca_inval "tokens")."""
    a, b, c = replicas(tmp, 3)
    st, body, _ = a.api("POST", "/v1/tokens", {"name": "ops", "role": "admin"})
    assert st == 201, body
    tid, tok = body["id"], body["token"]
    for rep in (a, b, c):
        assert rep.api("GET", "/v1/sites", token=tok)[0] == 200  # cached on every replica
    st, _, _ = a.api("DELETE", "/v1/tokens/%d" % tid)
    assert st == 204
    # a notification is fast, but not synchronous with the DELETE's answer: allow 1 s, the
    # contract, and show the time it took
    t0 = time.monotonic()
    for rep in (b, c):
        wait_until(lambda rep=rep: rep.api("GET", "/v1/sites", token=tok)[0] == 401, 1.0,
                   "the token refused on %s" % rep.name, interval=0.01)
    print("token deleted on A refused on B and C after %.1f ms"
          % ((time.monotonic() - t0) * 1000.0), flush=True)


def test_reply_cache_follows_other_replicas(tmp):
    """GET /v1/sites/{id} on C is served from C's reply cache; a PATCH on A moves C's
    generation through the notification, so C never answers the old body afterwards."""
    a, c = replicas(tmp, 2)
    st, body, _ = a.api("POST", "/v1/sites", site_body("shop", "shop.test"))
    assert st == 201, body
    sid = body["id"]
    for i in range(5):
        assert c.api("GET", "/v1/sites/%d" % sid)[1]["name"] == (
            "shop" if i == 0 else "v%d" % (i - 1))  # cached on C now
        st, body, _ = a.api("PATCH", "/v1/sites/%d" % sid, {"name": "v%d" % i})
        assert st == 200, body
        wait_until(lambda i=i: c.api("GET", "/v1/sites/%d" % sid)[1]["name"] == "v%d" % i, 1.0,
                   "C answers the new name", interval=0.005)


def test_missed_notification_is_caught_by_the_poll(tmp):
    """Changes committed without a notification (written straight into the database): C's reply
    cache stops serving the old body within two fallback polls (a newer gen that no notification
    brought), and a publication wakes a poll on C long before its wait (10 s) ends: only the poll
    of MAX(seq) (every 1 s) can, since nothing else tells C's hub about another replica's seq."""
    a, c = replicas(tmp, 2)
    st, body, _ = a.api("POST", "/v1/sites", site_body("shop", "shop.test"))
    assert st == 201, body
    sid = body["id"]
    assert c.api("GET", "/v1/sites/%d" % sid)[1]["name"] == "shop"  # cached on C
    # nothing else writes now (no node): only the poll can move C's generation
    t0 = time.monotonic()
    pgfixture.psql(a.db, "BEGIN; UPDATE cdnca_meta SET gen = gen + 1 WHERE id = 1; "
                         "UPDATE sites SET name = 'quiet' WHERE id = %d; COMMIT" % sid)
    wait_until(lambda: c.api("GET", "/v1/sites/%d" % sid)[1]["name"] == "quiet", 3.0,
               "C's reply cache resynced", interval=0.02)
    fresh_ms = (time.monotonic() - t0) * 1000.0
    # (the poll logs "without its notification" when no later write moved the generation first;
    # with an engine lease renewing in the background one may, so the log line is not asserted)

    _, tok = enrol(a, "edge")
    seq = current_seq(c, tok)
    out = {}

    def poll():
        out["r"] = c.api("GET", "/v1/node/config?since=%d&wait_ms=10000" % seq, token=tok,
                         timeout=20)
        out["t"] = time.monotonic()
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    pgfixture.psql(a.db, "BEGIN; UPDATE cdnca_meta SET gen = gen + 1 WHERE id = 1; "
                         "UPDATE sites SET name = 'silent', config_version = config_version + 1 "
                         "WHERE id = %d; INSERT INTO publications (seq, site_id, config_version, "
                         "deleted, reason, created_at) SELECT (SELECT MAX(seq) + 1 FROM "
                         "publications), id, config_version, 0, 'test', 0 "
                         "FROM sites WHERE id = %d; COMMIT" % (sid, sid))
    t.join(5)
    assert not t.is_alive()
    st, body, _ = out["r"]
    assert st == 200 and [s["name"] for s in body["sites"]] == ["silent"], body
    woke_ms = (out["t"] - t0) * 1000.0
    print("without a notification: reply cache on C fresh after %.0f ms, poll on C woken after "
          "%.0f ms" % (fresh_ms, woke_ms), flush=True)
    # woken by the poll (every 1 s), not by the wait's end (10 s): the bound leaves room for a
    # loaded machine (CI saw 1,756 ms beside the other tests) and is still half the wait
    assert woke_ms < 5000, woke_ms


def test_listener_reconnects_and_resyncs(tmp):
    """The listening connections are terminated by the server: each replica turns its caches
    off, comes back with backoff, resyncs, and a change on A still wakes a poll on C."""
    a, c = replicas(tmp, 2)
    _, tok = enrol(a, "edge")
    st, body, _ = a.api("POST", "/v1/sites", site_body("shop", "shop.test"))
    assert st == 201, body
    sid = body["id"]
    # C answers from what it has heard: wait until the create's publication reached it (else the
    # poll below starts at since=0 and answers at once with the create)
    seq = wait_until(lambda: current_seq(c, tok), 10, "C sees the new site's publication")
    # only this test's database: the cluster is shared with the tests running beside it
    killed = pgfixture.psql(a.db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE pid <> pg_backend_pid() AND "
                                  "datname = current_database() AND "
                                  "(query LIKE 'LISTEN%' OR query LIKE '%MAX(seq)%')")
    assert killed, "no listening connection found"
    wait_until(lambda: "listening connection lost" in open(c.log_path).read(), 10,
               "C notices its listener is gone")
    wait_until(lambda: "listening again" in open(c.log_path).read(), 10, "C listens again")
    out = {}

    def poll():
        out["r"] = c.api("GET", "/v1/node/config?since=%d&wait_ms=10000" % seq, token=tok,
                         timeout=20)
        out["t"] = time.monotonic()
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.3)
    st, body, _ = a.api("PATCH", "/v1/sites/%d" % sid, {"name": "after"})
    assert st == 200, body
    t1 = time.monotonic()
    t.join(5)
    assert not t.is_alive()
    st, body, _ = out["r"]
    assert st == 200 and [s["name"] for s in body["sites"]] == ["after"], body
    # woken, not left to its 10 s wait (the listener itself is checked in the metrics below; the
    # bound leaves room for a loaded machine)
    assert (out["t"] - t1) < 3.0, out["t"] - t1
    st, text, _ = c.api("GET", "/metrics", token=None)
    assert st == 200
    lines = dict(ln.rsplit(" ", 1) for ln in text.splitlines() if ln.startswith("cdnca_signals"))
    assert lines.get("cdnca_signals_listening") == "1", lines
    assert int(float(lines["cdnca_signals_received_total"])) >= 1, lines


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin; tests/deps.sh "
              "installs postgresql)")
        sys.exit(77)
    harness.main()
