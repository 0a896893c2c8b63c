#!/usr/bin/env python3
"""test_starve — no single client can starve controld's API or noded's admin port
(docs/design.md, Restarts and upgrades): connections from one address are capped
(--max-connections-per-ip), a request head that does not arrive whole in time closes its
connection (--header-timeout-ms), controld's --admin-listen answers /healthz and /metrics on its
own cap, and every refusal is counted in a metric. The attacks run in bounded loops on loopback
from 127.0.0.1; the well-behaved client is 127.0.0.2."""

import socket
import threading
import time

from harness import HOST, Controld, Noded, free_port, wait_until
import restart_lib as R


def get(port, path, source="127.0.0.2", timeout=5.0, host=HOST, token=None):
    """GET path from source -> (status, body bytes, seconds taken); status 0 when no answer."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.bind((source, 0))
        s.connect((host, port))
        auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n"
                  % (path.encode(), auth))
        resp, raw, _ = R.read_response(s, time.monotonic() + timeout)
    except OSError:
        resp, raw = None, b""
    finally:
        s.close()
    took = time.monotonic() - t0
    return (resp.status, resp.body, took) if resp else (0, raw, took)


class SlowClients:
    """n connections from source that send a request head one byte every `every` seconds, for
    at most `seconds`; counts the ones the server closed."""

    def __init__(self, port, n, source="127.0.0.1", every=0.5, seconds=6.0):
        self.socks, self.refused = [], 0
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((source, 0))
            try:
                s.connect((HOST, port))
                self.socks.append(s)
            except OSError:
                self.refused += 1
                s.close()
        self.closed = 0
        self._t = threading.Thread(target=self._drip, args=(every, seconds), daemon=True)
        self._t.start()

    def _drip(self, every, seconds):
        head = b"GET /v1/sites HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        end = time.monotonic() + seconds
        live = list(self.socks)
        i = 0
        while live and time.monotonic() < end:
            for s in list(live):
                try:
                    s.sendall(head[i % len(head):i % len(head) + 1])
                except OSError:
                    live.remove(s)
                    self.closed += 1
            i += 1
            time.sleep(every)
        self.live = len(live)

    def join(self):
        self._t.join()
        for s in self.socks:
            s.close()


def metric_value(text, name, labels):
    for line in text.splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels):
            return float(line.split()[-1])
    return None


def test_controld_slow_headers_and_per_ip(tmp):
    """80 slow-header clients from one address at a controld with --max-connections 128: at most
    64 are in at once, the rest are refused (per_ip), the admitted ones are closed at the head
    deadline (each of the 80 counted once, by one of the two reasons); during
    the attack /healthz on --admin-listen and a second address's API calls all answer."""
    admin_port = free_port()
    c = Controld(tmp, extra_args=["--max-connections", "128", "--header-timeout-ms", "1500",
                                  "--admin-listen", "%s:%d" % (HOST, admin_port)]).start()
    slow = SlowClients(c.port, 80, every=0.3, seconds=5.0)
    try:
        health, api = [], []
        for _ in range(10):
            health.append(get(admin_port, "/healthz"))
            api.append(get(c.port, "/v1/sites", token=c.admin_token))
            time.sleep(0.2)
        slow.join()
        print("controld under 80 slow clients from one address: %d closed by the server; "
              "/healthz on the admin listener max %.3f s, a second address's GET /v1/sites max "
              "%.3f s" % (slow.closed, max(h[2] for h in health), max(a[2] for a in api)),
              flush=True)
        assert all(h[0] == 200 for h in health), health
        assert all(a[0] == 200 for a in api), api
        # every admitted slow client was closed at its head deadline
        assert slow.live == 0, (slow.live, slow.closed)
        st, text, _ = get(admin_port, "/metrics")
        text = text.decode()
        assert st == 200
        per_ip = metric_value(text, "cdnca_http_refused_total", ['listener="api"', 'per_ip'])
        head = metric_value(text, "cdnca_http_refused_total", ['listener="api"', 'head_timeout'])
        # every slow client was closed for one of the two reasons; how the 80 split between them
        # depends on timing (64 in and 16 refused when all arrive within the head deadline; on a
        # loaded host a slot freed by a head timeout may be taken up before the next arrival, or
        # its close be seen after it), while the cap itself shows in the log line below
        assert per_ip is not None and per_ip >= 1, text[-2000:]
        assert head is not None and head >= 1, text[-2000:]
        assert per_ip + head == slow.closed == 80, (per_ip, head, slow.closed)
        # the admin listener serves nothing else
        assert get(admin_port, "/v1/sites")[0] == 404
        log = open(c.log_path, encoding="utf-8", errors="replace").read()
        assert "refused: 64 connections from that address are open" in log
        assert "no whole request head within 1500 ms" in log
    finally:
        slow.join()


def test_controld_idle_keepalive_not_counted(tmp):
    """A keep-alive connection idle after its answer is closed at the head deadline but is no
    refusal (it is counted as an idle close); one that begins its next head and stalls is
    (head_timeout), as is one that never sends a whole first head."""
    c = Controld(tmp, extra_args=["--header-timeout-ms", "1000"]).start()

    def connect():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.2", 0))
        s.connect((HOST, c.port))
        return s

    def open_after_request():
        s = connect()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        resp, _, closed = R.read_response(s, time.monotonic() + 5)
        assert resp is not None and resp.status == 200 and not closed, resp
        return s

    def closed_by_server(s, seconds=6.0):
        s.settimeout(seconds)
        try:
            return s.recv(100) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except OSError:
            return False

    def counted(name, label):
        st, text, _ = get(c.port, "/metrics")
        assert st == 200
        return metric_value(text.decode(), name, ['listener="api"', label]) or 0

    def head_timeouts():
        return counted("cdnca_http_refused_total", "head_timeout")

    def idle_closes():
        return counted("cdnca_http_idle_closed_total", 'kind="idle"')

    idle = open_after_request()
    t0 = time.monotonic()
    assert closed_by_server(idle), "an idle keep-alive connection outlived the head deadline"
    print("an idle keep-alive connection closed %.2f s after its answer" % (time.monotonic() - t0),
          flush=True)
    idle.close()
    assert wait_until(lambda: idle_closes() == 1, timeout=5), idle_closes()
    assert head_timeouts() == 0
    # the next head begun and stalled: a refusal
    stall = open_after_request()
    stall.sendall(b"GET /v1/si")
    assert closed_by_server(stall)
    stall.close()
    # no whole first head: a refusal
    first = connect()
    first.sendall(b"GET /v1/sites HTTP/1.1\r\nHo")
    assert closed_by_server(first)
    first.close()
    assert wait_until(lambda: head_timeouts() == 2, timeout=5), head_timeouts()
    time.sleep(0.3)
    assert head_timeouts() == 2
    assert idle_closes() == 1


def test_controld_admin_listen_refused_when_same():
    """--admin-listen equal to --listen is refused at start (exit 2)."""
    import subprocess
    import harness
    import os
    b = os.path.join(harness.BUILD, "controld", "controld")
    r = subprocess.run([b, "--listen", "127.0.0.1:7999", "--admin-listen", "127.0.0.1:7999",
                        "--check-config", "--db", ":memory:"], capture_output=True, text=True)
    assert r.returncode == 2 and "admin-listen" in r.stderr, (r.returncode, r.stderr)


def test_noded_admin_idle_and_slow(tmp):
    """300 slow-header connections from one address at noded's admin port: 64 get
    in, the rest are refused and counted; the admitted ones are closed at the head deadline
    (10 s); /healthz from a second address answers all along; a keep-alive connection left idle
    after its answer is closed at the deadline too, counted as an idle close."""
    c = Controld(tmp).start()
    st, body, _ = c.api("POST", "/v1/nodes", {"name": "edge"})
    assert st == 201, body
    n = Noded(c, body["token"], tmp).start()
    idle = socket.create_connection((HOST, n.admin_port), source_address=("127.0.0.2", 0))
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    resp, _, closed = R.read_response(idle, time.monotonic() + 5)
    assert resp is not None and resp.status == 200 and not closed, resp
    slow = SlowClients(n.admin_port, 300, every=1.0, seconds=16.0)
    try:
        probes = []
        for _ in range(20):
            probes.append(get(n.admin_port, "/healthz"))
            time.sleep(0.3)
        slow.join()
        print("noded admin under 300 slow clients from one address: %d closed by the server; "
              "/healthz from another address max %.3f s"
              % (slow.closed, max(p[2] for p in probes)), flush=True)
        assert all(p[0] == 200 for p in probes), probes
        assert slow.live == 0, slow.live
        st, text, _ = get(n.admin_port, "/metrics")
        text = text.decode()
        assert metric_value(text, "cdnca_node_admin_refused_total", ["per_ip"]) >= 1, text
        assert metric_value(text, "cdnca_node_admin_refused_total", ["head_timeout"]) >= 1, text
        idle.settimeout(1)
        assert idle.recv(100) == b"", "the idle keep-alive connection outlived the deadline"
        assert metric_value(text, "cdnca_node_admin_idle_closed_total", ['kind="idle"']) == 1, text
    finally:
        slow.join()
        idle.close()


if __name__ == "__main__":
    import harness
    harness.main()
