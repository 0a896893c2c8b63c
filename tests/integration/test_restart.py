#!/usr/bin/env python3
"""test_restart — noded restarts without a dropped visitor (docs/design.md, Restarts and
upgrades): SIGTERM drains (no new connections, in-flight responses and tunnels finish within
--drain-timeout-ms, idle keep-alive connections close, a busy one gets Connection: close, the
access log is written out), a second SIGTERM or the deadline ends the drain; a 10 MiB response
from a slow origin crosses a SIGTERM intact; restarts under socket activation and a SIGUSR2
upgrade lose no request; controld on a received socket or one of its own answers what it
accepted. Real processes
on loopback under visitor load (a request every 10 ms): every response read to its end and
counted."""

import fcntl
import hashlib
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import time

import harness
from harness import wait_until
import edge_lib as L
import front_lib as F
from edge_lib import DEMO, EdgeEnv
import restart_lib as R

SLOW_PIECES = 10          # the slow response: 10 pieces of 20 KiB, 0.2 s apart
SLOW_PIECE = 20 * 1024
BIG_PIECE = 64 * 1024      # the large response: 10 MiB in pieces of 64 KiB, 16 a second
BIG = random.Random(30).randbytes(160 * BIG_PIECE)


def responder(req):
    if req.target.startswith("/slow"):
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % (SLOW_PIECES * SLOW_PIECE))
        parts = [head]
        for _ in range(SLOW_PIECES):
            parts += [0.2, b"s" * SLOW_PIECE]
        return parts
    if req.target.startswith("/big"):  # 10 MiB at about 1 MiB/s, as a slow origin sends it
        parts = [b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(BIG)]
        for off in range(0, len(BIG), BIG_PIECE):
            parts += [BIG[off:off + BIG_PIECE], 1.0 / 16]
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


def test_sigterm_answers_the_backlog(tmp):
    """Connections the kernel accepted before a SIGTERM, still in the backlogs of noded's own
    sockets (TCP and Unix), are answered, not reset: noded is stopped (SIGSTOP) while 30 visitors
    connect to each socket and send a request, then gets SIGTERM and SIGCONT. Every request gets
    its 200 and noded exits 0; a connection made after the stop is refused."""
    e = F.FrontEnv(tmp, extra_args=["--drain-timeout-ms", "10000"])
    tcp_port = e.port
    e.n.proc.send_signal(signal.SIGSTOP)
    socks = []
    try:
        for i in range(30):
            for kind in ("tcp", "unix"):
                if kind == "tcp":
                    s = socket.create_connection((harness.HOST, tcp_port), timeout=5)
                else:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.settimeout(5)
                    s.connect(e.sock)
                s.sendall(F.get("/backlog-%s-%d" % (kind, i)))
                socks.append((kind, s))
        e.n.proc.send_signal(signal.SIGTERM)
    finally:
        e.n.proc.send_signal(signal.SIGCONT)
    got = {"tcp": [], "unix": []}
    for kind, s in socks:
        resp, raw, closed = R.read_response(s, time.monotonic() + 10)
        s.close()
        got[kind].append(resp.status if resp else ("cut" if closed else "none", raw[:80]))
    print("backlog answered at SIGTERM: %r" % got, flush=True)
    assert got == {"tcp": [200] * 30, "unix": [200] * 30}, got
    assert e.n.proc.wait(timeout=15) == 0, e.n.log_tail()
    try:
        socket.create_connection((harness.HOST, tcp_port), timeout=2).close()
        raise AssertionError("a connection after the stop was accepted")
    except ConnectionRefusedError:
        pass
    assert not os.path.exists(e.sock)


def test_large_response_across_sigterm(tmp):
    """A 10 MiB response that a slow origin sends at about 1 MiB/s, with noded told SIGTERM a
    second into it: the visitor gets all of it intact (its length and SHA-256 are the origin's)
    and noded exits 0 once it is sent."""
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "30000"], responder=responder)
    try:
        s = start_slow(e.port, "/big")
        s.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(65536)
            assert b, head
            head += b
        head, body = head.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
        digest = hashlib.sha256(body)
        got = len(body)
        t_sig = time.monotonic() + 1.0
        got_at_sigterm = None
        while got < length:
            if got_at_sigterm is None and time.monotonic() >= t_sig:
                e.n.proc.send_signal(signal.SIGTERM)
                got_at_sigterm = got
            b = s.recv(min(65536, length - got))
            assert b, "closed after %d of %d bytes (SIGTERM at %r)" % (got, length, got_at_sigterm)
            digest.update(b)
            got += len(b)
        s.close()
        # the SIGTERM came while the response was on its way
        assert got_at_sigterm is not None and got_at_sigterm < length, (got_at_sigterm, length)
        print("10 MiB response: SIGTERM after %d bytes, all %d received" % (got_at_sigterm, got),
              flush=True)
        assert length == len(BIG) == got
        assert digest.hexdigest() == hashlib.sha256(BIG).hexdigest()
        assert e.n.proc.wait(timeout=20) == 0, e.n.log_tail()
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




# ---- listeners that outlive the process ----

def spawn_with_sockets(proc, socks):
    """Make harness process proc start with the listening sockets socks as fds 3, 4, ...
    (LISTEN_FDS, and LISTEN_PID set to its pid), as systemd's socket units pass them."""
    fds = [s.fileno() for s in socks]

    def spawn(argv, env=None):
        full = dict(os.environ)
        full.update(env or {})
        full["LISTEN_FDS"] = str(len(fds))

        def child():
            # out of the way first (a socket may sit where another goes), then in place
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
        log = open(proc.log_path, "ab")
        try:
            proc.proc = subprocess.Popen(["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"'] + argv,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=full, cwd=proc.tmpdir,
                                         preexec_fn=child, close_fds=False)
        finally:
            log.close()
        if proc not in harness._PROCS:
            harness._PROCS.append(proc)
    proc._spawn = spawn


class Holder:
    """What systemd's socket units do: listening sockets for noded's --listen and --admin-listen
    held by this process, passed to each noded it starts as LISTEN_FDS=2 (3 = visitors, 4 =
    admin) with LISTEN_PID set to noded's pid."""

    def __init__(self):
        self.vis = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.adm = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        for s in (self.vis, self.adm):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(1024)
        self.port = self.vis.getsockname()[1]
        self.admin_port = self.adm.getsockname()[1]

    def adopt(self, n):
        """Make Noded n start under this holder's sockets."""
        n.port, n.admin_port = self.port, self.admin_port
        n.url = "http://127.0.0.1:%d" % n.port
        spawn_with_sockets(n, [self.vis, self.adm])

    def close(self):
        self.vis.close()
        self.adm.close()


def restart_round(e, n_restarts, load):
    """n_restarts of noded (SIGTERM, its exit, a new start) under load, each after 0.4 s of
    serving, so that the keep-alive visitors sit on idle keep-alive connections of the process
    that drains (the close race: their next request may cross the close) -> the counts."""
    for _ in range(n_restarts):
        time.sleep(0.4)
        e.n.proc.send_signal(signal.SIGTERM)
        assert e.n.proc.wait(timeout=20) == 0, e.n.log_tail()
        e.n.start()
    time.sleep(0.3)
    return load.stop()


def per_restart(counts, n):
    """Visitor errors (refused + cut: requests never answered whole, retries included) and
    keep-alive connections closed idle, per restart."""
    return ("%.1f errors per restart (%d refused, %d cut), %.1f keep-alive connections closed "
            "idle and retried" % ((counts["refused"] + counts["cut"]) / n, counts["refused"],
                                 counts["cut"], counts["closed_idle"] / n))


def test_socket_activation_restarts(tmp):
    """Visitors every 10 ms (new connections, and two on keep-alive that send a request closed
    idle again, as browsers do) while noded restarts: 3 restarts with its own sockets (refused
    connections while none listens: counted, the figure before), then 20 restarts under socket
    activation (the sockets outlive each process): 0 refused, 0 cut, not one request lost. A received socket matching no address is an error at start."""
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "10000"], responder=responder)
    try:
        load = R.Load(e.port, DEMO, every=0.01, keepalive=2)
        before = restart_round(e, 3, load)
        print("3 restarts with noded's own sockets: %r: %s" % (before, per_restart(before, 3)),
              flush=True)
        e.n.stop()
        h = Holder()
        h.adopt(e.n)
        e.n.start()
        wait_until(lambda: "(socket received)" in open(e.n.log_path).read(), 5, "socket taken")
        load = R.Load(h.port, DEMO, every=0.01, keepalive=2)
        after = restart_round(e, 20, load)
        print("20 restarts under socket activation: %r: %s" % (after, per_restart(after, 20)),
              flush=True)
        # not one request lost: each keep-alive connection closed idle was retried and answered
        assert after["refused"] == 0 and after["cut"] == 0, (after, load.samples)
        # the load did meet the close race it is meant to meet
        assert after["closed_idle"] + after["conn_close"] > 0, after
        assert after["ok"] > 100, after
        assert e.n.admin("GET", "/healthz", timeout=5)[0] == 200
        e.n.stop()
        # a socket for an address noded is not configured with: refused at start
        e.n.extra_args += ["--listen", "127.0.0.1:%d" % harness.free_port()]
        e.n.port = harness.free_port()
        h2 = Holder()
        h2.port = e.n.port  # the holder's visitor socket is on another port than --listen
        n = e.n
        h2.adopt(n)
        n.extra_args = [a for a in n.extra_args]
        n.port = h2.vis.getsockname()[1] + 0
        # start with --listen on a port the received socket is not bound to
        argv = [n.binary, "--controld", e.c.url, "--listen", "127.0.0.1:%d" % harness.free_port(),
                "--admin-listen", "127.0.0.1:%d" % h2.admin_port, "--state-dir", n.state_dir,
                "--name", n.name]
        n._spawn(argv, {"CDNCA_NODE_TOKEN": n.node_token})
        assert n.proc.wait(timeout=10) == 1
        assert "matches no --listen or --admin-listen address" in n.log_tail(), n.log_tail()
        h.close()
        h2.close()
    finally:
        e.close()


def test_sigusr2_upgrade(tmp):
    """SIGUSR2 under load: noded starts its binary again with the listening sockets, the new
    process serves, the old one drains and exits 0: 0 refused, 0 cut. Then the binary is
    replaced by one that fails: SIGUSR2 leaves the running process serving, 0 errors."""
    binary = os.path.join(tmp, "noded-bin")
    shutil.copy(os.path.join(harness.BUILD, "noded", "noded"), binary)
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "10000"], responder=responder)
    new_pid = None
    try:
        e.n.stop()
        e.n.binary = binary
        e.n.start()
        load = R.Load(e.port, DEMO, every=0.01, keepalive=2)
        time.sleep(0.5)
        slow = start_slow(e.port, "/slow-upgrade")
        time.sleep(0.3)
        e.n.proc.send_signal(signal.SIGUSR2)
        assert e.n.proc.wait(timeout=20) == 0, e.n.log_tail()
        log = open(e.n.log_path, encoding="utf-8", errors="replace").read()
        m = re.search(r"SIGUSR2: started \S+ \(pid (\d+)\)", log)
        assert m and "serves; draining this one" in log, log[-3000:]
        new_pid = int(m.group(1))
        resp, raw, _ = R.read_response(slow, time.monotonic() + 10)
        assert resp is not None and len(resp.body) == SLOW_PIECES * SLOW_PIECE, raw[:200]
        time.sleep(1.0)
        st, _, _ = e.n.admin("GET", "/healthz", timeout=5)
        assert st == 200
        # a broken new binary: the running one keeps serving
        broken = binary + ".new"
        with open(broken, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(broken, 0o755)
        os.rename(broken, binary)
        os.kill(new_pid, signal.SIGUSR2)
        wait_until(lambda: "upgrade failed" in open(e.n.log_path).read(), 10, "failed upgrade")
        time.sleep(0.5)
        counts = load.stop()
        print("SIGUSR2 upgrade, then a failed one, under load: %r" % counts, flush=True)
        assert counts["refused"] == 0 and counts["cut"] == 0, (counts, load.samples)
        assert os.path.exists("/proc/%d" % new_pid)
        assert e.n.admin("GET", "/healthz", timeout=5)[0] == 200
        os.kill(new_pid, signal.SIGTERM)
        wait_until(lambda: not os.path.exists("/proc/%d/exe" % new_pid)
                   or "drained; shutting down" in open(e.n.log_path).read().split(
                       "upgrade failed")[-1], 20, "the new process exits")
        new_pid = None
    finally:
        if new_pid:
            try:
                os.kill(new_pid, signal.SIGKILL)
            except OSError:
                pass
        e.close()


def controld_restarts(c, n):
    """n restarts of controld c (SIGTERM, its exit, a new start), each after 0.4 s of serving,
    under API load: GET /v1/sites with the admin token on a new connection every 10 ms and on
    one keep-alive connection -> (the load's counts, its samples of errors)."""
    load = R.Load(c.port, "controld", path="/v1/sites", every=0.01, keepalive=1,
                  headers={"Authorization": "Bearer " + c.admin_token})
    for _ in range(n):
        time.sleep(0.4)
        c.stop()
        c.start()
    time.sleep(0.3)
    counts = load.stop()
    return counts, load.samples


def test_controld_socket_activation(tmp):
    """controld restarted 5 times on a socket it receives (LISTEN_FDS) while API clients call
    GET /v1/sites, on new connections every 10 ms and on a keep-alive one: 0 refused (the
    socket outlives each process) and 0 cut: on SIGTERM controld stops accepting and answers
    every connection it had accepted, with Connection: close, before it stops."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    # one address sends them all: the backlog of a restart (about 100 connections) would meet
    # the per-address cap, checked on its own below
    c = harness.Controld(tmp, extra_args=["--max-connections-per-ip", "0"])
    c.port = sock.getsockname()[1]
    c.url = "http://127.0.0.1:%d" % c.port
    spawn_with_sockets(c, [sock])
    c.start()
    assert "(socket received)" in open(c.log_path).read()
    counts, samples = controld_restarts(c, 5)
    print("5 controld restarts under socket activation: %r: %.1f errors per restart, %d "
          "answered with Connection: close" % (counts, (counts["refused"] + counts["cut"]) / 5,
                                                counts["conn_close"]), flush=True)
    assert counts["refused"] == 0 and counts["cut"] == 0, (counts, samples)
    assert counts["ok"] > 50, counts
    assert open(c.log_path).read().count("answered what it had accepted") >= 5, c.log_tail()
    # the per-address cap holds on a received socket too, for a burst: 10 open, the rest closed
    c.stop()
    c.extra_args = ["--max-connections-per-ip", "10"]
    c.start()
    burst = [socket.create_connection(("127.0.0.1", c.port), timeout=5) for _ in range(16)]

    def closed():
        ready, _, _ = select.select(burst, [], [], 0)
        n = 0
        for s in ready:
            try:
                n += s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
            except ConnectionResetError:
                n += 1
            except BlockingIOError:
                pass
        return n
    wait_until(lambda: closed() >= 6, 5, "the connections over the cap closed")
    time.sleep(0.2)
    n = closed()
    for s in burst:
        s.close()
    assert n == 6, n
    c.stop()
    sock.close()


def test_controld_own_socket_answers_what_it_accepted(tmp):
    """controld on a socket it opens itself, restarted 5 times under the same API load: between
    two processes nothing listens, so connections are refused then (a restart without refusals
    is what socket activation gives, above), but none is cut: on SIGTERM controld stops
    accepting, answers what the backlog already held, closes the socket and answers every
    connection it had accepted before it exits."""
    c = harness.Controld(tmp, extra_args=["--max-connections-per-ip", "0"])
    c.start()
    assert "(socket received)" not in open(c.log_path).read()
    counts, samples = controld_restarts(c, 5)
    print("5 controld restarts on its own socket: %r: %d refused, %d cut, %d answered with "
          "Connection: close" % (counts, counts["refused"], counts["cut"], counts["conn_close"]),
          flush=True)
    assert counts["cut"] == 0, (counts, samples)
    assert counts["ok"] > 50, counts
    assert open(c.log_path).read().count("answered what it had accepted") >= 5, c.log_tail()
    c.stop()


def test_sigterm_during_upgrade(tmp):
    """A new binary that never says it is ready: SIGTERM to the old process meanwhile stops the
    new one too, and the old one drains and exits 0."""
    binary = os.path.join(tmp, "noded-bin")
    shutil.copy(os.path.join(harness.BUILD, "noded", "noded"), binary)
    e = EdgeEnv(tmp, noded_args=["--drain-timeout-ms", "5000"], responder=responder)
    try:
        e.n.stop()
        e.n.binary = binary
        e.n.start()
        with open(binary + ".new", "w") as f:
            f.write("#!/bin/sh\nexec sleep 60\n")
        os.chmod(binary + ".new", 0o755)
        os.rename(binary + ".new", binary)
        e.n.proc.send_signal(signal.SIGUSR2)
        wait_until(lambda: "waiting for it to be ready" in open(e.n.log_path).read(), 10,
                   "the upgrade started")
        m = re.search(r"SIGUSR2: started \S+ \(pid (\d+)\)", open(e.n.log_path).read())
        child = int(m.group(1))
        assert e.n.visit("GET", "/during", DEMO, timeout=5)[0] == 200
        e.n.proc.send_signal(signal.SIGTERM)
        assert e.n.proc.wait(timeout=15) == 0, e.n.log_tail()
        assert "the new process (pid %d) is told to stop" % child in open(e.n.log_path).read()
        wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % child)
                   or open("/proc/%d/stat" % child).read().split()[2] == "Z", 10,
                   "the new process stopped")
    finally:
        e.close()


if __name__ == "__main__":
    harness.main()
