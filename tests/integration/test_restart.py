#!/usr/bin/env python3
"""test_restart — noded restarts without a dropped visitor (docs/design.md, Restarts and
upgrades): SIGTERM drains (no new connections, in-flight responses and tunnels finish within
--drain-timeout-ms, idle keep-alive connections close, a busy one gets Connection: close, the
access log is written out), a second SIGTERM or the deadline ends the drain. Real processes on
loopback under visitor load (a request every 10 ms): every response read to its end and
counted."""

import os
import signal
import socket
import time

from harness import wait_until
import edge_lib as L
import front_lib as F
from edge_lib import DEMO, EdgeEnv
import restart_lib as R

SLOW_PIECES = 10          # the slow response: 10 pieces of 20 KiB, 0.2 s apart
SLOW_PIECE = 20 * 1024


def responder(req):
    if req.target.startswith("/slow"):
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % (SLOW_PIECES * SLOW_PIECE))
        parts = [head]
        for _ in range(SLOW_PIECES):
            parts += [0.2, b"s" * SLOW_PIECE]
        return parts
    if req.target.startswith("/stuck"):  # a head, a little body, then nothing for a minute
        return [b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x" * 1000, 60.0]
    if req.target.startswith("/ws"):
        return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\n\r\n", "tunnel")
    return L.default_response(req)


def start_slow(port, path):
    """A request for path on a new connection whose response is read later -> socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), DEMO.encode()))
    return s


def test_sigterm_drains_under_load(tmp):
    """SIGTERM while three slow responses (2 s each) are in flight and visitors arrive every
    10 ms: the slow responses complete, no response is cut, keep-alive visitors are told
    Connection: close, the access lines are written, and noded exits 0 once drained. Refused
    connections (no listener after the SIGTERM, no successor) are counted and printed."""
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "20000"], responder=responder)
    try:
        load = R.Load(e.port, DEMO, every=0.01, keepalive=2)
        time.sleep(0.5)
        slow = [start_slow(e.port, "/slow-%d" % i) for i in range(3)]
        wait_until(lambda: e.origin.count(lambda r: r.target.startswith("/slow")) == 3, 5,
                   "the slow requests at the origin")
        e.n.proc.send_signal(signal.SIGTERM)
        bodies = []
        for s in slow:
            resp, raw, _ = R.read_response(s, time.monotonic() + 15)
            s.close()
            assert resp is not None and resp.status == 200, raw[:300]
            bodies.append(len(resp.body))
        assert bodies == [SLOW_PIECES * SLOW_PIECE] * 3, bodies
        rc = e.n.proc.wait(timeout=25)
        counts = load.stop()
        print("sigterm under load: %r" % counts, flush=True)
        assert rc == 0, e.n.log_tail()
        assert counts["cut"] == 0, (counts, load.samples)
        assert counts["ok"] > 0, counts
        # the access log was written out before the exit: the slow requests are in it
        paths = {a["path"] for a in F.access_lines(e.n)}
        assert all("/slow-%d" % i in paths for i in range(3)), sorted(paths)[:20]
        assert "draining" in open(e.n.log_path, encoding="utf-8", errors="replace").read()
    finally:
        e.close()


def test_busy_keepalive_gets_connection_close(tmp):
    """During the drain, a request arriving on a keep-alive connection that is still open is
    answered, with Connection: close, and the connection is closed after it; an idle
    keep-alive connection is closed at once."""
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "20000"], responder=responder)
    try:
        hold = start_slow(e.port, "/slow-hold")  # keeps noded draining for 2 s
        wait_until(lambda: e.origin.count(lambda r: r.target == "/slow-hold") == 1, 5, "slow")
        busy = socket.create_connection(("127.0.0.1", e.port), timeout=5)
        busy.sendall(b"GET /first HTTP/1.1\r\nHost: %s\r\n\r\n" % DEMO.encode())
        resp, raw, _ = R.read_response(busy, time.monotonic() + 5)
        assert resp is not None and resp.status == 200, raw
        idle = socket.create_connection(("127.0.0.1", e.port), timeout=5)
        idle.sendall(b"GET /idle HTTP/1.1\r\nHost: %s\r\n\r\n" % DEMO.encode())
        resp, raw, _ = R.read_response(idle, time.monotonic() + 5)
        assert resp is not None and resp.status == 200, raw
        # the next request's head is on its way when the drain begins
        busy.sendall(b"GET /second HTTP/1.1\r\n")
        time.sleep(0.1)
        e.n.proc.send_signal(signal.SIGTERM)
        assert L.peer_closed(idle, 5), "the idle keep-alive connection stayed open"
        busy.sendall(b"Host: %s\r\n\r\n" % DEMO.encode())
        resp, raw, closed = R.read_response(busy, time.monotonic() + 5)
        assert resp is not None and resp.status == 200, raw
        conn = ",".join(L.header_values(resp.headers, "connection")).lower()
        assert "close" in conn, resp.headers
        assert L.peer_closed(busy, 5)
        resp, raw, _ = R.read_response(hold, time.monotonic() + 10)
        assert resp is not None and len(resp.body) == SLOW_PIECES * SLOW_PIECE, raw[:200]
        assert e.n.proc.wait(timeout=20) == 0
    finally:
        e.close()


def test_deadline_and_second_sigterm(tmp):
    """The drain deadline ends a response that does not finish and a WebSocket tunnel (both
    closed, exit 0); with a long deadline, a second SIGTERM ends the drain at once."""
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "1500"], responder=responder)
    try:
        stuck = start_slow(e.port, "/stuck")
        ws = socket.create_connection(("127.0.0.1", e.port), timeout=5)
        ws.sendall(b"GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade"
                   b"\r\n\r\n" % DEMO.encode())
        resp, raw, _ = R.read_response(ws, time.monotonic() + 5)
        assert resp is not None and resp.status == 101, raw
        ws.sendall(b"ping")
        ws.settimeout(5)
        assert ws.recv(10) == b"ping"
        wait_until(lambda: e.origin.count(lambda r: r.target == "/stuck") == 1, 5, "stuck")
        t0 = time.monotonic()
        e.n.proc.send_signal(signal.SIGTERM)
        # the tunnel still works during the drain
        ws.sendall(b"pong")
        assert ws.recv(10) == b"pong"
        assert e.n.proc.wait(timeout=15) == 0
        took = time.monotonic() - t0
        assert L.peer_closed(ws, 5) and L.peer_closed(stuck, 5)
        print("deadline 1.5 s: exited after %.1f s" % took, flush=True)
    finally:
        e.close()
    os.makedirs(os.path.join(tmp, "second"))
    e = EdgeEnv(os.path.join(tmp, "second"), noded_args=["--drain-timeout-ms", "600000"],
                responder=responder)
    try:
        stuck = start_slow(e.port, "/stuck")
        wait_until(lambda: e.origin.count(lambda r: r.target == "/stuck") == 1, 5, "stuck")
        e.n.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert e.n.proc.poll() is None, "noded did not wait for the in-flight response"
        e.n.proc.send_signal(signal.SIGTERM)
        assert e.n.proc.wait(timeout=15) == 0
        assert L.peer_closed(stuck, 5)
        assert "closing every visitor connection now" in open(e.n.log_path).read()
    finally:
        e.close()


if __name__ == "__main__":
    import harness
    harness.main()
