#!/usr/bin/env python3
"""bench_cluster — cluster mode (docs/design.md#cluster-mode): 3 controld replicas on this machine, one PostgreSQL.

    python3 bench_cluster.py [--build DIR] [--kills 7] [--ttl-ms 2000] [--probe-ms 500]
                             [--runs 3] [--duration 5] [--nodes 1000] [--changes 5]
                             [--only failover,writes,fanout]

Starts a throwaway PostgreSQL cluster (tests/integration/pgfixture.py: Unix socket in a temp dir,
no TCP port) and, for each measurement, 3 replicas on a fresh database (loopback ports):
  1. engine failover: a site with health checks on two demo origins (origin.py) is probed every
     PROBE_MS by the engine; KILLS times: kill -9 the engine replica and measure (a) the time
     until another replica's /healthz says "engine" and (b) the time until the first probe round
     committed after the kill (probe_rounds.finished_at of the first new row; the killed engine's
     round in flight never commits, so that row is the new leader's). The killed replica is
     started again (a new holder) before the next kill. Goal: (b) <= ttl + 1 round.
  2. API writes/s: POST /v1/sites (a new site per request, as bench_drivers.py) from 3 wrk
     processes (-t1 -c3, DURATION s each, at the same time), aimed at the 3 replicas (one each)
     or all at replica 1: the same load, 3 replicas vs 1, taking turns, RUNS times, each on a
     fresh database; the ratio of the medians.
  3. long-poll fan-out: NODES simulated nodes (asyncio raw sockets, as bench_longpoll.py), node i
     on replica i mod 3, each holding GET /v1/node/config?since=SEQ&wait_ms=30000; a PATCH on
     one replica (turning over the replicas); per node the time from the PATCH's 200 to holding
     the new seq; CHANGES changes; then the same nodes all on one replica for comparison. Goal:
     p99 <= 1 s.
Prints a Markdown table per measurement and the medians. Every wait is bounded; every process it
starts (replicas, origins, wrk, PostgreSQL) is stopped on exit, also on Ctrl-C. Needs wrk for 2.
"""

import argparse
import asyncio
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import bench_longpoll  # noqa: E402
import pgfixture  # noqa: E402

HOST = "127.0.0.1"
ORIGIN = os.path.join(HERE, "..", "integration", "origin.py")
PROCS = []  # every process started here, stopped at exit

WRITE_LUA = r"""
local n = 0
local prefix = "w"
init = function(args) prefix = args[1] or "w" end
request = function()
  n = n + 1
  local name = string.format("%s-%d", prefix, n)
  local body = string.format('{"name":"%s","hostnames":["%s.bench.test","www.%s.bench.test"],'
    .. '"health_check":{"enabled":false},'
    .. '"origins":[{"address":"10.0.0.1"},{"address":"10.0.0.2","scheme":"http","level":2}]}',
    name, name, name)
  return wrk.format("POST", "/v1/sites", nil, body)
end
"""


def spawn(argv, log, env=None):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         env=env)
    PROCS.append(p)
    return p


def stop_all():
    for p in PROCS:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 20
    for p in PROCS:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    PROCS.clear()


class Replica:
    """One controld of the cluster: --replica-name, lease ttl, probe interval, log to a file."""

    def __init__(self, build, db, tmp, name, admin, ttl_ms, probe_ms):
        self.build, self.db, self.tmp, self.name, self.admin = build, db, tmp, name, admin
        self.ttl_ms, self.probe_ms = ttl_ms, probe_ms
        self.port = bench_longpoll.free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(self.tmp, "%s.log" % self.name), "ab")
        self.proc = spawn([os.path.join(self.build, "controld", "controld"),
                           "--listen", "%s:%d" % (HOST, self.port), "--db", self.db,
                           "--replica-name", self.name, "--lease-ttl-ms", str(self.ttl_ms),
                           "--probe-interval-ms", str(self.probe_ms), "--log-level", "warn"],
                          log, env=dict(os.environ, CDNCA_ADMIN_TOKEN=self.admin))
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited %d (see %s.log)" % (self.name, self.proc.returncode,
                                                                 self.name))
            if self.health() is not None:
                return self
            time.sleep(0.05)
        raise RuntimeError("%s did not answer /healthz within 30 s" % self.name)

    def health(self):
        try:
            st, body = bench_longpoll.api(self.port, "GET", "/healthz", self.admin)
        except (OSError, ValueError):
            return None
        return body if st == 200 else None

    def role(self):
        return (self.health() or {}).get("role")

    def api(self, method, path, body=None):
        return bench_longpoll.api(self.port, method, path, self.admin, body)

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Cluster:
    def __init__(self, args, tmp, ttl_ms=15000, probe_ms=30000, n=3):
        self.db = pgfixture.new_database()
        self.dbname = pgfixture.dbname_of(self.db)
        self.admin = "bench-admin-" + os.urandom(16).hex()
        self.replicas = [Replica(args.build, self.db, tmp, "r%d" % (i + 1), self.admin, ttl_ms,
                                 probe_ms) for i in range(n)]

    def start(self):
        self.replicas[0].start()  # the first one migrates; then the others
        for r in self.replicas[1:]:
            r.start()
        return self

    def stop(self):
        for r in self.replicas:
            r.stop()

    def sql(self, q):
        return pgfixture.cluster().psql(self.dbname, q)

    def engine(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in self.replicas if r.proc.poll() is None and r.role() == "engine"]
            if len(found) == 1:
                return found[0]
            time.sleep(0.05)
        raise RuntimeError("no single engine within %d s" % timeout)


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))]


def load_note():
    la = os.getloadavg()
    return "load average %.1f %.1f %.1f on %d CPUs" % (la[0], la[1], la[2], os.cpu_count())


# ---- 1. engine failover ----------------------------------------------------------------------

def start_origin(tmp, name):
    portfile = os.path.join(tmp, "origin-%s.port" % name)
    log = open(os.path.join(tmp, "origin-%s.log" % name), "ab")
    p = spawn([sys.executable, ORIGIN, "--host", HOST, "--port", "0", "--portfile", portfile,
               "--name", name], log)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(portfile):
            with open(portfile) as f:
                text = f.read().strip()
            if text:
                return int(text)
        if p.poll() is not None:
            raise RuntimeError("origin %s exited" % name)
        time.sleep(0.05)
    raise RuntimeError("origin %s did not start" % name)


def bench_failover(args, tmp):
    o1, o2 = start_origin(tmp, "o1"), start_origin(tmp, "o2")
    c = Cluster(args, tmp, ttl_ms=args.ttl_ms, probe_ms=args.probe_ms).start()
    rows = []
    try:
        st, site = c.replicas[0].api("POST", "/v1/sites", {
            "name": "fo", "hostnames": ["fo.bench.test"],
            "health_check": {"enabled": True, "path": "/hc", "timeout_ms": 1000},
            "origins": [{"level": 1, "address": HOST, "port": o1, "scheme": "http"},
                        {"level": 2, "address": HOST, "port": o2, "scheme": "http"}]})
        assert st == 201, site
        print("\n### 1. Engine failover: kill -9 of the engine, lease ttl %d ms, probe rounds "
              "every %d ms (goal: next round committed within ttl + 1 round = %d ms)\n"
              % (args.ttl_ms, args.probe_ms, args.ttl_ms + args.probe_ms))
        print("| kill | engine killed | new engine | kill → new engine ms | kill → next round "
              "committed ms | load |")
        print("|---:|---|---|---:|---:|---|", flush=True)
        for k in range(args.kills):
            eng = c.engine(timeout=args.ttl_ms / 1000 * 3 + 30)
            # let the engine run a few rounds first (it renews every ttl/3)
            time.sleep(args.probe_ms / 1000 * 2 + args.ttl_ms / 1000 / 3)
            last = int(c.sql("SELECT COALESCE(MAX(id), 0) FROM probe_rounds")[0][0])
            t_kill = time.monotonic()
            wall_kill_ms = time.time() * 1000
            eng.kill9()
            rest = [r for r in c.replicas if r is not eng]
            new, t_engine = None, None
            deadline = t_kill + args.ttl_ms / 1000 * 3 + 30
            while time.monotonic() < deadline and new is None:
                for r in rest:
                    if r.role() == "engine":
                        new, t_engine = r, time.monotonic()
                        break
                else:
                    time.sleep(0.02)
            if new is None:
                raise RuntimeError("no new engine within %.0f s of the kill"
                                   % (deadline - t_kill))
            round_ms = None
            while time.monotonic() < deadline:
                rows_ = c.sql("SELECT MIN(finished_at) FROM probe_rounds WHERE id > %d" % last)
                if rows_ and rows_[0][0]:
                    round_ms = int(rows_[0][0]) - wall_kill_ms
                    break
                time.sleep(0.1)
            if round_ms is None:
                raise RuntimeError("no probe round committed within %.0f s of the kill"
                                   % (deadline - t_kill))
            eng_ms = (t_engine - t_kill) * 1000
            rows.append((eng_ms, round_ms))
            print("| %d | %s | %s | %.0f | %.0f | %s |" % (k + 1, eng.name, new.name, eng_ms,
                                                           round_ms, load_note()), flush=True)
            eng.start()  # back to 3 replicas (a new holder name, a new epoch when it leads)
        med_e = statistics.median(r[0] for r in rows)
        med_r = statistics.median(r[1] for r in rows)
        goal = args.ttl_ms + args.probe_ms
        print("| median | | | **%.0f** | **%.0f** | |" % (med_e, med_r))
        print("\nfailover: median kill → new engine %.0f ms (ttl %d; the contract: within ttl + "
              "ttl/3 = %d), kill → next round committed %.0f ms (goal <= %d): %s; max %.0f ms"
              % (med_e, args.ttl_ms, args.ttl_ms * 4 // 3, med_r, goal,
                 "OK" if med_r <= goal else "OVER", max(r[1] for r in rows)), flush=True)
        return {"engine_ms": med_e, "round_ms": med_r}
    finally:
        c.stop()


# ---- 2. API writes/s over 3 replicas vs 1 -------------------------------------------------------

def wrk_parallel(ports, token, duration, script):
    """One wrk (-t1 -c3) per port, all at once, each naming its sites with its own prefix;
    (total 2xx answers/s, total non-2xx)."""
    procs = []
    for i, p in enumerate(ports):
        cmd = ["wrk", "-t1", "-c3", "-d%ds" % duration, "-s", script,
               "-H", "Authorization: Bearer " + token, "-H", "Content-Type: application/json",
               "http://%s:%d/v1/sites" % (HOST, p), "--", "w%d-%s" % (i, os.urandom(4).hex())]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
        PROCS.append(procs[-1])
    total, bad = 0.0, 0
    for pr in procs:
        out, _ = pr.communicate(timeout=duration + 60)
        m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
        if not m:
            raise RuntimeError("wrk printed no request count:\n" + out)
        secs = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
        mb = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
        nbad = int(mb.group(1)) if mb else 0
        total += (int(m.group(1)) - nbad) / secs
        bad += nbad
    return total, bad


def bench_writes(args, tmp):
    script = os.path.join(tmp, "write.lua")
    with open(script, "w") as f:
        f.write(WRITE_LUA)
    print("\n### 2. API writes/s (POST /v1/sites): 3 wrk -t1 -c3 for %d s at once, aimed at 3 "
          "replicas (one each) or all at one replica\n" % args.duration)
    print("| run | replicas | writes/s (2xx) | non-2xx | load |")
    print("|---:|---|---:|---:|---|", flush=True)
    res = {"3": [], "1": []}
    for run in range(args.runs):
        for mode in ("3", "1"):
            c = Cluster(args, tmp).start()
            try:
                ports = ([r.port for r in c.replicas] if mode == "3"
                         else [c.replicas[0].port] * 3)
                w, bad = wrk_parallel(ports, c.admin, args.duration, script)
                note = load_note()
            finally:
                c.stop()
            res[mode].append(w)
            print("| %d | %s | %.0f | %d | %s |" % (run + 1, "3 (spread)" if mode == "3"
                                                    else "1 (all on r1)", w, bad, note),
                  flush=True)
    m3, m1 = statistics.median(res["3"]), statistics.median(res["1"])
    print("| median | 3 (spread) | **%.0f** | | |" % m3)
    print("| median | 1 | **%.0f** | | |" % m1)
    print("\nwrites/s spread over 3 replicas / all on 1: %.2f" % (m3 / m1), flush=True)
    return {"w3": m3, "w1": m1}


# ---- 3. long-poll fan-out over 3 replicas ------------------------------------------------------

async def fanout_run(ports, admin, tokens, site_id, writers, changes):
    """Node i polls ports[i % len(ports)]; CHANGES PATCHes, change j through writers[j % n].
    Returns [(writer port, sorted latencies ms, {port: sorted latencies})]."""
    nodes = [bench_longpoll.SimNode(ports[i % len(ports)], t) for i, t in enumerate(tokens)]
    for i in range(0, len(nodes), 100):  # connect in batches to stay below the accept backlog
        await asyncio.gather(*(n.connect() for n in nodes[i:i + 100]))
    sts = await asyncio.gather(*(n.poll_once(0) for n in nodes))
    assert all(s == 200 for s in sts), set(sts)
    out = []
    loop = asyncio.get_running_loop()
    for j in range(changes):
        base = max(n.seq for n in nodes)
        polls = [asyncio.ensure_future(n.poll_once(30000)) for n in nodes]
        await asyncio.sleep(1.5)  # let every poll be suspended
        assert not any(p.done() for p in polls), "a poll returned before the change"
        wport = writers[j % len(writers)]
        st, _ = await loop.run_in_executor(None, bench_longpoll.api, wport, "PATCH",
                                           "/v1/sites/%d" % site_id, admin,
                                           {"name": "fan-%d-%d" % (len(ports), j)})
        t0 = time.monotonic()
        assert st == 200, st
        done, pending = await asyncio.wait(polls, timeout=30)
        assert not pending, "%d nodes did not get the change within 30 s" % len(pending)
        assert all(p.result() == 200 for p in done)
        new = max(n.seq for n in nodes)
        assert new > base and all(n.seq == new for n in nodes), "not every node has seq %d" % new
        lat = sorted(max(0.0, n.got_at[new] - t0) * 1000 for n in nodes)
        per = {}
        for n in nodes:
            per.setdefault(n.port, []).append(max(0.0, n.got_at[new] - t0) * 1000)
        out.append((wport, lat, {p: sorted(v) for p, v in per.items()}))
    for n in nodes:
        n.close()
    return out


def bench_fanout(args, tmp):
    c = Cluster(args, tmp).start()
    try:
        st, site = c.replicas[0].api("POST", "/v1/sites", {
            "name": "fan", "hostnames": ["fan.bench.test"], "health_check": {"enabled": False},
            "origins": [{"level": 1, "address": HOST, "port": 9, "scheme": "http"},
                        {"level": 2, "address": HOST, "port": 10, "scheme": "http"}]})
        assert st == 201, site
        t = time.monotonic()
        tokens = []
        for i in range(args.nodes):
            st, body = c.replicas[i % 3].api("POST", "/v1/nodes", {"name": "sim-%d" % i})
            assert st == 201, body
            tokens.append(body["token"])
        print("\n### 3. Long-poll fan-out: %d simulated nodes (enrolled in %.1f s)\n"
              % (args.nodes, time.monotonic() - t))
        print("| nodes on | change | made on | p50 ms | p99 ms | max ms | p99 per replica ms "
              "| load |")
        print("|---|---:|---|---:|---:|---:|---|---|", flush=True)
        ports = [r.port for r in c.replicas]
        name = {r.port: r.name for r in c.replicas}
        summary = {}
        for label, pp, writers in (("3 replicas", ports, ports),
                                   ("1 replica (r1)", ports[:1], ports[:1])):
            res = asyncio.run(asyncio.wait_for(
                fanout_run(pp, c.admin, tokens, site["id"], writers, args.changes), 600))
            for j, (wport, lat, per) in enumerate(res):
                print("| %s | %d | %s | %.1f | %.1f | %.1f | %s | %s |"
                      % (label, j + 1, name[wport], pct(lat, 0.5), pct(lat, 0.99), lat[-1],
                         ", ".join("%s %.1f" % (name[p], pct(v, 0.99))
                                   for p, v in sorted(per.items())), load_note()), flush=True)
            p99s = [pct(lat, 0.99) for _, lat, _ in res]
            summary[label] = (statistics.median(p99s), max(p99s), max(lat[-1] for _, lat, _ in res))
        for label, (med, worst, mx) in summary.items():
            print("\nfan-out, nodes on %s: median p99 %.1f ms, worst p99 %.1f ms, worst max %.1f "
                  "ms over %d changes (goal p99 <= 1000 ms): %s"
                  % (label, med, worst, mx, args.changes, "OK" if worst <= 1000 else "OVER"),
                  flush=True)
        return summary
    finally:
        c.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CDNCA_BUILD",
                                                      os.path.join(HERE, "..", "..", "build")))
    ap.add_argument("--kills", type=int, default=7)
    ap.add_argument("--ttl-ms", type=int, default=2000)
    ap.add_argument("--probe-ms", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--changes", type=int, default=5)
    ap.add_argument("--only", default="failover,writes,fanout")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if (not 1 <= args.kills <= 30 or not 1 <= args.runs <= 9 or not 1 <= args.duration <= 60
            or not 1 <= args.nodes <= 5000 or not 1 <= args.changes <= 20
            or not 1000 <= args.ttl_ms <= 60000 or not 100 <= args.probe_ms <= 60000
            or not only <= {"failover", "writes", "fanout"}):
        sys.exit("bench_cluster: --kills 1..30, --runs 1..9, --duration 1..60, --nodes 1..5000, "
                 "--changes 1..20, --ttl-ms 1000..60000, --probe-ms 100..60000, "
                 "--only failover,writes,fanout")
    if "writes" in only and not shutil.which("wrk"):
        sys.exit("bench_cluster: wrk is needed for the writes measurement (or --only without it)")
    if not pgfixture.available():
        sys.exit("bench_cluster: the PostgreSQL server binaries are needed (pgfixture)")
    want = args.nodes * 2 + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="bench-cluster-")
    print("bench_cluster: %s, %s" % (load_note(), socket.gethostname()), flush=True)
    try:
        pgfixture.cluster()
        if "failover" in only:
            bench_failover(args, tmp)
            stop_all()
        if "writes" in only:
            bench_writes(args, tmp)
            stop_all()
        if "fanout" in only:
            bench_fanout(args, tmp)
    except KeyboardInterrupt:
        print("bench_cluster: interrupted", file=sys.stderr)
    finally:
        stop_all()
        pgfixture.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
