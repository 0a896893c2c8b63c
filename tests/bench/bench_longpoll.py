#!/usr/bin/env python3
"""bench_longpoll — N simulated nodes long-polling one controld for config, then one change.

Starts controld on loopback (its own temp database), enrols N nodes, has each hold a
GET /v1/node/config?since=SEQ&wait_ms=30000 on its own keep-alive connection (asyncio, raw
sockets), then PATCHes a site and measures, per node, the time from the PATCH's 200 to that
node holding the new seq. Prints p50/p99/max and controld's RSS and CPU time over the fan-out.
Bounded: every wait has a timeout; everything stops by itself.

    python3 bench_longpoll.py [--build DIR] [--nodes 1000] [--rounds 3] [--churn-s 0]
                              [--churn-wait-ms 2000]

--churn-s S then has every node poll again and again for S seconds with wait_ms W and no change
(each poll held W ms, then 304): controld's CPU per poll answered, which should not grow with
the number of nodes holding polls.
"""

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def api(port, method, path, token, body=None):
    import http.client
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    hdrs = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=hdrs)
    r = conn.getresponse()
    payload = r.read()
    conn.close()
    return r.status, (json.loads(payload) if payload else None)


def proc_stats(pid):
    """(RSS in KiB, CPU seconds user+system) of pid."""
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / tick


async def read_response(reader):
    """One HTTP/1.1 response -> (status, body bytes)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for l in lines[1:]:
        if l.lower().startswith("content-length:"):
            length = int(l.split(":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return status, body


class SimNode:
    def __init__(self, port, token):
        self.port, self.token = port, token
        self.seq = 0
        self.got_at = {}  # seq -> monotonic time it arrived

    async def connect(self):
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    def send_poll(self, wait_ms):
        req = ("GET /v1/node/config?since=%d&wait_ms=%d HTTP/1.1\r\nHost: controld\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (self.seq, wait_ms, self.token))
        self.writer.write(req.encode())

    async def poll_once(self, wait_ms):
        self.send_poll(wait_ms)
        await self.writer.drain()
        status, body = await read_response(self.reader)
        if status == 200:
            self.seq = json.loads(body)["seq"]
            self.got_at[self.seq] = time.monotonic()
        return status

    def close(self):
        self.writer.close()


async def run(args, port, admin, tokens, site_id, pid):
    nodes = [SimNode(port, t) for t in tokens]
    for i in range(0, len(nodes), 100):  # connect in batches to stay below the accept backlog
        await asyncio.gather(*(n.connect() for n in nodes[i:i + 100]))
    sts = await asyncio.gather(*(n.poll_once(0) for n in nodes))
    assert all(s == 200 for s in sts), set(sts)
    results = []
    for rnd in range(args.rounds):
        base = nodes[0].seq
        polls = [asyncio.ensure_future(n.poll_once(30000)) for n in nodes]
        await asyncio.sleep(1.5)  # let every poll be suspended in controld
        assert not any(p.done() for p in polls), "a poll returned before the change"
        rss0, cpu0 = proc_stats(pid)
        st, _ = await asyncio.get_running_loop().run_in_executor(
            None, api, port, "PATCH", "/v1/sites/%d" % site_id, admin, {"name": "bench-%d" % rnd})
        t0 = time.monotonic()
        assert st == 200, st
        done, pending = await asyncio.wait(polls, timeout=30)
        rss1, cpu1 = proc_stats(pid)
        assert not pending, "%d nodes did not get the change within 30 s" % len(pending)
        assert all(p.result() == 200 for p in done)
        new = nodes[0].seq
        assert new > base and all(n.seq == new for n in nodes)
        lat = sorted(max(0.0, n.got_at[new] - t0) * 1000 for n in nodes)
        results.append((lat, rss1, cpu1 - cpu0))
        print("round %d: seq %d -> %d, %d nodes: p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
              "controld RSS %.1f MiB, CPU %.0f ms during the fan-out"
              % (rnd + 1, base, new, len(nodes), lat[len(lat) // 2],
                 lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1], rss1 / 1024,
                 (cpu1 - cpu0) * 1000), flush=True)
    if args.churn_s > 0:
        end = time.monotonic() + args.churn_s
        answered = [0]

        async def churn(n):
            await asyncio.sleep(args.churn_wait_ms / 1000.0 * (hash(n.token) % 1000) / 1000.0)
            while time.monotonic() < end:
                st = await n.poll_once(args.churn_wait_ms)
                assert st in (200, 304), st
                answered[0] += 1
        _, cpu0 = proc_stats(pid)
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(churn(n) for n in nodes)),
                               args.churn_s + args.churn_wait_ms / 1000.0 + 30)
        _, cpu1 = proc_stats(pid)
        el = time.monotonic() - t0
        print("churn: %d nodes, wait_ms %d, %.1f s: %d polls answered (%.0f/s); controld CPU "
              "%.2f s, %.1f us per poll" % (len(nodes), args.churn_wait_ms, el, answered[0],
                                             answered[0] / el, cpu1 - cpu0,
                                             (cpu1 - cpu0) * 1e6 / max(1, answered[0])),
              flush=True)
    for n in nodes:
        n.close()
    return results


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.environ.get("CDNCA_BUILD",
                                                      os.path.join(here, "..", "..", "build")))
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--churn-s", type=float, default=0)
    ap.add_argument("--churn-wait-ms", type=int, default=2000)
    args = ap.parse_args()
    want = args.nodes * 2 + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    tmp = tempfile.mkdtemp(prefix="bench-longpoll-")
    port = free_port()
    admin = "bench-admin-" + os.urandom(16).hex()
    log = open(os.path.join(tmp, "controld.log"), "wb")
    proc = subprocess.Popen([os.path.join(args.build, "controld", "controld"), "--listen",
                             "%s:%d" % (HOST, port), "--db", os.path.join(tmp, "c.db"),
                             "--log-level", "warn", "--max-connections-per-ip", "0"],
                            env=dict(os.environ, CDNCA_ADMIN_TOKEN=admin), stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                if api(port, "GET", "/healthz", admin)[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        st, site = api(port, "POST", "/v1/sites", admin, {
            "name": "bench", "hostnames": ["bench.test"],
            "origins": [{"level": 1, "address": "127.0.0.1", "port": 9, "scheme": "http"},
                        {"level": 2, "address": "127.0.0.1", "port": 10, "scheme": "http"}]})
        assert st == 201, site
        t = time.monotonic()
        tokens = []
        for i in range(args.nodes):
            st, body = api(port, "POST", "/v1/nodes", admin, {"name": "sim-%d" % i})
            assert st == 201, body
            tokens.append(body["token"])
        print("enrolled %d nodes in %.1f s" % (args.nodes, time.monotonic() - t), flush=True)
        results = asyncio.run(asyncio.wait_for(run(args, port, admin, tokens, site["id"],
                                                   proc.pid), 600))
        allmax = max(r[0][-1] for r in results)
        print("worst max over %d rounds: %.1f ms (goal <= 1000 ms): %s"
              % (len(results), allmax, "OK" if allmax <= 1000 else "OVER"))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=20)
            print("controld exited %d" % rc)
        except subprocess.TimeoutExpired:
            proc.kill()
            print("controld did not stop within 20 s of SIGTERM")
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
