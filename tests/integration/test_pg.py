#!/usr/bin/env python3
"""test_pg — guarantees that only PostgreSQL can break (docs/design.md#storage-and-state, docs/design.md#cluster-mode); PostgreSQL pass only.

1. kill -9 of controld while 1,000 acknowledged site creations are in flight: after a restart
   every 201's site is there, exactly as acknowledged.
2. The PostgreSQL server stopped (pg_ctl stop -m fast) under a write load and started again:
   while it is down every write answers 503 db_unavailable (never 500, never a crash) and
   GET /healthz answers 503 with "db": "down"; writes succeed again within a few seconds of the
   server's return without a controld restart, and no acknowledged write is lost.
3. Ordered writes: writer threads on two controld processes on one database switch levels and
   rename sites while a client polls GET /v1/node/config?since= (alternating between the two,
   as a node with two --controld URLs does) and GET /v1/notifications?after=. The seqs and
   event ids it reads only increase, every publication's site is in the answer that moved the
   client past its seq (none committed behind a seq already read), and every event id is read.
4. --check-config with a conninfo (the SQLite file's check is test_ops' and SQLite only).

Registered as pg.test_pg only (tests/CMakeLists.txt); run by hand with CDNCA_TEST_DB=pg.
"""

import os
import subprocess
import sys
import threading
import time

import harness
import pgfixture
from harness import Controld
from test_durability import all_sites, check_present, site_body

THREADS = 6


def site_writer(c, indices, acked, answers, stop, killing=None):
    """POST the sites of indices until stop; acked[i] = 201 body, answers gets (status, code).
    Once killing is set (controld is being killed) a failed request ends the writer: http.client
    may fail on the dying connection with other errors than OSError (e.g. AttributeError once
    the socket is closed under it)."""
    for i in indices:
        if stop.is_set():
            return
        try:
            status, j, _ = c.api("POST", "/v1/sites", site_body(i), timeout=30)
        except OSError:  # refused/reset once controld is killed
            if stop.is_set() or (killing is not None and killing.is_set()):
                return
            answers.append((-1, "transport"))
            time.sleep(0.05)
            continue
        except Exception as e:  # noqa: BLE001 - e.g. an answer openapi.json does not allow
            if stop.is_set() or (killing is not None and killing.is_set()):
                return
            answers.append((-2, str(e)[:300]))
            return
        code = j.get("error", {}).get("code") if isinstance(j, dict) else None
        answers.append((status, code))
        if status == 201:
            acked[i] = j
        elif status == 503:
            time.sleep(0.02)  # a client's retry pause; keeps the loop bounded in rate


def test_kill9_during_1000_acknowledged_writes(tmp):
    c = Controld(tmp).start()
    acked, answers = {}, []
    stop, killing = threading.Event(), threading.Event()
    threads = [threading.Thread(target=site_writer,
                                args=(c, range(t, 100000, THREADS), acked, answers, stop, killing))
               for t in range(THREADS)]
    for t in threads:
        t.start()
    try:
        harness.wait_until(lambda: len(acked) >= 1000, timeout=240, what="1,000 acknowledged sites")
        killing.set()
        c.kill9()  # the writers have requests in flight now
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    bad = [a for a in answers if a[0] not in (201, -1)]
    assert not bad, "answers other than 201 before the kill: %s" % bad[:10]
    snapshot = dict(acked)
    assert len(snapshot) >= 1000
    c.start()
    stored = check_present(c, snapshot)
    for s in stored.values():  # unacknowledged writes are there whole or not at all
        assert len(s["origins"]) == 2 and len(s["hostnames"]) == 2, s


def test_server_restart_under_write_load(tmp):
    # a cluster of its own: the run's cluster is shared with the tests running beside this one
    cl = pgfixture.private_cluster()
    c = Controld(tmp, db=cl.conninfo(cl.new_database())).start()
    acked, answers = {}, []
    stop = threading.Event()
    health = []  # (monotonic at the answer, status, body, monotonic at the request)

    def health_poller():
        while not stop.is_set():
            sent = time.monotonic()
            try:
                st, j, _ = c.api("GET", "/healthz", token=None, timeout=5)
            except OSError as e:
                st, j = -1, str(e)
            health.append((time.monotonic(), st, j, sent))
            time.sleep(0.1)

    threads = [threading.Thread(target=site_writer,
                                args=(c, range(t, 100000, 3), acked, answers, stop))
               for t in range(3)]
    threads.append(threading.Thread(target=health_poller))
    for t in threads:
        t.start()
    try:
        harness.wait_until(lambda: len(acked) >= 100, timeout=60, what="100 acknowledged sites")
        n_before = len(answers)
        cl.server_stop("fast")
        down_at = time.monotonic()
        time.sleep(3)
        assert c.running(), "controld exited while the database was down"
        during = answers[n_before:]
        n_down = len(answers)
        acked_down = len(acked)
        start_at = time.monotonic()  # the server may answer before server_start returns
        cl.server_start()
        up_at = time.monotonic()
        harness.wait_until(lambda: len(acked) > acked_down + 20, timeout=15,
                           what="writes acknowledged again after the server's return")
        recovered_in = time.monotonic() - up_at
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        try:
            cl.server_start()  # the next test needs it even when this one failed midway
        except Exception:  # noqa: BLE001 - it is running already
            pass
    assert not any(t.is_alive() for t in threads)
    print("  down %.1f s: %d answers (%d acknowledged right at the stop); writes back %.2f s "
          "after the server" % (up_at - down_at, n_down - n_before,
                                sum(1 for a in during if a[0] == 201), recovered_in))
    assert recovered_in < 6, "writes came back %.1f s after the server" % recovered_in
    bad = [a for a in answers if a not in ((201, None), (503, "db_unavailable"))]
    assert not bad, "answers other than 201 and 503 db_unavailable: %s" % bad[:10]
    # while down (after the first second, when in-flight requests have ended): only 503s
    late = [a for a in answers[n_before:n_down]][len(during) // 3:]
    assert late and all(a == (503, "db_unavailable") for a in late), late[:10]
    # asked a second after the server had stopped (an answer to an earlier question may come
    # late on a loaded machine, with what the server said before it stopped) and answered
    # before it was started again (it accepts connections before pg_ctl's start returns)
    down_health = [h for h in health if down_at + 1 < h[3] and h[0] < start_at]
    assert down_health, "no /healthz answer while the server was down"
    for done, st, j, sent in down_health:
        assert st == 503 and j["db"] == "down" and j["status"] == "down", (
            st, j, "asked %.2f s and answered %.2f s after the stop, %.2f s before the start"
            % (sent - down_at, done - down_at, start_at - done))
    # /healthz (read on the HTTP threads' own connections, each with its reconnect backoff)
    # says ok again within a few seconds of the server's return too
    back = [h for h in health if h[0] > up_at and h[1] == 200 and h[2]["db"] == "ok"]
    if not back:
        harness.wait_until(lambda: c.api("GET", "/healthz", token=None)[0] == 200,
                           timeout=max(0.1, up_at + 6 - time.monotonic()),
                           what="GET /healthz 200 within 6 s of the server's return")
    else:
        assert back[0][0] - up_at < 6, "healthz ok %.1f s after the server" % (back[0][0] - up_at)
    assert c.running()
    stored = check_present(c, dict(acked))
    for s in stored.values():
        assert len(s["origins"]) == 2 and len(s["hostnames"]) == 2, s
    # the restart keeps everything: a fresh controld on the same database sees the same
    c.restart()
    assert set(all_sites(c)) == set(stored)


def test_check_config_on_postgresql(tmp):
    """--check-config with a conninfo: connects and reads the schema version without writing;
    an unreachable server and a schema newer than this controld are configuration errors."""
    c = Controld(tmp).start()
    c.stop()
    argv = [c.binary, "--check-config", "--db", c.db]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "configuration OK" in p.stdout, (p.returncode, p.stdout, p.stderr)
    newest = harness.db_query(c, "SELECT MAX(version) FROM schema_migrations")[0][0]
    assert "schema %d" % newest in p.stdout, p.stdout
    p = subprocess.run([c.binary, "--check-config", "--db",
                        "host=%s dbname=no_such_db connect_timeout=5" % pgfixture.cluster().dir],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "PostgreSQL database" in p.stderr, (p.returncode, p.stderr)
    harness.db_query(c, "INSERT INTO schema_migrations (version, name) VALUES (%d, 'future')"
                     % (newest + 90))
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "newer than this controld" in p.stderr, (p.returncode, p.stderr)


N_SITES = 12
WRITES_PER_THREAD = 30
WRITERS_PER_CONTROLD = 3


def ordered_writer(c, sites, k, errors):
    """Switch a site's level (a publication and a level.switched event) or rename it (a
    publication), WRITES_PER_THREAD times."""
    for n in range(WRITES_PER_THREAD):
        sid = sites[(k * 7 + n) % len(sites)]
        try:
            if n % 3 == 2:
                st, j, _ = c.api("PATCH", "/v1/sites/%d" % sid,
                                 {"name": "w%d-%d-%d" % (k, n, sid)}, timeout=30)
            else:
                st, j, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1 + (n + k) % 2},
                                 timeout=30)
        except Exception as e:  # noqa: BLE001 - a transport error or an undocumented answer
            errors.append("writer %d: %s" % (k, e))
            return
        if st != 200:
            errors.append("writer %d: %s %s" % (k, st, j))


def test_ordered_writes_seen_in_order_across_two_controlds(tmp):
    a = Controld(tmp, name="controld-a").start()
    b = Controld(tmp, name="controld-b", db=a.db, admin_token=a.admin_token).start()
    sites = []
    for i in range(N_SITES):
        st, j, _ = a.api("POST", "/v1/sites", site_body(i))
        assert st == 201, j
        sites.append(j["id"])
    st, node, _ = a.api("POST", "/v1/nodes", {"name": "poller"})
    assert st == 201, node
    polls = []  # (since, seq, full, site ids in the answer)
    seen_events = []
    errors = []
    stop = threading.Event()

    def config_poller():
        since, quiet = 0, 0
        for n in range(20000):
            last = stop.is_set()
            c = (a, b)[n % 2]
            st, j, _ = c.api("GET", "/v1/node/config?since=%d&wait_ms=100" % since,
                             token=node["token"], timeout=30)
            if st == 200:
                ids = {s["id"] for s in j["sites"]} | set(j["deleted"])
                polls.append((since, j["seq"], j["full"], ids))
                since = j["seq"]
                quiet = 0
            elif st == 304:
                quiet = quiet + 1 if last else 0
            else:
                errors.append("config poll: %s %s" % (st, j))
                return
            if quiet >= 2:
                return  # both controlds have nothing newer
        errors.append("config poller did not settle")

    def event_poller():
        after = 0
        for _ in range(20000):
            last = stop.is_set()
            st, j, _ = a.api("GET", "/v1/notifications?after=%d&limit=1000" % after, timeout=30)
            if st != 200:
                errors.append("notifications: %s %s" % (st, j))
                return
            for e in j["events"]:
                seen_events.append(e["id"])
                after = e["id"]
            if last and not j["events"]:
                return
            time.sleep(0.02)
        errors.append("event poller did not settle")

    pollers = [threading.Thread(target=config_poller), threading.Thread(target=event_poller)]
    for t in pollers:
        t.start()
    writers = [threading.Thread(target=ordered_writer, args=(c, sites, k, errors))
               for k, c in enumerate([a] * WRITERS_PER_CONTROLD + [b] * WRITERS_PER_CONTROLD)]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=180)
    time.sleep(0.3)
    stop.set()
    for t in pollers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in writers + pollers)
    assert not errors, errors[:10]

    pubs = harness.db_query(a, "SELECT seq, site_id FROM publications ORDER BY seq")
    events = [r[0] for r in harness.db_query(a, "SELECT id FROM events ORDER BY id")]
    renames = 2 * WRITERS_PER_CONTROLD * (WRITES_PER_THREAD // 3)  # each one publishes
    assert len(pubs) >= N_SITES + renames, len(pubs)
    # numbered without a gap (a rolled-back transaction gives its number back) and the same
    # for event ids
    assert [p[0] for p in pubs] == list(range(1, len(pubs) + 1)), pubs[:5]
    assert events == list(range(1, len(events) + 1)), events[:5]
    # seqs read by the client: strictly increasing, ending at the last one committed
    seqs = [p[1] for p in polls]
    assert all(x < y for x, y in zip(seqs, seqs[1:])), seqs
    assert all(p[0] < p[1] for p in polls), polls[:5]
    assert seqs and seqs[-1] == pubs[-1][0], (seqs[-1:], pubs[-1])
    # each publication's site is in the answer that took the client past its seq
    missed = []
    for seq, site in pubs:
        p = next(p for p in polls if p[0] < seq <= p[1])
        if not p[2] and site not in p[3]:
            missed.append((seq, site, p[0], p[1]))
    assert not missed, "publications behind a seq the client had read: %s" % missed[:10]
    # events: every committed id read once, in increasing order
    assert len(events) >= 2, events  # level switches happened
    assert all(x < y for x, y in zip(seen_events, seen_events[1:])), seen_events
    assert seen_events == events, (len(seen_events), len(events),
                                   sorted(set(events) - set(seen_events))[:10])
    print("  %d publications in %d polls, %d events" % (len(pubs), len(polls), len(events)))


if __name__ == "__main__":
    if not harness.pg_mode():
        print("test_pg runs on PostgreSQL only: CDNCA_TEST_DB=pg (registered as pg.test_pg)")
        sys.exit(1)
    os.environ.setdefault("CDNCA_TEST_DB", "pg")
    harness.main()
