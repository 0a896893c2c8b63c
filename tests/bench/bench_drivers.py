#!/usr/bin/env python3
"""bench_drivers — controld over HTTP on SQLite and on PostgreSQL, side by side in one run.

    python3 bench_drivers.py [--build DIR] [--runs 3] [--duration 5] [--nodes 1000]
                             [--fanout-rounds 3]

Starts a throwaway PostgreSQL cluster (tests/integration/pgfixture.py: Unix socket in a temp
dir, no TCP). Then, RUNS times, taking turns SQLite then PostgreSQL, a fresh controld on loopback
(SQLite: a new file; PostgreSQL: a new database) with one site, measured with wrk (-t2 -c8, every
load DURATION seconds, so bounded):
  - API writes/s: POST /v1/sites, each a new site (two hostnames, two origins: one write
    transaction with its publication, event and audit rows), unique names per request;
  - uncached reads/s: GET /v1/sites?limit=20 (a page of the site list: token check, one read
    snapshot, JSON rendering; the list is not in the reply cache).
Then per driver once: the 1,000-node long-poll fan-out of bench_longpoll.py (enrol NODES nodes,
each holds a long poll; PATCH the site; per node the time from the PATCH's 200 to holding the new
seq), FANOUT_ROUNDS changes; p99 and max per change.
Prints every figure, the medians, and PostgreSQL/SQLite ratios of the medians (goals: writes
>= 0.5, fan-out p99 <= 1 s on both). Needs wrk.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import bench_longpoll  # noqa: E402
import pgfixture  # noqa: E402

HOST = "127.0.0.1"

WRITE_LUA = r"""
local n = 0
local id = 0
setup = function(thread) id = id + 1; thread:set("tid", id) end
request = function()
  n = n + 1
  local name = string.format("w%d-%d-%d", tid or 0, n, math.random(1000000000))
  local body = string.format('{"name":"%s","hostnames":["%s.bench.test","www.%s.bench.test"],'
    .. '"origins":[{"address":"10.0.0.1"},{"address":"10.0.0.2","scheme":"http","level":2}]}',
    name, name, name)
  return wrk.format("POST", "/v1/sites", nil, body)
end
"""


class Controld:
    def __init__(self, build, db, tmp, tag):
        self.port = bench_longpoll.free_port()
        self.admin = "bench-admin-" + os.urandom(16).hex()
        self.log = open(os.path.join(tmp, "controld-%s.log" % tag), "wb")
        self.proc = subprocess.Popen(
            [os.path.join(build, "controld", "controld"), "--listen", "%s:%d" % (HOST, self.port),
             "--db", db, "--log-level", "warn"],
            env=dict(os.environ, CDNCA_ADMIN_TOKEN=self.admin), stdout=self.log,
            stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                if self.api("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("controld did not answer /healthz")
        st, self.site = self.api("POST", "/v1/sites", {
            "name": "bench", "hostnames": ["bench.test"],
            "origins": [{"level": 1, "address": "127.0.0.1", "port": 9, "scheme": "http"},
                        {"level": 2, "address": "127.0.0.1", "port": 10, "scheme": "http"}]})
        assert st == 201, self.site

    def api(self, method, path, body=None):
        return bench_longpoll.api(self.port, method, path, self.admin, body)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def wrk(url, token, duration, script=None):
    """(requests/s, non-2xx count) of one wrk run."""
    cmd = ["wrk", "-t2", "-c8", "-d%ds" % duration, "-H", "Authorization: Bearer " + token,
           "-H", "Content-Type: application/json"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, int(m.group(1)) if m else 0


def fanout(c, nodes, rounds):
    tokens = []
    for i in range(nodes):
        st, body = c.api("POST", "/v1/nodes", {"name": "sim-%d" % i})
        assert st == 201, body
        tokens.append(body["token"])
    ns = types.SimpleNamespace(rounds=rounds)
    return asyncio.run(asyncio.wait_for(
        bench_longpoll.run(ns, c.port, c.admin, tokens, c.site["id"], c.proc.pid), 600))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CDNCA_BUILD",
                                                      os.path.join(HERE, "..", "..", "build")))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--fanout-rounds", type=int, default=3)
    args = ap.parse_args()
    if not 1 <= args.runs <= 9 or not 1 <= args.duration <= 60 or not 1 <= args.nodes <= 5000:
        sys.exit("bench_drivers: --runs 1..9, --duration 1..60, --nodes 1..5000")
    if not shutil.which("wrk"):
        sys.exit("bench_drivers: wrk is needed")
    if not pgfixture.available():
        sys.exit("bench_drivers: the PostgreSQL server binaries are needed (pgfixture)")
    os.environ["CDNCA_BUILD"] = os.path.abspath(args.build)  # its controld migrates the template
    want = args.nodes * 2 + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    tmp = tempfile.mkdtemp(prefix="bench-drivers-")
    script = os.path.join(tmp, "write.lua")
    with open(script, "w") as f:
        f.write(WRITE_LUA)
    drivers = ("SQLite", "PostgreSQL")
    res = {d: {"writes": [], "reads": []} for d in drivers}

    def target(d, tag):
        if d == "SQLite":
            return os.path.join(tmp, "%s.db" % tag)
        return pgfixture.new_database()

    try:
        print("| run | driver | API writes/s | non-2xx | uncached reads/s | non-2xx |")
        print("|---:|---|---:|---:|---:|---:|", flush=True)
        for r in range(args.runs):
            for d in drivers:
                c = Controld(args.build, target(d, "run%d" % r), tmp, "%s-%d" % (d, r))
                try:
                    base = "http://%s:%d" % (HOST, c.port)
                    w, wbad = wrk(base + "/v1/sites", c.admin, args.duration, script)
                    rd, rbad = wrk(base + "/v1/sites?limit=20", c.admin, args.duration)
                finally:
                    c.stop()
                res[d]["writes"].append(w)
                res[d]["reads"].append(rd)
                print("| %d | %s | %.0f | %d | %.0f | %d |" % (r + 1, d, w, wbad, rd, rbad),
                      flush=True)
        med = {d: {k: statistics.median(v) for k, v in res[d].items()} for d in drivers}
        for d in drivers:
            print("| median | %s | **%.0f** | | **%.0f** | |" % (d, med[d]["writes"],
                                                              med[d]["reads"]))
        print("\nPostgreSQL/SQLite: API writes %.2f (goal >= 0.5), uncached reads %.2f\n"
              % (med["PostgreSQL"]["writes"] / med["SQLite"]["writes"],
                 med["PostgreSQL"]["reads"] / med["SQLite"]["reads"]), flush=True)
        for d in drivers:
            print("fan-out, %s, %d nodes:" % (d, args.nodes), flush=True)
            c = Controld(args.build, target(d, "fanout"), tmp, "%s-fanout" % d)
            try:
                results = fanout(c, args.nodes, args.fanout_rounds)
            finally:
                c.stop()
            p99 = max(lat[min(len(lat) - 1, int(len(lat) * 0.99))] for lat, _, _ in results)
            print("  %s: worst p99 %.1f ms, worst max %.1f ms over %d changes (goal p99 <= 1000 "
                  "ms): %s" % (d, p99, max(lat[-1] for lat, _, _ in results), len(results),
                               "OK" if p99 <= 1000 else "OVER"), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        pgfixture.stop()


if __name__ == "__main__":
    main()
