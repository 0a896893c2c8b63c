#!/usr/bin/env python3
"""origin — a controllable test origin server for cdnca tests (Python 3 stdlib only).

Run as a process:

    python3 origin.py --port 0 --portfile F [--host 127.0.0.1] [--name NAME]
                      [--tls-cert C --tls-key K] [--verbose]

The chosen port is written to F (atomically) once the server listens. SIGTERM/SIGINT stop it.

Or import it:

    from origin import TestOrigin
    o = TestOrigin(name="a").start()      # o.port, o.url
    o.control(status=503); o.stats(); o.reset(); o.stop()

Control over HTTP on the same port (always answered, whatever the behaviour):

    POST /__ctl  {"status": 503, "delay_ms": 0, "drop": false, "redirect": null,
                  "redirect_status": 302, "health_path_status": {"/healthz": 404},
                  "reset": false, "reset_stats": false}
        Keys given replace the current value; keys left out keep it. "reset": true first
        restores every default and clears the stats. Answers the new settings as JSON.
        status        — status of every normal response [200]
        delay_ms      — wait this long before answering (or dropping) [0]
        drop          — false | true (close without answering) | "rst" (close with a TCP reset)
        redirect      — null, or a Location: answer redirect_status [302] with it
        health_path_status — {path: status}: per-path status (exact path, query ignored),
                        wins over "status"
        fail_share    — 0..1: that share of the normal responses that would answer 200 answer
                        fail_status instead, spread evenly (0.3: 3 of every 10) [0]
        fail_status   — the status of those [503]
    GET /__ctl   the current settings
    GET /__times?prefix=P  {"name", "times": [epoch ms, ...]}: when each counted request whose
                  path starts with P [""] arrived (this machine's wall clock; the newest
                  TIMES_MAX kept; cleared with the stats)
    GET /__stats {"name", "total", "paths": {path: n}, "methods": {m: n}, "last_path",
                  "last_method", "last_target", "last_headers": {name: value}, "last_body_len",
                  "last_sni", "connections", "recent": [{"method", "path", "target",
                  "headers", "body_len"}, ...]}   (control requests are not counted)

Normal responses: {"origin": NAME, "path": P, "query": Q, "target": T, "method": M,
"body_len": N, "body_sha256": H} as application/json with Content-Length (no body for HEAD).
Request bodies may use Content-Length or chunked encoding; HTTP/1.1 keep-alive is supported.

GET /__big?bytes=N[&chunked=1] streams N bytes of a fixed pattern (Content-Length, or chunked
with chunked=1) when the effective status is 200; it obeys delay, drop and a non-200 status
like any other path.
"""

import argparse
import hashlib
import http.server
import json
import os
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request

CTL_PATH = "/__ctl"
STATS_PATH = "/__stats"
TIMES_PATH = "/__times"
TIMES_MAX = 500000
BIG_PATH = "/__big"
MAX_BODY = 64 * 1024 * 1024
RECENT_MAX = 100
BIG_BLOCK = (b"0123456789abcdef" * 4096)  # 64 KiB

DEFAULTS = {
    "status": 200,
    "delay_ms": 0,
    "drop": False,
    "redirect": None,
    "redirect_status": 302,
    "health_path_status": {},
    "fail_share": 0,
    "fail_status": 503,
}


def _check_settings(d):
    """Validate a /__ctl body; returns a dict of the keys to change or raises ValueError."""
    if not isinstance(d, dict):
        raise ValueError("body must be a JSON object")
    out = {}
    for k, v in d.items():
        if k in ("reset", "reset_stats"):
            if not isinstance(v, bool):
                raise ValueError(k + " must be a boolean")
        elif k == "fail_share":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError("fail_share must be a number 0..1")
            out[k] = v
        elif k in ("status", "redirect_status", "fail_status"):
            if isinstance(v, bool) or not isinstance(v, int) or not 100 <= v <= 999:
                raise ValueError(k + " must be an integer 100..999")
            out[k] = v
        elif k == "delay_ms":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 3600000:
                raise ValueError("delay_ms must be a number 0..3600000")
            out[k] = v
        elif k == "drop":
            if not (isinstance(v, bool) or v == "rst"):
                raise ValueError('drop must be a boolean or "rst"')
            out[k] = v
        elif k == "redirect":
            if v is not None and not isinstance(v, str):
                raise ValueError("redirect must be a string or null")
            out[k] = v
        elif k == "health_path_status":
            if not isinstance(v, dict):
                raise ValueError("health_path_status must be an object")
            for p, s in v.items():
                if isinstance(s, bool) or not isinstance(s, int) or not 100 <= s <= 999:
                    raise ValueError("health_path_status values must be integers 100..999")
            out[k] = dict(v)
        else:
            raise ValueError("unknown key " + k)
    return out


class _State:
    """Settings and counters shared by the handler threads (under one lock)."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.settings = json.loads(json.dumps(DEFAULTS))
        self.last_sni = None
        self.connections = 0
        self._clear_stats()

    def _clear_stats(self):
        self.total = 0
        self.paths = {}
        self.methods = {}
        self.last = None
        self.recent = []
        self.times = []  # (epoch ms, path) of each counted request
        self.shared = 0  # the responses fail_share has spread over

    def reset(self):
        with self.lock:
            self.settings = json.loads(json.dumps(DEFAULTS))
            self._clear_stats()
            self.last_sni = None

    def apply(self, body):
        changes = _check_settings(body)
        with self.lock:
            if body.get("reset"):
                self.settings = json.loads(json.dumps(DEFAULTS))
                self._clear_stats()
                self.last_sni = None
            elif body.get("reset_stats"):
                self._clear_stats()
            self.settings.update(changes)
            return dict(self.settings)

    def current(self):
        with self.lock:
            return json.loads(json.dumps(self.settings))

    def record(self, method, target, path, headers, body_len):
        entry = {"method": method, "path": path, "target": target,
                 "headers": headers, "body_len": body_len}
        at = time.time() * 1000.0
        with self.lock:
            self.times.append((at, path))
            if len(self.times) > TIMES_MAX:
                del self.times[:len(self.times) - TIMES_MAX]
            self.total += 1
            self.paths[path] = self.paths.get(path, 0) + 1
            self.methods[method] = self.methods.get(method, 0) + 1
            self.last = entry
            self.recent.append(entry)
            if len(self.recent) > RECENT_MAX:
                del self.recent[0]

    def stats(self):
        with self.lock:
            last = self.last or {}
            return {
                "name": self.name,
                "total": self.total,
                "paths": dict(self.paths),
                "methods": dict(self.methods),
                "last_path": last.get("path"),
                "last_method": last.get("method"),
                "last_target": last.get("target"),
                "last_headers": dict(last.get("headers", {})),
                "last_body_len": last.get("body_len", 0),
                "last_sni": self.last_sni,
                "connections": self.connections,
                "recent": list(self.recent),
            }


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cdnca-test-origin"
    # the head and the body are separate writes: without TCP_NODELAY the body waits for the
    # peer's delayed ACK of the head (40 ms on Linux loopback) on a keep-alive connection
    disable_nagle_algorithm = True

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("origin[%s] %s\n" % (self.server.state.name, fmt % args))

    # -- request body ---------------------------------------------------------------------------
    def _read_body(self):
        """Read the request body (Content-Length or chunked); returns bytes or None on error."""
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    return None
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    return None
                if size == 0:
                    while True:  # trailers up to the blank line
                        t = self.rfile.readline(8192)
                        if not t or t in (b"\r\n", b"\n"):
                            break
                    return bytes(out)
                if len(out) + size > MAX_BODY:
                    return None
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    return None
                out += chunk
                self.rfile.readline(16)  # CRLF after the chunk
        cl = self.headers.get("Content-Length")
        if cl is None:
            return b""
        try:
            n = int(cl)
        except ValueError:
            return None
        if n < 0 or n > MAX_BODY:
            return None
        data = self.rfile.read(n)
        return data if len(data) == n else None

    # -- responses --------------------------------------------------------------------------------
    def _send(self, status, body, ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        # head and body in one write, as a real server sends a small answer: a stop of this
        # origin (close_all) then finds the answer sent whole or not at all, never a head
        # without its body, which a proxy that already passed the head on cannot retry
        if self.request_version == "HTTP/0.9":  # no head at all (end_headers writes none)
            self.wfile.write(body)
            return
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(body)
        self.flush_headers()

    def _send_json(self, status, obj):
        self._send(status, (json.dumps(obj) + "\n").encode())

    def _drop(self, how):
        """Close without answering: a FIN (how true) or a TCP reset (how == "rst")."""
        self.close_connection = True
        try:
            if how == "rst":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stream_big(self, nbytes, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(nbytes))
        self.end_headers()
        if self.command == "HEAD":
            return
        left = nbytes
        while left > 0:
            block = BIG_BLOCK[: min(left, len(BIG_BLOCK))]
            if chunked:
                self.wfile.write(b"%x\r\n" % len(block) + block + b"\r\n")
            else:
                self.wfile.write(block)
            left -= len(block)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    # -- dispatch ---------------------------------------------------------------------------------
    def _handle(self):
        state = self.server.state
        target = self.path
        parts = urllib.parse.urlsplit(target)
        path, query = parts.path or "/", parts.query
        body = self._read_body()
        if body is None:
            self.close_connection = True
            self._send_json(400, {"error": "bad request body"})
            return

        if path == CTL_PATH:
            if self.command == "GET":
                self._send_json(200, state.current())
                return
            if self.command != "POST":
                self._send_json(405, {"error": "use GET or POST"})
                return
            try:
                req = json.loads(body.decode() or "{}")
                self._send_json(200, state.apply(req))
            except (ValueError, UnicodeDecodeError) as e:
                self._send_json(400, {"error": str(e)})
            return
        if path == STATS_PATH:
            self._send_json(200, state.stats())
            return
        if path == TIMES_PATH:
            prefix = urllib.parse.parse_qs(query).get("prefix", [""])[0]
            with state.lock:
                times = [t for t, p in state.times if p.startswith(prefix)]
            self._send_json(200, {"name": state.name, "times": times})
            return

        headers = {k: v for k, v in self.headers.items()}
        state.record(self.command, target, path, headers, len(body))
        cfg = state.current()

        delay = cfg["delay_ms"]
        if delay > 0 and state.stopping.wait(delay / 1000.0):
            self._drop(True)
            return
        if cfg["drop"]:
            self._drop(cfg["drop"])
            return
        if cfg["redirect"] is not None:
            self._send(cfg["redirect_status"], b"", extra={"Location": cfg["redirect"]})
            return
        status = cfg["health_path_status"].get(path, cfg["status"])
        if status == 200 and path not in cfg["health_path_status"] and cfg["fail_share"] > 0:
            with state.lock:
                state.shared += 1
                k = state.shared
            share = cfg["fail_share"]
            if int(k * share) != int((k - 1) * share):
                status = cfg["fail_status"]
        if path == BIG_PATH and status == 200:
            q = urllib.parse.parse_qs(query)
            try:
                nbytes = int(q.get("bytes", ["0"])[0])
            except ValueError:
                nbytes = -1
            if nbytes < 0:
                self._send_json(400, {"error": "bytes must be a non-negative integer"})
                return
            self._stream_big(nbytes, q.get("chunked", ["0"])[0] == "1")
            return
        self._send_json(status, {
            "origin": state.name, "path": path, "query": query, "target": target,
            "method": self.command, "body_len": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
        })

    def handle_one_request(self):
        # Same as the base class, but with every method routed to _handle.
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = ""
                self.request_version = ""
                self.command = ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._handle()
            self.wfile.flush()
        except (TimeoutError, ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr, state, tls_ctx, verbose):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.state = state
        self.tls_ctx = tls_ctx
        self.verbose = verbose
        self.open_socks = set()
        self.socks_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def server_bind(self):
        # Skip HTTPServer.server_bind's getfqdn (slow without DNS).
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def process_request_thread(self, request, client_address):
        raw = request
        with self.socks_lock:
            self.open_socks.add(raw)
        with self.state.lock:
            self.state.connections += 1
        try:
            if self.tls_ctx is not None:
                request.settimeout(10)
                try:
                    request = self.tls_ctx.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError):
                    self.shutdown_request(request)
                    return
                request.settimeout(None)
            super().process_request_thread(request, client_address)
        finally:
            with self.socks_lock:
                self.open_socks.discard(raw)

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)

    def close_all(self):
        with self.socks_lock:
            socks = list(self.open_socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _tls_context(cert, key, state):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def on_sni(sslobj, server_name, c):
        with state.lock:
            state.last_sni = server_name
        return None

    ctx.sni_callback = on_sni
    return ctx


class TestOrigin:
    """A test origin in a background thread: start() returns self; stop() closes everything."""

    __test__ = False  # not a test case for test runners

    def __init__(self, name="origin", port=0, host="127.0.0.1", tls_cert=None, tls_key=None,
                 verbose=False):
        self.name = name
        self.host = host
        self.state = _State(name)
        self._want_port = port
        self._tls = (tls_cert, tls_key) if tls_cert else None
        self._verbose = verbose
        self._server = None
        self._thread = None
        self.port = None

    @property
    def scheme(self):
        return "https" if self._tls else "http"

    @property
    def url(self):
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (self.scheme, h, self.port)

    def start(self):
        ctx = _tls_context(self._tls[0], self._tls[1], self.state) if self._tls else None
        self._server = _Server((self.host, self._want_port), self.state, ctx, self._verbose)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if not self._server:
            return
        self.state.stopping.set()
        self._server.shutdown()
        self._server.close_all()
        self._server.server_close()
        self._thread.join(timeout=10)
        self._server = None

    # In-process control (same effect as POST /__ctl).
    def control(self, **settings):
        return self.state.apply(settings)

    def reset(self):
        self.state.reset()

    def stats(self):
        return self.state.stats()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def ctl(base_url, timeout=10, context=None, **settings):
    """POST settings to a running origin's /__ctl (another process); returns the new settings."""
    req = urllib.request.Request(base_url.rstrip("/") + CTL_PATH,
                                 data=json.dumps(settings).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
        return json.loads(r.read())


def stats(base_url, timeout=10, context=None):
    """GET a running origin's /__stats."""
    with urllib.request.urlopen(base_url.rstrip("/") + STATS_PATH, timeout=timeout,
                                context=context) as r:
        return json.loads(r.read())


def main(argv=None):
    ap = argparse.ArgumentParser(description="cdnca test origin server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--portfile")
    ap.add_argument("--name", default="origin")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    if bool(a.tls_cert) != bool(a.tls_key):
        ap.error("--tls-cert and --tls-key go together")

    o = TestOrigin(name=a.name, port=a.port, host=a.host, tls_cert=a.tls_cert,
                   tls_key=a.tls_key, verbose=a.verbose).start()
    # A plain flag, not a threading.Event: the handler runs in the main thread, and an Event's
    # set() would wait for the Event's own lock, which that thread may hold inside wait() when
    # the signal lands (a deadlock: the process never exits on SIGTERM).
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    signal.signal(signal.SIGINT, lambda *_: done.append(1))
    if a.portfile:
        tmp = a.portfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % o.port)
        os.replace(tmp, a.portfile)
    if a.verbose:
        sys.stderr.write("origin[%s] listening on %s\n" % (a.name, o.url))
    parent = os.getppid()
    while not done:
        if os.getppid() != parent:  # the parent died without stopping us
            break
        time.sleep(0.1)
    o.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
