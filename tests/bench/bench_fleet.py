#!/usr/bin/env python3
"""bench_fleet — GET /v1/summary and filtered GET /v1/sites pages over a large fleet.

Creates the schema by starting controld once on a temporary database, stops it, fills the
database directly with N sites (two origins and one hostname each; 5 % on a backup level, 1 %
with every level down, 0.5 % with failback available, 2 % paused — the state flag columns set as
the engine would), starts controld again and times, over keep-alive-free HTTP requests from this
process: the summary, the first page of each state= filter, a page deep into on_backup (after=),
a q= search that matches one site and one that matches none (the worst case: a full scan), and
the unfiltered first page. Prints min / median / p95 per request in ms. Bounded: every wait has a
timeout; controld is stopped with SIGTERM at the end.

    python3 bench_fleet.py [--build DIR] [--sites 100000] [--repeat 20]
"""

import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def call(port, path, token):
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + token})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, data
    finally:
        conn.close()


def start(binary, db, port, token, logf):
    env = dict(os.environ, CDNCA_ADMIN_TOKEN=token)
    p = subprocess.Popen([binary, "--listen", "%s:%d" % (HOST, port), "--db", db,
                          "--probe-interval-ms", "3600000"], env=env, stdout=logf,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            sys.exit("controld exited with %s (see its log)" % p.returncode)
        try:
            if call(port, "/healthz", token)[0] == 200:
                return p
        except OSError:
            pass
        time.sleep(0.1)
    p.kill()
    sys.exit("controld did not answer /healthz within 60 s")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def fill(db, n):
    """n sites straight into the database; returns the expected summary counts."""
    now = int(time.time() * 1000)
    con = sqlite3.connect(db)
    counts = {"on_backup": 0, "all_down": 0, "failback": 0, "paused": 0}
    with con:
        sites, hosts, origins = [], [], []
        for i in range(1, n + 1):
            backup = i % 20 == 0
            down = i % 100 == 7
            failback = i % 200 == 40  # also on a backup level (i % 20 == 0)
            paused = i % 50 == 3
            counts["on_backup"] += backup
            counts["all_down"] += down
            counts["failback"] += failback
            counts["paused"] += paused
            sites.append((i, "site-%06d" % i, 2 if backup else 1, int(backup), int(down),
                          int(failback), int(paused), now, now))
            hosts.append(("www.site-%06d.example.com" % i, i, 0))
            origins.append((2 * i - 1, i, 1, "10.0.%d.%d" % (i // 250 % 250, i % 250 + 1), now))
            origins.append((2 * i, i, 2, "10.1.%d.%d" % (i // 250 % 250, i % 250 + 1), now))
        con.executemany(
            "INSERT INTO sites (id, name, current_level, state_on_backup, state_all_down, "
            "state_failback_available, state_paused, hc_enabled, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)", sites)
        con.executemany("INSERT INTO hostnames (hostname, site_id, position) VALUES (?, ?, ?)",
                        hosts)
        con.executemany("INSERT INTO origins (id, site_id, level, address, port, scheme, "
                        "created_at) VALUES (?, ?, ?, ?, 443, 'https', ?)", origins)
    con.close()
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "..", "build"))
    ap.add_argument("--sites", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    binary = os.path.join(os.path.abspath(args.build), "controld", "controld")
    tmp = tempfile.mkdtemp(prefix="cdnca-bench-fleet-")
    db = os.path.join(tmp, "controld.db")
    token = "bench-" + secrets.token_hex(16)
    port = free_port()
    try:
        with open(os.path.join(tmp, "controld.log"), "ab") as logf:
            stop(start(binary, db, port, token, logf))  # creates the schema
            t0 = time.monotonic()
            counts = fill(db, args.sites)
            print("filled %d sites in %.1f s" % (args.sites, time.monotonic() - t0))
            p = start(binary, db, port, token, logf)
            try:
                status, data = call(port, "/v1/summary", token)
                summary = json.loads(data)
                print("summary:", summary)
                assert summary["sites"] == args.sites, summary
                assert summary["on_backup"] == counts["on_backup"], (summary, counts)
                assert summary["paused"] == counts["paused"], (summary, counts)
                deep = args.sites * 9 // 10
                cases = [
                    ("summary", "/v1/summary"),
                    ("state=on_backup", "/v1/sites?state=on_backup&limit=100"),
                    ("state=on_backup after 90%", "/v1/sites?state=on_backup&limit=100&after=%d" % deep),
                    ("state=all_down", "/v1/sites?state=all_down&limit=100"),
                    ("state=failback_available", "/v1/sites?state=failback_available&limit=100"),
                    ("state=paused", "/v1/sites?state=paused&limit=100"),
                    ("q= one match", "/v1/sites?q=site-%06d.example&limit=100" % (args.sites // 2)),
                    ("q= no match (full scan)", "/v1/sites?q=nothing-matches&limit=100"),
                    ("q= + state", "/v1/sites?q=site-0&state=all_down&limit=100"),
                    ("no filter", "/v1/sites?limit=100"),
                ]
                print("%-28s %8s %8s %8s %6s" % ("request", "min ms", "p50 ms", "p95 ms", "rows"))
                for name, path in cases:
                    times = []
                    rows = 0
                    for _ in range(args.repeat):
                        t = time.monotonic()
                        status, data = call(port, path, token)
                        times.append((time.monotonic() - t) * 1000)
                        assert status == 200, (path, status, data[:200])
                    body = json.loads(data)
                    rows = len(body["sites"]) if isinstance(body.get("sites"), list) else 1
                    times.sort()
                    print("%-28s %8.2f %8.2f %8.2f %6d" % (
                        name, times[0], statistics.median(times),
                        times[min(len(times) - 1, int(len(times) * 0.95))], rows))
            finally:
                stop(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
