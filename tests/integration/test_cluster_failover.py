#!/usr/bin/env python3
"""test_cluster_failover — cluster mode across a PostgreSQL failover (docs/design.md#cluster-mode, issue 15 case
6): a primary with a synchronous streaming standby (pgstandby.py: pg_basebackup -R over the
primary's Unix socket, synchronous_standby_names, synchronous_commit=on), and controld replicas
whose --db names both servers with target_session_attrs=read-write.

1. The primary crashes (pg_ctl stop -m immediate) under a write load on two replicas and the
   standby is promoted (pg_ctl promote): every replica reconnects by itself to the promoted
   server; during the gap writes answer 503 db_unavailable (never 500, never a crash) and
   /healthz answers 503 "db": "down", then 200 "ok"; every acknowledged write, including the
   last one acknowledged before the crash, is in the promoted database unaltered; an engine
   holds the lease again within ttl + a round; the listening connections reconnect (a change
   made on one replica after the promotion reaches a node polling the other), and the node saw
   every publication (no seq skipped).
2. A switchover where the old primary stays up but read-only (default_transaction_read_only=on,
   as an operator fences it before promoting the standby): writes on it fail with SQLSTATE
   25006, which controld treats as "database unavailable" (503, reconnect), and the
   reconnection's target_session_attrs=read-write selection finds the promoted standby; the
   listening connection leaves the read-only server too.

Not tested: that without synchronous_standby_names an acknowledged write can be lost. On one
machine with Unix sockets the standby nearly always has the last commit already, so such a
test could not fail reliably; the property rests on synchronous replication.

Always runs on PostgreSQL (its own throwaway servers); exits 77 (skipped) when the server
binaries are missing.
"""

import re
import secrets
import sys
import threading
import time

import harness
import pgfixture
import pgstandby
from harness import Controld, wait_until
from test_durability import site_body

TTL_MS = 2000
PROBE_MS = 500
SITES_MAX = 100000  # bound of the write loops (they stop long before)


def health(r):
    """(status, body) of a replica's /healthz; (-1, error) when it does not answer."""
    try:
        st, body, _ = r.api("GET", "/healthz", token=None, timeout=5)
    except OSError as e:
        return -1, str(e)
    return st, body


def metric(r, name):
    st, text, _ = r.api("GET", "/metrics", token=None, timeout=5)
    assert st == 200, text
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "%s not in /metrics" % name
    return float(m.group(1))


def engines(replicas):
    out = []
    for r in replicas:
        st, h = health(r)
        if st == 200 and h.get("role") == "engine":
            out.append((r, h["epoch"]))
    return out


def replicas_on(pair, n, tmp):
    """n controld replicas on the pair's database through the multi-host conninfo, with a short
    lease, all listening for each other's changes."""
    token = "adm-" + secrets.token_hex(16)
    out = []
    for i in range(n):
        args = ["--replica-name", "r%d" % i, "--lease-ttl-ms", str(TTL_MS),
                "--probe-interval-ms", str(PROBE_MS)]
        out.append(Controld(tmp, extra_args=args, name="r%d" % i, admin_token=token,
                            db=pair.conninfo()).start())
    for r in out:
        wait_until(lambda r=r: "signals: listening" in open(r.log_path).read(), 30,
                   "%s listening for the other replicas" % r.name)
    return out


class Writer:
    """POST /v1/sites of indices start, start+step, … to one replica until stopped (bounded):
    .acked[i] = (201 body, monotonic time of the answer), .answers = [(time sent, time of the
    answer, status, code)]."""

    def __init__(self, r, start, step, acked, answers):
        self.r, self.start_i, self.step = r, start, step
        self.acked, self.answers = acked, answers
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        for i in range(self.start_i, SITES_MAX, self.step):
            if self.stop.is_set():
                return
            sent = time.monotonic()
            try:
                st, j, _ = self.r.api("POST", "/v1/sites", site_body(i), timeout=30)
            except OSError as e:
                self.answers.append((sent, time.monotonic(), -1, "transport: %s" % e))
                time.sleep(0.05)
                continue
            except Exception as e:  # noqa: BLE001 - an answer openapi.json does not allow
                self.answers.append((sent, time.monotonic(), -2, str(e)[:300]))
                return
            now = time.monotonic()
            code = j.get("error", {}).get("code") if isinstance(j, dict) else None
            self.answers.append((sent, now, st, code))
            if st == 201:
                self.acked[i] = (j, now)
            elif st == 503:
                time.sleep(0.05)  # a client's retry pause: bounded rate during the gap
            time.sleep(0.005)

    def begin(self):
        self.t.start()
        return self

    def finish(self):
        self.stop.set()
        self.t.join(60)
        assert not self.t.is_alive()


class HealthWatch:
    """GET /healthz of each replica every 100 ms: .seen = [(time sent, time of the answer,
    replica name, status, db, role)]."""

    def __init__(self, replicas):
        self.replicas, self.seen = replicas, []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        end = time.monotonic() + 600  # bounded
        while not self.stop.is_set() and time.monotonic() < end:
            for r in self.replicas:
                sent = time.monotonic()
                st, h = health(r)
                ok = isinstance(h, dict)
                self.seen.append((sent, time.monotonic(), r.name, st, h.get("db") if ok else None,
                                  h.get("role") if ok else None))
            time.sleep(0.1)

    def begin(self):
        self.t.start()
        return self

    def finish(self):
        self.stop.set()
        self.t.join(30)


class ConfigPoller:
    """A node long-polling GET /v1/node/config on one replica from since=0: .answers = [(since,
    body)]; .errors = other answers (status, code) — 503 during a database gap is expected."""

    def __init__(self, r, token):
        self.r, self.token, self.answers, self.errors = r, token, [], []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        since = 0
        end = time.monotonic() + 600  # bounded
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                st, body, _ = self.r.api("GET", "/v1/node/config?since=%d&wait_ms=1000" % since,
                                         token=self.token, timeout=10)
            except Exception as e:  # noqa: BLE001 - recorded, the test decides
                self.errors.append((-1, repr(e)))
                time.sleep(0.1)
                continue
            if st == 304:
                continue
            if st != 200:
                code = body.get("error", {}).get("code") if isinstance(body, dict) else None
                self.errors.append((st, code))
                time.sleep(0.1)
                continue
            self.answers.append((since, body))
            since = body["seq"]

    def begin(self):
        self.t.start()
        return self

    def finish(self):
        self.stop.set()
        self.t.join(30)

    def sees(self, sid, name):
        return any(s["id"] == sid and s["name"] == name
                   for _, b in list(self.answers) for s in b["sites"])


def check_no_gap(pubs, answers):
    """Every publication of pubs [(seq, site_id)] is delivered: each answer moves the cursor from
    where the previous one left it, and every publication between its since and its seq names a
    site the answer carries (changed or deleted)."""
    last = 0
    for since, body in answers:
        if body["seq"] == since:
            continue
        assert body["seq"] > since, (since, body["seq"])
        assert since == last, (since, last)
        carried = {s["id"] for s in body["sites"]} | set(body["deleted"])
        for seq, site_id in pubs:
            if since < seq <= body["seq"]:
                assert site_id in carried, (seq, site_id, since, body["seq"])
        last = body["seq"]
    assert last == pubs[-1][0], (last, pubs[-1])


def stored_sites(pair, server):
    """{site id: (name, origin count, hostname count)} read straight from a server's database."""
    rows = pair.psql(server, "SELECT s.id, s.name, (SELECT count(*) FROM origins o WHERE "
                             "o.site_id = s.id), (SELECT count(*) FROM hostnames h WHERE "
                             "h.site_id = s.id) FROM sites s")
    return {int(a): (b, int(c), int(d)) for a, b, c, d in rows}


def as_written(site):
    """A site as the API wrote it: without what the engine's probe rounds change afterwards
    (origin health, the current level and the versions a switch bumps)."""
    out = {k: v for k, v in site.items()
           if k not in ("current_level", "config_version", "revision", "updated_at")}
    out["origins"] = [{k: v for k, v in o.items() if k != "health"} for o in site["origins"]]
    return out


def all_sites(r):
    sites, after = {}, 0
    for _ in range(10000):
        st, j, _ = r.api("GET", "/v1/sites?limit=100&after=%d" % after)
        assert st == 200, j
        for s in j["sites"]:
            sites[s["id"]] = s
        if j["next"] is None:
            return sites
        after = j["next"]
    raise AssertionError("pagination did not end")


def controld_backends(pair, server):
    return int(pair.psql(server, "SELECT count(*) FROM pg_stat_activity WHERE application_name "
                                 "= 'controld' AND datname = current_database()")[0][0])


def test_primary_crash_standby_promoted(tmp):
    """Case 6: the synchronous standby is promoted after the primary crashes under load."""
    pair = pgstandby.Pair(sync=True).start()
    assert pair.replication() == [(pgstandby.STANDBY_NAME, "streaming", "sync")]
    try:
        _crash_and_promote(pair, tmp)
    except BaseException:
        pair.print_logs()
        raise
    finally:
        pair.stop()


def _crash_and_promote(pair, tmp):
    rs = replicas_on(pair, 2, tmp)
    r0, r1 = rs
    wait_until(lambda: len(engines(rs)) == 1, 30, "one engine")
    (_, epoch0), = engines(rs)
    st, node, _ = r0.api("POST", "/v1/nodes", {"name": "n1"})
    assert st == 201, node
    poller = ConfigPoller(r1, node["token"]).begin()
    watch = HealthWatch(rs).begin()
    acked, answers = {}, []
    writers = [Writer(r, i, 2, acked, answers).begin() for i, r in enumerate(rs)]
    try:
        wait_until(lambda: len(acked) >= 40, 60, "40 acknowledged writes before the crash")
        crash_sent = time.monotonic()
        pair.crash_primary()
        crashed = time.monotonic()
        # the last write acknowledged before the crash (sync replication must have kept it)
        before = {i: a for i, a in list(acked.items()) if a[1] < crashed}
        last_i = max(before, key=lambda i: before[i][1])
        time.sleep(2)  # the gap: writes and /healthz must fail cleanly, nobody crashes
        for r in rs:
            assert r.running(), "%s exited while the database was down" % r.name
        acked_at_promote = len(acked)
        # what is answered before pg_ctl promote is called had no server to commit on; once it
        # runs, a write may be acknowledged by the promoted server before promote() returns
        promoting = time.monotonic()
        pair.promote()
        promoted = time.monotonic()
        # the engine lease goes on: one engine again (the lease row expired during the gap or
        # is renewed by its holder), polled while the writes go on
        wait_until(lambda: len(engines(rs)) == 1, TTL_MS / 1000 + PROBE_MS / 1000 + 60,
                   "one engine after the promotion", interval=0.02)
        lead = time.monotonic() - promoted
        wait_until(lambda: sum(1 for _, t in list(acked.values()) if t > promoted) >= 20, 60,
                   "writes acknowledged on both replicas after the promotion")
        wait_until(lambda: all(health(r)[0] == 200 for r in rs), 30,
                   "/healthz 200 on every replica after the promotion")
    finally:
        for w in writers:
            w.finish()
        watch.finish()
    for r in rs:
        assert r.running(), "%s exited" % r.name
    first_after = min(t for _, t in acked.values() if t > crashed)
    last_before = before[last_i][1]
    print("  %d writes acknowledged, %d before the crash (%d of them while pg_ctl stop -m "
          "immediate ran, the last %.0f ms before it returned), %d after; no write acknowledged "
          "for %.2f s (crash to promotion %.2f s, promotion to the first write %.2f s)"
          % (len(acked), len(before), sum(1 for _, t in before.values() if t > crash_sent),
             (crashed - last_before) * 1000,
             len(acked) - acked_at_promote, first_after - last_before, promoted - crashed,
             first_after - promoted))
    # answers: 201 or 503 db_unavailable only (never 500, never a dropped connection)
    bad = [(st, code) for _, _, st, code in answers
           if (st, code) not in ((201, None), (503, "db_unavailable"))]
    assert not bad, "answers other than 201 and 503 db_unavailable: %s" % bad[:10]
    # a write sent after the crash and answered before the promotion had no server to commit on
    gap = [(st, code) for t0, t1, st, code in answers if crashed < t0 and t1 < promoting]
    assert gap and all(a == (503, "db_unavailable") for a in gap), gap[:10]
    # /healthz: 503 "down" in the gap, 200 "ok" after, on each replica
    for r in rs:
        down = [(st, db) for t0, t1, n, st, db, _ in watch.seen if n == r.name
                and crashed < t0 and t1 < promoting]
        assert down and all(x == (503, "down") for x in down), (r.name, down[:5])
        st, h = health(r)
        assert st == 200 and h["db"] == "ok" and h["status"] == "ok", (r.name, st, h)
        assert metric(r, "cdnca_db_up") == 1
    # every replica's connections are on the promoted server
    assert not pair.in_recovery(pair.standby)
    wait_until(lambda: controld_backends(pair, pair.standby) >= 4, 30,
               "controld connections on the promoted server")
    # every acknowledged write is there, unaltered: through the API and in the database itself
    assert last_i in acked
    stored = all_sites(r0)
    missing = [i for i, (s, _) in acked.items() if s["id"] not in stored]
    assert not missing, "acknowledged sites lost in the failover: %s" % missing[:20]
    for i, (s, _) in acked.items():
        assert as_written(stored[s["id"]]) == as_written(s), "site %d differs:\n%s\n%s" % (
            i, s, stored[s["id"]])
    direct = stored_sites(pair, pair.standby)
    for i, (s, _) in acked.items():
        assert direct[s["id"]] == ("site-%d" % i, 2, 2), (i, direct.get(s["id"]))
    # still one engine, the one the lease row on the promoted server names, and it commits
    wait_until(lambda: len(engines(rs)) == 1, 30, "one engine")
    (eng, epoch1), = engines(rs)
    holder, epoch_row = pair.psql(pair.standby, "SELECT holder, epoch FROM leases "
                                                "WHERE name = 'engine'")[0]
    assert holder.startswith(eng.name + "#") and int(epoch_row) == epoch1 >= epoch0, (
        holder, epoch_row, epoch0, epoch1)
    rounds = int(pair.psql(pair.standby, "SELECT count(*) FROM probe_rounds")[0][0])
    wait_until(lambda: int(pair.psql(pair.standby, "SELECT count(*) FROM probe_rounds")[0][0])
               > rounds, 30, "a probe round committed on the promoted server")
    print("  engine %s (epoch %d -> %d) %.2f s after the promotion"
          % (eng.name, epoch0, epoch1, lead))
    # the listening connections are back: a change on r0 reaches the node polling r1
    for r in rs:
        wait_until(lambda r=r: metric(r, "cdnca_signals_listening") == 1, 30,
                   "%s listening again" % r.name)
    sid = acked[last_i][0]["id"]
    t0 = time.monotonic()
    st, body, _ = r0.api("PATCH", "/v1/sites/%d" % sid, {"name": "after-promotion"})
    assert st == 200, (st, body)
    wait_until(lambda: poller.sees(sid, "after-promotion"), 10,
               "the change on r0 reaches the node polling r1")
    print("  a change on r0 after the promotion reached the node on r1 in %.3f s"
          % (time.monotonic() - t0))
    poller.finish()
    odd = [e for e in poller.errors if e != (503, "db_unavailable")]
    assert not odd, odd[:5]
    pubs = [(int(a), int(b)) for a, b in pair.psql(
        pair.standby, "SELECT seq, site_id FROM publications ORDER BY seq")]
    check_no_gap(pubs, poller.answers)
    for r in rs:
        r.stop()


def test_switchover_old_primary_fenced_read_only(tmp):
    """Case 6, a planned switchover: the old primary stays up but is fenced read-only
    (default_transaction_read_only=on and a reload, as an operator does before promoting the
    standby). controld's writes on it fail with SQLSTATE 25006, answered 503 db_unavailable,
    and every connection — the listening one too — leaves it for the promoted standby."""
    pair = pgstandby.Pair(sync=True).start()
    try:
        _fenced_switchover(pair, tmp)
    except BaseException:
        pair.print_logs()
        raise
    finally:
        pair.stop()


def _fenced_switchover(pair, tmp):
    rs = replicas_on(pair, 2, tmp)
    r0, r1 = rs
    wait_until(lambda: len(engines(rs)) == 1, 30, "one engine")
    st, node, _ = r0.api("POST", "/v1/nodes", {"name": "n1"})
    assert st == 201, node
    poller = ConfigPoller(r1, node["token"]).begin()
    acked, answers = {}, []
    writers = [Writer(r, i, 2, acked, answers).begin() for i, r in enumerate(rs)]
    try:
        wait_until(lambda: len(acked) >= 20, 60, "20 acknowledged writes before the fence")
        pair.psql(pair.primary, "ALTER SYSTEM SET default_transaction_read_only = on")
        pair.psql(pair.primary, "SELECT pg_reload_conf()")
        fenced = time.monotonic()
        # writes stop being acknowledged (every replica's write connection hits 25006 or
        # cannot find a read-write server)
        wait_until(lambda: [a for a in list(answers) if a[0] > fenced and a[2] == 503], 30,
                   "writes refused after the fence")
        refused = time.monotonic()
        time.sleep(2)
        for r in rs:
            assert r.running(), "%s exited while the primary was read-only" % r.name
        # the standby has every commit (synchronous replication): promote it (answers before
        # promote is called found no server to write on; once it runs, the promoted server may
        # acknowledge a write before promote() returns)
        promoting = time.monotonic()
        pair.promote()
        promoted = time.monotonic()
        promoted_at_server = pair.psql(pair.primary, "SELECT now()")[0][0]
        wait_until(lambda: sum(1 for _, t in list(acked.values()) if t > promoted) >= 20, 60,
                   "writes acknowledged after the promotion")
        wait_until(lambda: all(health(r)[0] == 200 for r in rs), 30,
                   "/healthz 200 on every replica after the promotion")
    finally:
        for w in writers:
            w.finish()
    print("  fence -> first refusal %.2f s; %d writes acknowledged; first write %.2f s after "
          "the promotion" % (refused - fenced, len(acked),
                             min(t for _, t in acked.values() if t > promoted) - promoted))
    bad = [(st, code) for _, _, st, code in answers
           if (st, code) not in ((201, None), (503, "db_unavailable"))]
    assert not bad, "answers other than 201 and 503 db_unavailable: %s" % bad[:10]
    # a write sent well after the fence (every server process has the reload by then) and
    # answered before the promotion found no server to write on
    gap = [(st, code) for t0, t1, st, code in answers if fenced + 1 < t0 and t1 < promoting]
    assert gap and all(a == (503, "db_unavailable") for a in gap), gap[:10]
    # nothing of controld runs on the read-only server after the promotion, the listening
    # connections (which read the last seq every second) included: each connection left it at
    # its first statement after one of them found it read-only. (Connections idle since then
    # stay open there until their thread next needs the database. A reconnect tries the hosts in
    # order, so it may open a session on the fenced server that libpq leaves at once, having
    # read that it is read-only, before any statement: such a session has no query.)
    ran = pair.psql(pair.primary, "SELECT state, left(query, 80) FROM pg_stat_activity WHERE "
                                  "application_name = 'controld' AND state_change > '%s' "
                                  "AND query <> ''" % promoted_at_server)
    assert not ran, "controld statements on the fenced primary after the promotion: %s" % ran
    for r in rs:
        wait_until(lambda r=r: metric(r, "cdnca_signals_listening") == 1, 30,
                   "%s listening on the promoted server" % r.name)
    assert controld_backends(pair, pair.standby) >= 4
    # every acknowledged write is on the promoted server, unaltered
    stored = all_sites(r1)
    for i, (s, _) in acked.items():
        assert s["id"] in stored and as_written(stored[s["id"]]) == as_written(s), (
            "site %d lost or differs: %s" % (i, stored.get(s["id"])))
    # a change on r0 reaches the node polling r1, through the promoted server's notifications
    sid = next(iter(acked.values()))[0]["id"]
    st, body, _ = r0.api("PATCH", "/v1/sites/%d" % sid, {"name": "after-switchover"})
    assert st == 200, (st, body)
    wait_until(lambda: poller.sees(sid, "after-switchover"), 10,
               "the change on r0 reaches the node polling r1")
    poller.finish()
    odd = [e for e in poller.errors if e != (503, "db_unavailable")]
    assert not odd, odd[:5]
    pubs = [(int(a), int(b)) for a, b in pair.psql(
        pair.standby, "SELECT seq, site_id FROM publications ORDER BY seq")]
    check_no_gap(pubs, poller.answers)
    wait_until(lambda: len(engines(rs)) == 1, 30, "one engine after the switchover")
    for r in rs:
        r.stop()


if __name__ == "__main__":
    if not pgfixture.available():
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin; tests/deps.sh "
              "installs postgresql)")
        sys.exit(77)
    harness.main()
