"""restart_lib — visitor load against noded while it drains, restarts or upgrades
(docs/design.md, Restarts and upgrades): every response is read to its end and classed as
complete, refused (no process accepted the connection), cut (a response started or was due
and did not arrive whole) or closed idle (a keep-alive connection closed before its next
request's first response byte). A keep-alive visitor sends a request whose reused connection
closed idle again on a new connection at once, as curl and browsers do (RFC 9112, 9.3.1: a
server may close an idle connection at any time, so the request it never saw is retried): the
retry's outcome is counted like any request's, so refused + cut are the requests lost."""

import socket
import threading
import time

from harness import HOST
import edge_lib as L


def read_response(s, deadline):
    """Read one response from s -> (Message or None, bytes got, peer closed)."""
    got = bytearray()
    while True:
        try:
            resp, _ = L.split_responses(bytes(got), eof=False)
        except Exception:  # noqa: BLE001 - a malformed prefix counts as cut below
            resp = []
        finals = [r for r in resp if r.status >= 200 or r.status == 101]
        if finals:
            return finals[0], bytes(got), False
        left = deadline - time.monotonic()
        if left <= 0:
            return None, bytes(got), False
        s.settimeout(left)
        try:
            b = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return None, bytes(got), True
        except (socket.timeout, TimeoutError):
            return None, bytes(got), False
        if not b:
            return None, bytes(got), True
        got += b


class Load:
    """Visitors at a port: a request on a new connection every `every` seconds, and `keepalive`
    visitors each sending requests one after another on one connection (a new one when the
    server closes it). host is the Host header, path the request target, headers more header
    lines ({name: value})."""

    def __init__(self, port, host, path="/load", every=0.01, keepalive=2, timeout=20.0,
                 unix=None, headers=None):
        self.port, self.host, self.path, self.every = port, host, path, every
        self.extra = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode())
                              for k, v in (headers or {}).items())
        self.unix = unix
        self.timeout = timeout
        self.lock = threading.Lock()
        self.counts = {"ok": 0, "refused": 0, "cut": 0, "closed_idle": 0, "conn_close": 0}
        self.samples = []
        self._stop = threading.Event()
        self._threads = []
        self._pending = []
        self._threads.append(threading.Thread(target=self._spawner, daemon=True))
        for i in range(keepalive):
            self._threads.append(threading.Thread(target=self._keepalive, args=(i,), daemon=True))
        for t in self._threads:
            t.start()

    def _count(self, what, detail=None):
        with self.lock:
            self.counts[what] += 1
            if what in ("cut", "refused") and detail is not None and len(self.samples) < 20:
                self.samples.append((what, detail))

    def _connect(self):
        if self.unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(self.unix)
            return s
        return socket.create_connection((HOST, self.port), timeout=5)

    def _request(self, close):
        return (b"GET %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n"
                % (self.path.encode(), self.host.encode(), self.extra,
                   b"Connection: close\r\n" if close else b""))

    def _one(self):
        try:
            s = self._connect()
        except OSError as e:
            self._count("refused", repr(e))
            return
        try:
            try:
                s.sendall(self._request(True))
            except OSError as e:
                self._count("cut", "send: %r" % e)
                return
            resp, raw, _ = read_response(s, time.monotonic() + self.timeout)
            if resp is None or resp.status != 200:
                self._count("cut", raw[:200])
            else:
                self._count("ok")
        finally:
            s.close()

    def _spawner(self):
        nxt = time.monotonic()
        while not self._stop.is_set():
            t = threading.Thread(target=self._one, daemon=True)
            t.start()
            self._pending.append(t)
            nxt += self.every
            time.sleep(max(0.0, nxt - time.monotonic()))

    def _keepalive(self, idx):
        s = None
        while not self._stop.is_set():
            fresh = False
            if s is None:
                try:
                    s = self._connect()
                    fresh = True
                except OSError as e:
                    self._count("refused", repr(e))
                    time.sleep(self.every)
                    continue
            try:
                s.sendall(self._request(False))
            except OSError:
                resp, raw, closed = None, b"", True
            else:
                resp, raw, closed = read_response(s, time.monotonic() + self.timeout)
            if resp is not None and resp.status == 200:
                self._count("ok")
                conn = ",".join(L.header_values(resp.headers, "connection")).lower()
                if "close" in conn:
                    self._count("conn_close")
                    s.close()
                    s = None
            else:
                s.close()
                s = None
                if not raw and closed and not fresh:
                    self._count("closed_idle")
                    continue  # sent again at once on a new connection
                self._count("cut", raw[:200])
            time.sleep(self.every)
        if s is not None:
            s.close()

    def stop(self):
        """Stop sending, wait for the answers still due -> the counts."""
        self._stop.set()
        for t in self._threads + self._pending:
            t.join(self.timeout + 5)
        with self.lock:
            return dict(self.counts)
