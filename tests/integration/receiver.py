#!/usr/bin/env python3
"""receiver — a webhook receiver on loopback for integration tests (Python 3 stdlib only).

    rx = Receiver().start()              # port chosen by the OS; rx.url is its base URL
    rx.respond = lambda req: 500         # status per request (default 200); req is a Received
    rx.delay = 0.01                      # seconds to wait before answering (default 0)
    rx.stop(); rx.start()                # closed port in between, same port after
    rx.hold.clear() / rx.hold.set()      # with hold cleared, answers wait (up to 60 s) for set()

Every request is recorded in rx.received (list of Received, in arrival order, thread-safe
access through rx.snapshot()). verify_signature(secret, req) checks X-Cdnca-Signature.
"""

import hashlib
import hmac
import http.server
import json
import threading
import time


class Received:
    """One request as the receiver saw it."""

    def __init__(self, method, path, headers, body):
        self.method = method
        self.path = path
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body
        self.at = time.time()
        self.status = None  # what the receiver answered

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return "Received(%s %s %s %s)" % (self.method, self.path, self.header("x-cdnca-delivery"),
                                          self.body[:80])


def expected_signature(secret, timestamp, body):
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_signature(secret, req):
    """True when the request carries a timestamp and a valid signature for secret."""
    ts = req.header("x-cdnca-timestamp")
    sig = req.header("x-cdnca-signature")
    if not ts or not sig or not ts.isdigit():
        return False
    return hmac.compare_digest(sig, expected_signature(secret, ts, req.body))


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def do_POST(self):
        rx = self.server.rx
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        req = Received("POST", self.path, self.headers, body)
        with rx.lock:
            rx.received.append(req)
        if rx.delay:
            time.sleep(rx.delay)
        rx.hold.wait(timeout=60)
        try:
            status = int(rx.respond(req))
        except Exception:  # noqa: BLE001 - a broken plan answers 500
            status = 500
        req.status = status
        payload = b'{"ok":true}' if 200 <= status < 300 else b'{"ok":false}'
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the sender gave up (timeout, shutdown): nothing to answer
            self.close_connection = True


class Receiver:
    """A loopback HTTP server recording webhook deliveries."""

    def __init__(self):
        self.port = 0
        self.url = None
        self.received = []
        self.lock = threading.Lock()
        self.respond = lambda req: 200
        self.delay = 0
        self.hold = threading.Event()
        self.hold.set()
        self._srv = None
        self._thread = None

    def start(self):
        self._srv = _Server(("127.0.0.1", self.port), _Handler)
        self._srv.rx = self
        self.port = self._srv.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop listening (the port is closed: connections are refused)."""
        if self._srv is not None:
            self.hold.set()
            self._srv.shutdown()
            self._srv.server_close()
            self._thread.join(timeout=10)
            self._srv = None

    def snapshot(self, path=None):
        """A copy of the requests received so far (only those to path when given)."""
        with self.lock:
            return [r for r in self.received if path is None or r.path == path]
