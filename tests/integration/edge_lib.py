#!/usr/bin/env python3
"""edge_lib — raw-socket tools for testing noded's visitor port (docs/design.md#the-edge-http-path), stdlib only.

- parse_request / parse_response: a strict HTTP/1.1 message parser (RFC 9112: CRLF line ends
  only, no obs-fold, token names, one framing: a single plain Content-Length or exactly
  "Transfer-Encoding: chunked" with grammar-checked chunk lines). It is the reference both for
  what a visitor message means and for what an origin must receive.
- RawOrigin: an in-process origin on loopback that reads its connections with the strict
  parser, records every request and the exact bytes of every connection, and answers with a
  scripted response (default: 200 with a small Content-Length body).
- exchange(): connect to a port, send exact bytes, read every response until the peer closes or
  the responses are complete and the line stays quiet, within a deadline.
- split_responses(): cut the bytes a visitor received into responses.
- EdgeEnv: controld + noded (harness.py) with a live site demo.example.test on a RawOrigin and a
  site dead.example.test whose only origin refuses connections.
- Nginx: Debian's nginx on loopback with a generated config in a temp prefix, proxy_pass to the
  same origin.
"""

import os
import re
import shutil
import socket
import subprocess
import threading
import time

import harness
from harness import HOST, Controld, Noded, free_port, wait_until

TOKEN_CHARS = frozenset(b"!#$%&'*+-.^_`|~0123456789"
                        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
HEXDIG = frozenset(b"0123456789abcdefABCDEF")
MAX_HEAD = 64 * 1024

# Header fields a proxy consumes or rewrites; everything else is end to end.
HOP_BY_HOP = frozenset(["connection", "keep-alive", "te", "trailer", "transfer-encoding",
                        "upgrade", "proxy-connection", "proxy-authorization",
                        "proxy-authenticate", "host", "content-length", "expect", "via",
                        "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
                        "x-real-ip", "forwarded"])


class Incomplete(Exception):
    """More bytes are needed."""


class Bad(Exception):
    """The bytes are not a valid message; .status is the answer a strict server gives."""

    def __init__(self, reason, status=400):
        super().__init__(reason)
        self.reason = reason
        self.status = status


def _is_token(b):
    return len(b) > 0 and all(c in TOKEN_CHARS for c in b)


def _line(buf, pos, lf_ok):
    """The line at pos without its end, and the position after it. Strict: CRLF only."""
    i = buf.find(b"\n", pos)
    if i < 0:
        if len(buf) - pos > MAX_HEAD:
            raise Bad("line too long")
        raise Incomplete()
    if i > pos and buf[i - 1] == 0x0D:
        line = buf[pos:i - 1]
    elif lf_ok:
        line = buf[pos:i]
    else:
        raise Bad("bare LF line end")
    if b"\r" in line:
        raise Bad("bare CR")
    return line, i + 1


def _field_value_ok(v):
    return all(c == 0x09 or 0x20 <= c <= 0x7E or c >= 0x80 for c in v)


def _parse_fields(buf, pos, lf_ok):
    """Header (or trailer) field lines up to the empty line -> ([(name, value)], pos)."""
    fields = []
    while True:
        line, pos = _line(buf, pos, lf_ok)
        if line == b"":
            return fields, pos
        if line[:1] in (b" ", b"\t"):
            raise Bad("obs-fold")
        colon = line.find(b":")
        if colon <= 0:
            raise Bad("field line without a name")
        name = line[:colon]
        if not _is_token(name):
            raise Bad("invalid field name %r" % name)
        value = line[colon + 1:].strip(b" \t")
        if not _field_value_ok(value):
            raise Bad("control byte in field value")
        fields.append((name.decode("latin-1"), value.decode("latin-1")))
        if len(fields) > 100:
            raise Bad("too many fields", 431)


def header_values(headers, name):
    name = name.lower()
    return [v for k, v in headers if k.lower() == name]


def _chunk_ext_ok(ext):
    """chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] )"""
    i, n = 0, len(ext)

    def ws(i):
        while i < n and ext[i] in (0x20, 0x09):
            i += 1
        return i

    while True:
        if i == n:
            return True
        i = ws(i)
        if i == n or ext[i] != 0x3B:  # whitespace only before ';'
            return False
        i = ws(i + 1)
        j = i
        while j < n and ext[j] in TOKEN_CHARS:
            j += 1
        if j == i:
            return False
        i = ws(j)
        if i < n and ext[i] == 0x3D:  # '='
            i = ws(i + 1)
            if i < n and ext[i] == 0x22:  # quoted-string
                i += 1
                while True:
                    if i >= n:
                        return False
                    c = ext[i]
                    if c == 0x22:
                        i += 1
                        break
                    if c == 0x5C:
                        if i + 1 >= n or not (ext[i + 1] == 0x09 or 0x20 <= ext[i + 1] <= 0x7E
                                              or ext[i + 1] >= 0x80):
                            return False
                        i += 2
                        continue
                    if not (c == 0x09 or c == 0x20 or c == 0x21 or 0x23 <= c <= 0x7E
                            or c >= 0x80):
                        return False
                    i += 1
            else:
                j = i
                while j < n and ext[j] in TOKEN_CHARS:
                    j += 1
                if j == i:
                    return False
                i = j


def _parse_chunked(buf, pos, lf_ok=False):
    """A chunked body at pos -> (data, trailers, pos after it). Chunk lines end at CRLF only;
    lf_ok (the lenient reading) also takes whitespace after a chunk size with no extension."""
    out = bytearray()
    while True:
        line, pos = _line(buf, pos, False)
        if lf_ok and b";" not in line:
            line = line.rstrip(b" \t")
        j = 0
        while j < len(line) and line[j] in HEXDIG:
            j += 1
        if j == 0:
            raise Bad("chunk size is not hex")
        if j > 15:
            raise Bad("chunk size too large")
        size = int(line[:j], 16)
        if not _chunk_ext_ok(line[j:]):
            raise Bad("invalid chunk extension")
        if size == 0:
            trailers, pos = _parse_fields(buf, pos, lf_ok)
            return bytes(out), trailers, pos
        if len(buf) < pos + size + 2:
            raise Incomplete()
        out += buf[pos:pos + size]
        pos += size
        if buf[pos:pos + 2] != b"\r\n":
            raise Bad("chunk data not followed by CRLF")
        pos += 2


def _framing(headers, is_request):
    """-> ("chunked", None) | ("length", n) | ("none", None); raises Bad on any ambiguity."""
    te = header_values(headers, "transfer-encoding")
    cl = header_values(headers, "content-length")
    if te and cl:
        raise Bad("both Transfer-Encoding and Content-Length")
    if te:
        if len(te) > 1:
            raise Bad("more than one Transfer-Encoding field", 501)
        if te[0].lower() != "chunked":
            raise Bad("transfer coding other than chunked", 501)
        return "chunked", None
    if cl:
        if len(cl) > 1:
            raise Bad("more than one Content-Length field")
        v = cl[0]
        if not v or not v.isdigit() or not v.isascii() or len(v) > 18:
            raise Bad("invalid Content-Length")
        return "length", int(v)
    return "none", None


class Message:
    """A parsed message: request (method, target) or response (status); headers as a list."""

    def __init__(self):
        self.method = self.target = self.version = None
        self.status = None
        self.reason = None
        self.headers = []
        self.body = b""
        self.trailers = []
        self.framing = "none"
        self.raw = b""

    def get(self, name):
        v = header_values(self.headers, name)
        return v[0] if v else None

    def end_to_end(self):
        """Header fields a proxy must pass on unchanged (lower-cased names), in order."""
        listed = set()
        for v in header_values(self.headers, "connection"):
            listed.update(t.strip().lower() for t in v.split(","))
        return [(k.lower(), v) for k, v in self.headers
                if k.lower() not in HOP_BY_HOP and k.lower() not in listed
                and not k.lower().startswith("proxy-")]

    def __repr__(self):
        if self.status is not None:
            return "<response %s %s body=%d>" % (self.status, self.headers, len(self.body))
        return "<request %s %r %s body=%r>" % (self.method, self.target, self.headers,
                                               self.body[:80])


def parse_request(buf, lf_ok=False):
    """One request at the start of buf -> (Message, bytes used). Raises Incomplete or Bad.

    lf_ok: accept a bare LF as the end of a request or field line (RFC 9112 §2.2 lets a
    recipient do so); chunk lines and everything else stay strict."""
    m = Message()
    line, pos = _line(buf, 0, lf_ok)
    parts = line.split(b" ")
    if len(parts) != 3:
        raise Bad("request line is not method SP target SP version")
    method, target, version = parts
    if not _is_token(method):
        raise Bad("invalid method")
    if not target or any(c <= 0x20 or c >= 0x7F for c in target):
        raise Bad("invalid target")
    if not re.fullmatch(rb"HTTP/1\.[01]", version):
        raise Bad("unsupported version", 505 if re.fullmatch(rb"HTTP/\d\.\d", version) else 400)
    m.method, m.target, m.version = method.decode(), target.decode(), version.decode()
    m.headers, pos = _parse_fields(buf, pos, lf_ok)
    kind, n = _framing(m.headers, True)
    if kind == "chunked" and m.version == "HTTP/1.0":
        raise Bad("chunked in HTTP/1.0")
    m.framing = kind
    if kind == "length":
        if len(buf) < pos + n:
            raise Incomplete()
        m.body = bytes(buf[pos:pos + n])
        pos += n
    elif kind == "chunked":
        m.body, m.trailers, pos = _parse_chunked(buf, pos, lf_ok)
    m.raw = bytes(buf[:pos])
    return m, pos


def bodyless_status(status, head):
    return head or 100 <= status < 200 or status in (204, 304)


def parse_response(buf, head=False, eof=False, strict=True):
    """One response at the start of buf -> (Message, bytes used). A response without framing
    runs to the end of the connection (eof=True: buf holds all of it). strict=False accepts
    bare LF line ends (to read what a visitor received whatever it is)."""
    lf = not strict
    m = Message()
    line, pos = _line(buf, 0, lf)
    mm = re.fullmatch(rb"(HTTP/1\.[01]) ([0-9]{3})(?: (.*))?", line)
    if not mm:
        raise Bad("invalid status line %r" % line[:80])
    m.version = mm.group(1).decode()
    m.status = int(mm.group(2))
    m.reason = (mm.group(3) or b"").decode("latin-1")
    m.headers, pos = _parse_fields(buf, pos, lf)
    if bodyless_status(m.status, head):
        m.raw = bytes(buf[:pos])
        return m, pos
    if not strict and header_values(m.headers, "transfer-encoding"):
        kind, n = "chunked", None
    elif not strict and header_values(m.headers, "content-length"):
        kind, n = "length", int(header_values(m.headers, "content-length")[0].split(",")[0])
    else:
        kind, n = _framing(m.headers, False)
    m.framing = kind
    if kind == "length":
        if len(buf) < pos + n:
            raise Incomplete()
        m.body = bytes(buf[pos:pos + n])
        pos += n
    elif kind == "chunked":
        m.body, m.trailers, pos = _parse_chunked(buf, pos, lf)
    else:
        if not eof:
            raise Incomplete()
        m.framing = "close"
        m.body = bytes(buf[pos:])
        pos = len(buf)
    m.raw = bytes(buf[:pos])
    return m, pos


def split_responses(data, eof=True, head_first=False, strict=False):
    """Cut what a visitor received into responses -> (list of Message, leftover bytes).
    head_first: the first final response answers HEAD (no body)."""
    out = []
    pos = 0
    finals = 0
    while pos < len(data):
        try:
            m, used = parse_response(data[pos:], head=head_first and finals == 0, eof=eof,
                                     strict=strict)
        except (Incomplete, Bad):
            break
        out.append(m)
        if m.status >= 200:
            finals += 1
        pos += used
        if m.status == 101:
            break
    return out, bytes(data[pos:])


def statuses(responses):
    return [r.status for r in responses]


# ---- raw visitor connections ----

def exchange(port, data, timeout=3.0, quiet=0.3, pieces=None, head_first=False, want=None,
             host=HOST):
    """Send data (or the list pieces, with (seconds) floats as pauses) on a new connection and
    read until the peer closes, or until `want` final responses (default: 1) are complete and
    nothing more came for `quiet` seconds, or `timeout` seconds in all.
    -> (bytes received, closed_by_peer)."""
    s = socket.create_connection((host, port), timeout=timeout)
    got = bytearray()
    closed = False
    deadline = time.monotonic() + timeout
    try:
        try:
            for p in (pieces if pieces is not None else [data]):
                if isinstance(p, (int, float)):
                    time.sleep(p)
                else:
                    s.sendall(p)
        except (BrokenPipeError, ConnectionResetError):
            pass
        want = 1 if want is None else want
        last = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            rs, _, _ = _select([s], min(deadline - now, quiet))
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
                resp, _ = split_responses(bytes(got), eof=False, head_first=head_first)
                if sum(1 for r in resp if r.status >= 200) >= want:
                    break
    finally:
        s.close()
    return bytes(got), closed


def _select(r, t):
    import select
    return select.select(r, [], [], max(0.0, t))


def open_idle(port, n, host=HOST):
    """n connections to port that send nothing (list of sockets; the caller closes them)."""
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=5)
        socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def peer_closed(s, timeout):
    """1 when the peer closed s (EOF or reset) within timeout seconds, else 0."""
    s.settimeout(timeout)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True


# ---- the origin ----

def default_response(req):
    body = ("%s %s %d\n" % (req.method, req.target, len(req.body))).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Origin: raw\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + (b"" if req.method == "HEAD" else body)


class RawOrigin:
    """An origin on 127.0.0.1 that records exact bytes and strictly parsed requests.

    responder(req) -> bytes to answer, or (bytes, action) with action "close" (close after
    sending) or "tunnel" (afterwards echo every byte back, as a WebSocket echo would). Each
    recorded request has .conn (connection number); .conns[i] is that connection's raw bytes;
    .errors lists (conn, reason, bytes) for connections whose bytes were not a valid request."""

    def __init__(self, responder=None):
        self.responder = responder or default_response
        self.lock = threading.Lock()
        self.requests = []
        self.conns = []
        self.errors = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, 0))
        self._sock.listen(1024)
        self.port = self._sock.getsockname()[1]
        self.address = HOST
        self._stop = False
        self._open = set()
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def reset(self):
        with self.lock:
            self.requests = []
            self.errors = []

    def count(self, pred=None):
        with self.lock:
            return sum(1 for r in self.requests if pred is None or pred(r))

    def targets(self):
        with self.lock:
            return [r.target for r in self.requests]

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            with self.lock:
                cid = len(self.conns)
                self.conns.append(bytearray())
                self._open.add(c)
            threading.Thread(target=self._serve, args=(c, cid), daemon=True).start()

    def _serve(self, c, cid):
        buf = bytearray()
        try:
            while True:
                while True:
                    try:
                        req, used = parse_request(bytes(buf))
                    except Incomplete:
                        break
                    except Bad as e:
                        with self.lock:
                            self.errors.append((cid, e.reason, bytes(buf)))
                        return
                    del buf[:used]
                    req.conn = cid
                    with self.lock:
                        self.requests.append(req)
                    ans = self.responder(req)
                    action = None
                    if isinstance(ans, tuple):
                        ans, action = ans
                    for part in (ans if isinstance(ans, list) else [ans]):
                        if isinstance(part, (int, float)):
                            time.sleep(part)
                        else:
                            c.sendall(part)
                    if action == "close":
                        return
                    if action == "tunnel":
                        self._tunnel(c, cid, bytes(buf))
                        return
                b = c.recv(65536)
                if not b:
                    if buf:
                        with self.lock:
                            self.errors.append((cid, "connection closed inside a request",
                                                bytes(buf)))
                    return
                with self.lock:
                    self.conns[cid] += b
                buf += b
        except OSError:
            return
        finally:
            with self.lock:
                self._open.discard(c)
            c.close()

    def _tunnel(self, c, cid, pending):
        if pending:
            c.sendall(pending)
        while True:
            b = c.recv(65536)
            if not b:
                return
            with self.lock:
                self.conns[cid] += b
            c.sendall(b)

    def close(self):
        self._stop = True
        try:
            self._sock.close()
        except OSError:
            pass
        with self.lock:
            socks = list(self._open)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ---- controld + noded with two sites ----

DEMO = "demo.example.test"
DEAD = "dead.example.test"


class EdgeEnv:
    """controld, one noded, site DEMO on a RawOrigin and site DEAD on a refused port."""

    def __init__(self, tmp, noded_args=None, responder=None, dead_port=None, env=None,
                 node_retry=None, wrap=None, extra_sites=None, extra_specs=None):
        """wrap: argv prefix noded is started under, e.g. ["prlimit", "--nofile=64:64", "--"]
        (it must exec noded, so the pid stays noded's). extra_specs: more sites, as full
        POST /v1/sites bodies."""
        self.tmp = tmp
        self.origin = RawOrigin(responder)
        self.c = Controld(tmp).start()
        self.dead_port = dead_port or free_port()
        self._site("demo", DEMO, self.origin.port, node_retry)
        self._site("dead", DEAD, self.dead_port, node_retry)
        for i, (host, port) in enumerate(sorted((extra_sites or {}).items())):
            self._site("extra%d" % i, host, port, node_retry)
        for spec in extra_specs or []:
            st, body, _ = self.c.api("POST", "/v1/sites", spec)
            assert st == 201, body
        st, body, _ = self.c.api("POST", "/v1/nodes", {"name": "edge"})
        assert st == 201, body
        self.n = Noded(self.c, body["token"], tmp, extra_args=list(noded_args or []), env=env)
        if wrap:
            n = self.n
            n._spawn = lambda argv, env=None: Noded._spawn(n, list(wrap) + argv, env)
        self.n.start()
        self.port = self.n.port
        wait_until(self._synced, 20, "noded serves %s" % DEMO)
        self.origin.reset()

    def _site(self, name, host, port, node_retry):
        spec = {"name": name, "hostnames": [host],
                "origins": [{"level": 1, "address": HOST, "port": port, "scheme": "http"}]}
        if node_retry:
            spec["node_retry"] = node_retry
        st, body, _ = self.c.api("POST", "/v1/sites", spec)
        assert st == 201, body

    def _synced(self):
        got, _ = exchange(self.port, b"GET /sync HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                          b"\r\n" % DEMO.encode(), timeout=2)
        resp, _ = split_responses(got)
        return resp and resp[-1].status == 200

    def send(self, data, **kw):
        """exchange() on the visitor port -> (responses, leftover, closed, raw)."""
        raw, closed = exchange(self.port, data, **kw)
        resp, left = split_responses(raw, head_first=kw.get("head_first", False))
        return resp, left, closed, raw

    def close(self):
        self.origin.close()


class Blackhole:
    """A loopback port whose SYNs go unanswered: a listener with a full accept queue."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((HOST, 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.filler = socket.create_connection((HOST, self.port), timeout=2)

    def close(self):
        self.filler.close()
        self.listener.close()


# ---- nginx ----

NGINX_CONF = """
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log {loglevel};
events {{ worker_connections {conns}; }}
worker_rlimit_nofile {nofile};
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream origin {{ server 127.0.0.1:{origin_port}; keepalive 64; }}
    map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        server_name {host};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto http;
            proxy_connect_timeout 5s;
        }}
    }}
}}
"""


def nginx_binary():
    for p in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    return None


class Nginx(harness._Proc):
    """nginx in front of an origin port (same role as noded's visitor port)."""

    def __init__(self, tmpdir, origin_port, host=DEMO, conns=1024, name="nginx"):
        super().__init__(name, tmpdir)
        self.prefix = os.path.join(tmpdir, name)
        os.makedirs(self.prefix, exist_ok=True)
        self.port = free_port()
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(prefix=self.prefix, origin_port=origin_port, port=self.port,
                                      host=host, conns=conns, nofile=conns * 2 + 64,
                                      loglevel="warn"))

    def start(self, timeout=10.0):
        b = nginx_binary()
        if not b:
            raise AssertionError("nginx is not installed (apt-get install nginx)")
        self._spawn([b, "-p", self.prefix, "-c", self.conf, "-e", self.prefix + "/error.log"])

        def up():
            s = socket.create_connection((HOST, self.port), timeout=1)
            s.close()
            return True
        self._wait_ready(up, timeout, "nginx on port %d" % self.port)
        return self

    def stop(self, timeout=20.0, expect_rc=None):
        return super().stop(timeout=timeout, expect_rc=expect_rc)

    def log_tail(self, lines=harness._LOG_TAIL):
        out = super().log_tail(lines)
        try:
            with open(os.path.join(self.prefix, "error.log"), "rb") as f:
                out += "\n-- error.log --\n" + "\n".join(
                    f.read().decode("utf-8", "replace").splitlines()[-lines:])
        except OSError:
            pass
        return out


def wait_for(fn, timeout, what):
    return wait_until(fn, timeout, what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)
