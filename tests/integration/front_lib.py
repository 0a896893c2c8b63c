#!/usr/bin/env python3
"""front_lib — noded behind an edge cache (docs/design.md#noded-behind-an-edge-cache), stdlib only.

- FrontEnv: controld, two origin processes (origin "a" on level 1, "b" on level 2 of the site
  demo.example.test) and one noded with a TCP listener, a Unix listener and a proxy-protocol Unix
  listener in the test's directory, trusting Unix-socket peers with X-Forwarded-For.
- unix_exchange / tcp_exchange: send exact bytes on a new connection (a TCP one from a chosen
  loopback source address, so "the visitor" is told apart from the proxies on 127.0.0.1) and read
  until the peer closes or the line stays quiet, within a deadline.
- pp_v1 / pp_v2: PROXY headers.
- access_lines: noded's access log lines as dicts.
"""

import json
import os
import select
import socket
import struct
import time

from harness import HOST, Controld, Noded, Origin, wait_until
import edge_lib as L

DEMO = "demo.example.test"


def _read_all(s, timeout, quiet, want):
    got = bytearray()
    closed = False
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        rs, _, _ = select.select([s], [], [], min(deadline - now, quiet))
        if rs:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                closed = True
                break
            if not b:
                closed = True
                break
            got += b
            last = time.monotonic()
            continue
        if time.monotonic() - last >= quiet:
            resp, _ = L.split_responses(bytes(got), eof=False)
            if sum(1 for r in resp if r.status >= 200) >= want:
                break
    return bytes(got), closed


def _exchange(s, data, timeout, quiet, want):
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        raw, closed = _read_all(s, timeout, quiet, want)
    finally:
        s.close()
    resp, _ = L.split_responses(raw)
    return resp, closed, raw


def unix_exchange(path, data, timeout=5.0, quiet=0.3, want=1):
    """-> (responses, closed_by_peer, raw)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return _exchange(s, data, timeout, quiet, want)


def tcp_exchange(port, data, source="127.0.0.1", timeout=5.0, quiet=0.3, want=1):
    """From source (any 127.0.0.0/8 address) -> (responses, closed_by_peer, raw)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((HOST, port))
    return _exchange(s, data, timeout, quiet, want)


def get(path, host=DEMO, extra=b""):
    return b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n" % (
        path.encode(), host.encode(), extra)


def pp_v1(src, dst="127.0.0.1", sport=40000, dport=80):
    return b"PROXY TCP4 %s %s %d %d\r\n" % (src.encode(), dst.encode(), sport, dport)


def pp_v2(src, dst="127.0.0.1", sport=40000, dport=80, command=1, tlvs=b""):
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    if command == 0:
        return sig + bytes([0x20, 0x00]) + struct.pack("!H", len(tlvs)) + tlvs
    block = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return sig + bytes([0x21, 0x11]) + struct.pack("!H", len(block) + len(tlvs)) + block + tlvs


def access_lines(proc):
    """noded's access log lines (in its log file) as dicts, oldest first."""
    out = []
    with open(proc.log_path, "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            i = line.find('{"type":"access"')
            if i >= 0:
                try:
                    out.append(json.loads(line[i:]))
                except ValueError:
                    pass
    return out


def metric(n, prefix):
    """The sum of the samples of noded's /metrics whose line starts with prefix."""
    st, text, _ = n.admin("GET", "/metrics")
    assert st == 200, text
    return sum(float(l.split()[1]) for l in text.splitlines() if l.startswith(prefix))


class FrontEnv:
    """controld; origins a (level 1) and b (level 2) of DEMO; noded with listeners
    .port (TCP), .sock (Unix) and .pp_sock (Unix, proxy-protocol); Unix peers trusted.
    health_checks=False: the site's health checks are off from its creation, so controld never
    probes a or b (a test that counts every request an origin sees)."""

    def __init__(self, tmp, extra_args=None, sock_dir=None, health_checks=True):
        self.tmp = tmp
        d = sock_dir or tmp
        self.sock = os.path.join(d, "noded.sock")
        self.pp_sock = os.path.join(d, "noded-pp.sock")
        self.a = Origin("a", tmpdir=tmp).start()
        self.b = Origin("b", tmpdir=tmp).start()
        self.c = Controld(tmp).start()
        spec = {"name": "demo", "hostnames": [DEMO],
                "origins": [{"level": 1, "address": HOST, "port": self.a.port, "scheme": "http"},
                            {"level": 2, "address": HOST, "port": self.b.port, "scheme": "http"}]}
        if not health_checks:
            spec["health_check"] = {"enabled": False}
        st, body, _ = self.c.api("POST", "/v1/sites", spec)
        assert st == 201, body
        st, body, _ = self.c.api("POST", "/v1/nodes", {"name": "edge"})
        assert st == 201, body
        args = ["--listen", "unix:%s,mode=0660" % self.sock,
                "--listen", "unix:%s,proxy-protocol,mode=0660" % self.pp_sock,
                "--trusted-proxies", "unix"] + list(extra_args or [])
        self.n = Noded(self.c, body["token"], tmp, extra_args=args)
        self.n.start()
        self.port = self.n.port
        wait_until(self._synced, 20, "noded serves %s" % DEMO)

    def _synced(self):
        resp, _, _ = unix_exchange(self.sock, get("/sync"), timeout=2)
        return bool(resp) and resp[-1].status == 200
