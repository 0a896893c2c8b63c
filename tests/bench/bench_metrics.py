#!/usr/bin/env python3
"""bench_metrics — GET /metrics on controld over a large fleet (the per-site block of docs/design.md#metrics).

Fills a database with N sites the way bench_fleet.py does (its fill: two origins each, state
flags as the engine would set them), starts controld with --metrics-max-sites M and times, over
fresh connections from this process: scrapes that rebuild the per-site block (a write between
them and a wait past the 1 s minimum age) and scrapes served from the cached block. Prints
min / median / max per kind in ms and the size of the answer. Bounded: a fixed number of
requests, every wait has a timeout, controld is stopped with SIGTERM at the end.

    python3 bench_metrics.py [--build DIR] [--sites 100000] [--max-sites 1000] [--repeat 10]
"""

import argparse
import http.client
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bench_fleet

HOST = bench_fleet.HOST


def scrape(port):
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        t = time.monotonic()
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        data = resp.read()
        ms = (time.monotonic() - t) * 1000
        assert resp.status == 200, (resp.status, data[:200])
        return ms, data
    finally:
        conn.close()


def touch(port, token):
    """One committed write (enrols a node), so the store generation moves."""
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        conn.request("POST", "/v1/nodes", body='{"name": "n-%s"}' % secrets.token_hex(6),
                     headers={"Authorization": "Bearer " + token,
                              "Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 201, resp.status
    finally:
        conn.close()


def start(binary, db, port, token, logf, max_sites):
    env = dict(os.environ, CDNCA_ADMIN_TOKEN=token)
    p = subprocess.Popen([binary, "--listen", "%s:%d" % (HOST, port), "--db", db,
                          "--probe-interval-ms", "3600000", "--metrics-max-sites",
                          str(max_sites)], env=env, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            sys.exit("controld exited with %s (see its log)" % p.returncode)
        try:
            if bench_fleet.call(port, "/healthz", token)[0] == 200:
                return p
        except OSError:
            pass
        time.sleep(0.1)
    p.kill()
    sys.exit("controld did not answer /healthz within 60 s")


def row(name, times, size):
    print("%-34s %8.2f %8.2f %8.2f %10d" % (name, min(times), statistics.median(times),
                                             max(times), size))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "..", "build"))
    ap.add_argument("--sites", type=int, default=100000)
    ap.add_argument("--max-sites", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    binary = os.path.join(os.path.abspath(args.build), "controld", "controld")
    tmp = tempfile.mkdtemp(prefix="cdnca-bench-metrics-")
    db = os.path.join(tmp, "controld.db")
    token = "bench-" + secrets.token_hex(16)
    port = bench_fleet.free_port()
    try:
        with open(os.path.join(tmp, "controld.log"), "ab") as logf:
            bench_fleet.stop(bench_fleet.start(binary, db, port, token, logf))
            t0 = time.monotonic()
            counts = bench_fleet.fill(db, args.sites)
            print("filled %d sites in %.1f s" % (args.sites, time.monotonic() - t0))
            p = start(binary, db, port, token, logf, args.max_sites)
            try:
                _, data = scrape(port)
                text = data.decode()
                assert 'cdnca_sites{state="on_backup"} %d' % counts["on_backup"] in text
                labelled = text.count("cdnca_site_current_level{")
                assert labelled == min(args.max_sites, args.sites), labelled
                print("%-34s %8s %8s %8s %10s" % ("GET /metrics", "min ms", "p50 ms", "max ms",
                                                   "bytes"))
                rebuild = []
                for _ in range(args.repeat):
                    touch(port, token)
                    time.sleep(1.05)
                    ms, data = scrape(port)
                    rebuild.append(ms)
                row("rebuilt block (%d labelled sites)" % labelled, rebuild, len(data))
                cached = []
                for _ in range(args.repeat * 5):
                    ms, data = scrape(port)
                    cached.append(ms)
                row("cached block", cached, len(data))
            finally:
                bench_fleet.stop(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
