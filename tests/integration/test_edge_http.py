#!/usr/bin/env python3
"""test_edge_http — noded's visitor port as a hostile client sees it (docs/design.md#the-edge-http-path): a local
502 ends the request body, strict chunked framing re-framed on both sides, absolute-form and
other targets, Content-Length / Transfer-Encoding conflicts, pooled origin connections with
stray bytes, the header / keep-alive / body timeouts and the connection cap, accept() at the
file-descriptor limit, the admin listener under a visitor flood, 1xx forwarding, the Upgrade
tunnel and response transfer codings. Raw sockets on loopback against a recording origin."""

import json
import os
import random
import socket
import subprocess
import time

import harness
from harness import wait_until
import edge_lib as L
from edge_lib import DEAD, DEMO, EdgeEnv

SMUGGLE = b"GET /SMUGGLED HTTP/1.1\r\nHost: demo.example.test\r\n\r\n"


def demo_get(path, extra=b""):
    return b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path, DEMO.encode(), extra)


def smuggled(e):
    return [t for t in e.origin.targets() if "SMUGGLED" in t]


def assert_rejected(e, data, codes=(400,), what=""):
    """data is answered with one of codes, the connection closes and the origin sees nothing."""
    e.origin.reset()
    resp, left, closed, raw = e.send(data, timeout=3, want=5)
    st = L.statuses(resp)
    assert st and st[0] in codes, "%s: expected %s, got %r (raw %r)" % (what, codes, st, raw[:300])
    assert len([s for s in st if s >= 200]) == 1, "%s: more than one answer %r" % (what, st)
    assert closed, "%s: connection left open after %s" % (what, st[0])
    time.sleep(0.05)
    assert e.origin.count() == 0, "%s: the origin received %r" % (what, e.origin.targets())


# ---- 1. a local answer ends the request body ----

def test_local_502_never_runs_the_body(tmp):
    e = EdgeEnv(tmp)
    cases = {
        "content-length": b"POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s"
                          % (DEAD.encode(), len(SMUGGLE), SMUGGLE),
        "chunked": b"POST /upload HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"%x\r\n%s\r\n0\r\n\r\n" % (DEAD.encode(), len(SMUGGLE), SMUGGLE),
        "unknown host": b"POST /upload HTTP/1.1\r\nHost: nosuch.example.test\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(SMUGGLE), SMUGGLE),
    }
    for name, data in cases.items():
        e.origin.reset()
        resp, left, closed, raw = e.send(data, timeout=3, want=1, quiet=0.5)
        st = L.statuses(resp)
        assert st[:1] in ([502], [404]), (name, st, raw[:400])
        assert len(st) == 1, "%s: one request answered %r: %r" % (name, st, raw[:600])
        time.sleep(0.1)
        assert not smuggled(e), "%s: the body reached the origin as a request: %r" % (
            name, e.origin.targets())

    # Expect: 100-continue, the body sent after a pause (after a 100 or the 502 came)
    e.origin.reset()
    head = b"POST /upload HTTP/1.1\r\nHost: %s\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (
        DEAD.encode(), len(SMUGGLE))
    raw, closed = L.exchange(e.port, None, pieces=[head, 0.3, SMUGGLE], timeout=3, quiet=0.5)
    st = L.statuses(L.split_responses(raw)[0])
    assert st in ([502], [100, 502]), "Expect: answered %r: %r" % (st, raw[:600])
    time.sleep(0.1)
    assert not smuggled(e), "Expect: the body reached the origin as a request"

    # an honest client: POST to the dead site, then its next GET on the same connection
    # (pipelined) is either answered properly or the connection is closed; never confused
    body = b"x" * 49
    e.origin.reset()
    data = (b"POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 49\r\n\r\n%s" % (
        DEAD.encode(), body)) + demo_get(b"/next")
    resp, left, closed, raw = e.send(data, timeout=3, want=2, quiet=0.5)
    st = L.statuses(resp)
    assert st in ([502], [502, 200]), (st, raw[:600])
    if st == [502, 200]:
        assert resp[1].body == b"GET /next 0\n", resp[1].body
    assert e.origin.targets() in ([], ["/next"]), e.origin.targets()


def test_local_504_never_runs_the_body(tmp):
    # an origin that never answers the SYN: noded's connect times out (5 s) -> 504
    hole = L.Blackhole()
    slow = "slow.example.test"
    try:
        e = EdgeEnv(tmp, extra_sites={slow: hole.port}, node_retry={"retries": 0})
        data = b"POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (
            slow.encode(), len(SMUGGLE), SMUGGLE)
        resp, left, closed, raw = e.send(data, timeout=12, want=1, quiet=0.5)
        st = L.statuses(resp)
        assert st == [504], "one request answered %r: %r" % (st, raw[:600])
        time.sleep(0.1)
        assert not smuggled(e), "the body reached the origin as a request: %r" % (
            e.origin.targets())
    finally:
        hole.close()


def node_metric(e, prefix):
    """The sum of the samples of noded's /metrics whose line starts with prefix."""
    st, text, _ = e.n.admin("GET", "/metrics")
    assert st == 200, text
    return sum(float(l.split()[1]) for l in text.splitlines() if l.startswith(prefix))


def one_local_answer(e, host, want_status, what):
    """POST with a request as its body to host: exactly want_status comes back (one answer,
    JSON error), and the body never reaches any origin as a request. -> the error object."""
    data = b"POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        host.encode(), len(SMUGGLE), SMUGGLE)
    resp, left, closed, raw = e.send(data, timeout=15, want=1, quiet=0.5)
    st = L.statuses(resp)
    assert st == [want_status], "%s: one request answered %r: %r" % (what, st, raw[:600])
    time.sleep(0.1)
    assert not smuggled(e), "%s: the body reached the origin as a request: %r" % (
        what, e.origin.targets())
    return json.loads(resp[0].body)["error"]


def test_retry_budget_and_retries_spent(tmp):
    # an origin that takes the request, waits 0.4 s and closes without an answer
    slow = L.RawOrigin(lambda req: ([0.4], "close"))
    dead2 = harness.free_port()
    budget, spent = "budget.example.test", "spent.example.test"
    try:
        e = EdgeEnv(tmp, extra_specs=[
            {"name": "budget", "hostnames": [budget],
             "node_retry": {"retries": 2, "retry_budget_ms": 100},
             "origins": [{"level": 1, "address": "127.0.0.1", "port": slow.port,
                          "scheme": "http"}]},
            {"name": "spent", "hostnames": [spent],
             "node_retry": {"retries": 1, "retry_budget_ms": 60000},
             "origins": [{"level": 1, "address": "127.0.0.1", "port": e_port, "scheme": "http"}
                         for e_port in (harness.free_port(), dead2)]}])
        # the attempt fails after the budget ran out: 504, no second attempt
        err = one_local_answer(e, budget, 504, "budget")
        assert err["message"] == "the retry budget ran out", err
        assert [r.target for r in slow.requests] == ["/upload"], slow.requests
        # an idempotent GET too: one attempt, then 504 (the budget, not the retries, ran out)
        slow.reset()
        resp, _, _, raw = e.send(b"GET /g HTTP/1.1\r\nHost: %s\r\n\r\n" % budget.encode(),
                                 timeout=15, want=1, quiet=0.5)
        assert L.statuses(resp) == [504], raw[:400]
        assert len(slow.requests) == 1, slow.requests
        # both origins refuse: the retry is spent on the second, then 502
        retries = node_metric(e, "cdnca_node_retries_total")
        err = one_local_answer(e, spent, 502, "retries spent")
        assert err["code"] == "origin_unreachable", err
        assert node_metric(e, "cdnca_node_retries_total") == retries + 1
    finally:
        slow.close()


def test_tls_failure_502(tmp):
    # an https origin that speaks plain HTTP: the handshake fails, 502, the body is not run
    plain = L.RawOrigin()
    tls = "tls.example.test"
    try:
        e = EdgeEnv(tmp, extra_specs=[
            {"name": "tlsfail", "hostnames": [tls], "node_retry": {"retries": 0},
             "origins": [{"level": 1, "address": "127.0.0.1", "port": plain.port,
                          "scheme": "https"}]}])
        before = node_metric(e, 'cdnca_node_origin_attempts_total{result="tls_error"}')
        err = one_local_answer(e, tls, 502, "tls failure")
        assert err["code"] == "origin_unreachable", err
        assert node_metric(e, 'cdnca_node_origin_attempts_total{result="tls_error"}') == before + 1
        assert not plain.requests, "the origin got an HTTP request: %r" % plain.requests
        # the visitor connection stays usable: the body was read whole and dropped
        resp, _, _, raw = e.send(
            b"POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\n\r\nabc" % tls.encode()
            + demo_get(b"/after-tls"), timeout=15, want=2, quiet=0.5)
        assert L.statuses(resp) == [502, 200], raw[:600]
        assert resp[1].body == b"GET /after-tls 0\n", resp[1].body
    finally:
        plain.close()


# ---- HTTP/1.0 keep-alive, as nginx honours it ----

def test_http10_keepalive(tmp):
    e = EdgeEnv(tmp)
    get10 = b"GET /%s HTTP/1.0\r\nHost: %s\r\nConnection: keep-alive\r\n\r\n"
    # two requests on one connection, each answered with "Connection: keep-alive"
    s = socket.create_connection((harness.HOST, e.port), timeout=10)
    try:
        for path in (b"k1", b"k2"):
            s.sendall(get10 % (path, DEMO.encode()))
            got = b""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                resp, _ = L.split_responses(got, eof=False)
                if resp:
                    break
                b = s.recv(65536)
                assert b, "closed after %r: %r" % (path, got)
                got += b
            assert resp and resp[0].status == 200, got
            assert resp[0].get("connection") == "keep-alive", resp[0].headers
            assert resp[0].body == b"GET /%s 0\n" % path, resp[0].body
        # a local answer keeps it too
        s.sendall(b"GET /x HTTP/1.0\r\nHost: nosuch.example.test\r\nConnection: keep-alive\r\n\r\n")
        got = b""
        while not L.split_responses(got, eof=False)[0]:
            b = s.recv(65536)
            assert b, "closed after the 404: %r" % got
            got += b
        resp = L.split_responses(got, eof=False)[0]
        assert resp[0].status == 404 and resp[0].get("connection") == "keep-alive", resp
    finally:
        s.close()
    # without keep-alive (or with close) an HTTP/1.0 connection closes after the answer
    for extra in (b"", b"Connection: keep-alive, close\r\n"):
        resp, _, closed, raw = e.send(
            b"GET /c HTTP/1.0\r\nHost: %s\r\n%s\r\n" % (DEMO.encode(), extra), timeout=5)
        assert L.statuses(resp) == [200] and closed, raw[:400]
        assert resp[0].get("connection") == "close", resp[0].headers
    # a chunked origin response cannot be framed for HTTP/1.0: the close ends it
    e2_origin_chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    e.origin.responder = lambda req: e2_origin_chunked
    resp, _, closed, raw = e.send(get10 % (b"ch", DEMO.encode()), timeout=5)
    assert closed and raw.endswith(b"abc"), raw[:400]
    assert b"connection: close" in raw.lower(), raw[:400]


# ---- 2. strict chunked framing, re-framed ----

def test_chunked_strict_and_reframed(tmp):
    e = EdgeEnv(tmp)
    head = b"POST /c HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % DEMO.encode()
    bad = {
        "bare LF after size": b"5\nhello\r\n0\r\n\r\n",
        "bare LF after data": b"5\r\nhello\n0\r\n\r\n",
        "junk after size": b"5 junk\r\nhello\r\n0\r\n\r\n",
        "ext then bare LF": b"2;\nxx\r\n0\r\n\r\n",
        "NUL in ext": b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
        "CR in ext": b"5;a\rb\r\nhello\r\n0\r\n\r\n",
        "bare LF in last chunk": b"5\r\nhello\r\n0\n\r\n",
        "size not hex": b"0x5\r\nhello\r\n0\r\n\r\n",
        "bare LF in trailer": b"5\r\nhello\r\n0\r\nX-T: 1\n\r\n",
        "size overflow": b"10000000000000005\r\nhello\r\n0\r\n\r\n",
    }
    for name, body in bad.items():
        assert_rejected(e, head + body, (400,), "chunked " + name)

    # a valid body with extensions and a trailer reaches the origin decoded and re-framed
    e.origin.reset()
    resp, _, _, raw = e.send(head + b"5;name=val;q=\"x y\"\r\nhello\r\n06\r\n world\r\n"
                             b"0;end\r\nX-Trailer: 1\r\n\r\n")
    assert L.statuses(resp) == [200], raw[:400]
    assert e.origin.count() == 1 and not e.origin.errors, (e.origin.targets(), e.origin.errors)
    req = e.origin.requests[0]
    assert req.body == b"hello world", req
    wire = bytes(e.origin.conns[req.conn])
    for frag in (b"name=val", b"06\r\n", b";end"):
        assert frag not in wire, "visitor framing %r reached the origin: %r" % (frag, wire)

    # responses: chunk extensions are not passed on, a malformed chunked response is a 502
    def responder(req):
        if req.target == "/ext":
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;sig=abc\r\nhello\r\n0\r\n\r\n")
        if req.target == "/lf":
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5\nhello\r\n0\r\n\r\n", "close")
        return L.default_response(req)
    e.origin.responder = responder
    resp, _, _, raw = e.send(demo_get(b"/ext"))
    assert L.statuses(resp) == [200], raw
    assert resp[0].body == b"hello" and b"sig=abc" not in raw, raw
    L.parse_response(raw)  # strictly framed
    for path in (b"/lf",):
        resp, _, _, raw = e.send(demo_get(path))
        st = L.statuses(resp)
        if st == [200]:
            m, used = L.parse_response(raw, eof=True)  # raises on lenient framing
            assert m.body == b"hello" and used == len(raw), (path, raw)
        else:
            assert st == [502], (path, raw)


def random_chunked(rng, body, ext=True):
    """body as chunks of random sizes, some with extensions, a trailer at the end."""
    out = bytearray()
    pos = 0
    while pos < len(body):
        n = min(len(body) - pos, rng.choice((1, 2, 7, 100, 1000, 4095, 4096, 16384, 65536)))
        e = b";k%d=v" % pos if ext and rng.random() < 0.3 else b""
        out += b"%x%s\r\n%s\r\n" % (n, e, body[pos:pos + n])
        pos += n
    return bytes(out) + b"0;last\r\nX-Sum: 1\r\n\r\n"


def random_pieces(rng, data, pause=0.002):
    """data cut at random places (single bytes too), with short pauses so reads split there."""
    out = []
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, 5, 17, 1024, 8191, 30000))
        out += [data[pos:pos + n], pause]
        pos += n
    return out


def test_reframing_across_reads(tmp):
    """Chunk lines, CRLFs and extensions split across reads are decoded and re-framed exactly,
    both ways; a large Content-Length body passes unchanged."""
    rng = random.Random(11)
    # binary bodies without ';', so an extension that leaks through is found by searching
    body = bytes(rng.getrandbits(8) for _ in range(300000)).replace(b";", b":")
    resp_body = bytes(rng.getrandbits(8) for _ in range(200000)).replace(b";", b":")
    resp_wire = random_chunked(rng, resp_body)

    def responder(req):
        if req.target == "/big-response":
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            return [head] + random_pieces(rng, resp_wire, 0.001)
        return L.default_response(req)
    e = EdgeEnv(tmp, responder=responder)

    wire = random_chunked(rng, body)
    head = b"POST /big-chunked HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % (
        DEMO.encode())
    raw, closed = L.exchange(e.port, None, pieces=random_pieces(rng, head + wire), timeout=20)
    resp, _ = L.split_responses(raw)
    assert L.statuses(resp) == [200], raw[:300]
    req = e.origin.requests[-1]
    assert req.body == body, "body differs: %d bytes at the origin, %d sent" % (
        len(req.body), len(body))
    assert b";k" not in bytes(e.origin.conns[req.conn]), "visitor chunk extensions reached the origin"
    assert not e.origin.errors, e.origin.errors[:1]

    e.origin.reset()
    data = b"PUT /big-length HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n" % (
        DEMO.encode(), len(body)) + body
    resp, _, _, raw = e.send(None, pieces=random_pieces(rng, data, 0.0005), timeout=20)
    assert L.statuses(resp) == [200], raw[:300]
    assert e.origin.requests[-1].body == body

    raw, closed = L.exchange(e.port, demo_get(b"/big-response"), timeout=20)
    m, used = L.parse_response(raw, eof=closed)  # strictly framed
    assert m.status == 200 and m.body == resp_body, (m.status, len(m.body), len(resp_body))
    assert used == len(raw), "bytes after the response: %r" % raw[used:used + 80]
    assert b";k" not in raw and b";last" not in raw, "origin chunk extensions reached the visitor"


def test_pipelined_requests_in_order(tmp):
    """50 requests in one write (GET, HEAD, POST with a length, POST chunked, in turn) are each
    forwarded once and answered in order, each with its own answer. (A guard for the visitor
    state machine; noded before the edge rules passed it too.)"""
    e = EdgeEnv(tmp)
    data = b""
    kinds = []
    for i in range(50):
        k = i % 4
        kinds.append(k)
        if k == 0:
            data += demo_get(b"/p%d" % i)
        elif k == 1:
            data += b"HEAD /p%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (i, DEMO.encode())
        elif k == 2:
            data += b"POST /p%d HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (
                i, DEMO.encode(), i, b"b" * i)
        else:
            data += (b"POST /p%d HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"%x\r\n%s\r\n0\r\n\r\n" % (i, DEMO.encode(), i, b"c" * i))
    raw, closed = L.exchange(e.port, data, timeout=10, want=1, quiet=1.0)
    got = []
    pos = 0
    for i, k in enumerate(kinds):
        m, used = L.parse_response(raw[pos:], head=(k == 1))
        pos += used
        got.append((m.status, m.body))
    assert pos == len(raw), "bytes after 50 answers: %r" % raw[pos:pos + 100]
    for i, k in enumerate(kinds):
        method = (b"GET", b"HEAD", b"POST", b"POST")[k]
        n = i if k >= 2 else 0
        want = b"" if k == 1 else b"%s /p%d %d\n" % (method, i, n)
        assert got[i] == (200, want), "answer %d: %r, expected %r" % (i, got[i], want)
    assert e.origin.targets() == ["/p%d" % i for i in range(50)], e.origin.targets()


# ---- 3. targets ----

def test_targets(tmp):
    e = EdgeEnv(tmp)
    h = b"Host: %s\r\n" % DEMO.encode()
    # the authority of an absolute-form target ends at '/', '?' or '#'
    e.origin.reset()
    resp, _, _, raw = e.send(b"GET http://demo.example.test:80?/admin HTTP/1.1\r\n" + h + b"\r\n")
    st = L.statuses(resp)
    assert st in ([200], [400]), raw
    for r in e.origin.requests:
        assert r.target == "/?/admin", "absolute-form target reached the origin as %r" % r.target
        assert r.get("host") in (DEMO, DEMO + ":80"), r.headers

    e.origin.reset()
    resp, _, _, raw = e.send(b"GET http://demo.example.test/ok?q=1 HTTP/1.1\r\n"
                             b"Host: other.example.test\r\n\r\n")
    assert L.statuses(resp) == [200], raw
    assert e.origin.targets() == ["/ok?q=1"], e.origin.targets()
    assert e.origin.requests[0].get("host") == DEMO, e.origin.requests[0].headers

    for line in (b"CONNECT demo.example.test:80 HTTP/1.1", b"GET demo.example.test:80 HTTP/1.1",
                 b"GET * HTTP/1.1", b"GET ftp://demo.example.test/x HTTP/1.1",
                 b"GET x HTTP/1.1"):
        assert_rejected(e, line + b"\r\n" + h + b"\r\n", (400,), line.decode())


# ---- Content-Length / Transfer-Encoding conflicts ----

def test_length_and_coding_conflicts(tmp):
    """noded before docs/design.md#the-edge-http-path already refused these; the test guards the rules through the
    rewrite of the request path."""
    e = EdgeEnv(tmp)
    h = b"POST /f HTTP/1.1\r\nHost: %s\r\n" % DEMO.encode()
    body = b"5\r\nhello\r\n0\r\n\r\n"
    cases = {
        "CL and TE": (h + b"Content-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n" + body,
                      (400,)),
        "TE and CL": (h + b"Transfer-Encoding: chunked\r\nContent-Length: 15\r\n\r\n" + body,
                      (400,)),
        "two CL": (h + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", (400,)),
        "listed CL": (h + b"Content-Length: 5, 5\r\n\r\nhello", (400,)),
        "signed CL": (h + b"Content-Length: +5\r\n\r\nhello", (400,)),
        "TE chunked twice": (h + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
                             b"\r\n" + body, (400, 501)),
        "TE gzip, chunked": (h + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + body, (400, 501)),
        "TE identity": (h + b"Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello",
                        (400, 501)),
        "TE xchunked": (h + b"Transfer-Encoding: xchunked\r\n\r\n" + body, (400, 501)),
        "TE in HTTP/1.0": (b"POST /f HTTP/1.0\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                           % DEMO.encode() + body, (400,)),
        "space before colon": (h + b"Transfer-Encoding : chunked\r\n\r\n" + body, (400,)),
        "obs-fold TE": (h + b"Transfer-Encoding:\r\n chunked\r\n\r\n" + body, (400,)),
        "bare CR in a field": (h + b"X-A: 1\rTransfer-Encoding: chunked\r\n\r\n" + body, (400,)),
    }
    for name, (data, codes) in cases.items():
        assert_rejected(e, data, codes, name)

    # the same conflicts in an origin's response: never passed on as they are
    answers = {
        "/clte": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"5\r\nhello\r\n0\r\n\r\n",
        "/tecl": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
                 b"5\r\nhello\r\n0\r\n\r\n",
        "/twocl": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nhello",
        "/listcl": b"HTTP/1.1 200 OK\r\nContent-Length: 5, 3\r\n\r\nhello",
    }
    e.origin.responder = lambda req: (answers[req.target], "close")
    for path in answers:
        resp, _, _, raw = e.send(demo_get(path.encode()))
        st = L.statuses(resp)
        if path in ("/clte", "/tecl") and st == [200]:
            # Transfer-Encoding wins (RFC 9112 §6.3): chunks decoded, framed by noded alone
            m, used = L.parse_response(raw, eof=True)
            assert m.body == b"hello" and used == len(raw), (path, raw)
            continue
        assert st == [502], "%s answered %r" % (path, raw)


# ---- 4. pooled origin connections ----

def test_pool_not_poisoned(tmp):
    """Stray origin bytes after a complete response (a body on a HEAD answer, then a whole
    extra response, arriving a moment later or in the same segment) never reach the next
    visitor. (noded before the edge rules already closed such connections in these shapes; the issue's
    4-of-4 poisoning was not reproduced here, so this guards the rule of docs/design.md#the-edge-http-path.)"""
    poison = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nPOISON!"

    def responder(req):
        if req.method == "HEAD":
            # a body on a HEAD answer, then a whole extra response
            # the stray bytes come a moment after the response (odd tries) or with it
            if req.target.endswith(("1", "3")):
                return b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" + poison
            return [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0.1, poison]
        return L.default_response(req)
    e = EdgeEnv(tmp, responder=responder)
    for i in range(4):
        resp, _, _, raw = e.send(b"HEAD /h%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (i, DEMO.encode()),
                                 head_first=True)
        assert L.statuses(resp)[:1] == [200], raw
        path = b"/after%d" % i
        resp, _, _, raw = e.send(demo_get(path))
        assert L.statuses(resp) == [200], raw
        assert resp[0].body == b"GET %s 0\n" % path, "try %d got %r" % (i, raw)


# ---- 5. limits and timeouts ----

LIMIT_ARGS = ["--header-timeout-ms", "1000", "--keepalive-timeout-ms", "1000",
              "--body-timeout-ms", "1000"]


def test_header_keepalive_body_timeouts(tmp):
    e = EdgeEnv(tmp, noded_args=LIMIT_ARGS)
    # slow headers: one byte every 200 ms is cut at the 1 s head deadline
    s = socket.create_connection((L.HOST, e.port), timeout=5)
    head = demo_get(b"/slow", b"X-Pad: " + b"a" * 40 + b"\r\n")
    t0 = time.monotonic()
    closed = False
    for b in head[:-2]:
        try:
            s.sendall(bytes([b]))
        except OSError:
            closed = True
            break
        if L.peer_closed(s, 0.2):
            closed = True
            break
        if time.monotonic() - t0 > 8:
            break
    took = time.monotonic() - t0
    s.close()
    # (bounds are loose for a loaded machine; without the deadline it stays open 10 s+)
    assert closed and took < 6, "slow head still open after %.1fs" % took
    assert e.origin.count() == 0

    # an idle keep-alive connection closes after about 1 s
    s = socket.create_connection((L.HOST, e.port), timeout=5)
    s.sendall(demo_get(b"/ka"))
    t0 = time.monotonic()
    got = b""
    while b"GET /ka 0\n" not in got:
        b = s.recv(4096)
        assert b, "closed before the response: %r" % got
        got += b
    assert L.peer_closed(s, 8), "idle keep-alive connection still open after 8s"
    took = time.monotonic() - t0
    s.close()
    assert 0.5 < took < 6, "keep-alive idle close after %.1fs" % took

    # a stalled request body closes the connection (an answer, if any, is 408 or 400)
    s = socket.create_connection((L.HOST, e.port), timeout=5)
    s.sendall(b"POST /b HTTP/1.1\r\nHost: %s\r\nContent-Length: 10\r\n\r\nab" % DEMO.encode())
    t0 = time.monotonic()
    s.settimeout(8)
    got = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except (socket.timeout, TimeoutError):
        raise AssertionError("stalled body still open after 8s (got %r)" % got)
    except ConnectionResetError:
        pass
    took = time.monotonic() - t0
    s.close()
    assert took < 6, took
    resp, _ = L.split_responses(got)
    assert all(r.status in (400, 408, 502, 504) for r in resp), got


def test_connection_cap(tmp):
    e = EdgeEnv(tmp, noded_args=["--max-connections", "20"])
    idle = L.open_idle(e.port, 20)
    try:
        time.sleep(0.3)
        # the 21st connection waits in the backlog: no answer while 20 are open
        s = socket.create_connection((L.HOST, e.port), timeout=5)
        s.sendall(demo_get(b"/over", b"Connection: close\r\n"))
        s.settimeout(1.0)
        try:
            early = s.recv(4096)
        except (socket.timeout, TimeoutError):
            early = None
        assert early is None, "connection above --max-connections was served: %r" % early
        st, _, _ = e.n.admin("GET", "/healthz", timeout=2)
        assert st == 200
        # freeing slots lets it in
        L.close_all(idle[:5])
        s.settimeout(5)
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        resp, _ = L.split_responses(got)
        assert L.statuses(resp) == [200], got
    finally:
        L.close_all(idle)


# ---- 6. at the file-descriptor limit ----

def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_fd_limit_no_spin(tmp):
    e = EdgeEnv(tmp, wrap=["prlimit", "--nofile=64:64", "--"])
    pid = e.n.pid()
    idle = []
    try:
        for _ in range(80):
            idle.append(socket.create_connection((L.HOST, e.port), timeout=5))
        time.sleep(0.5)
        log0 = os.path.getsize(e.n.log_path)
        cpu0 = cpu_seconds(pid)
        time.sleep(2.0)
        cpu = cpu_seconds(pid) - cpu0
        logged = os.path.getsize(e.n.log_path) - log0
        assert cpu < 0.5, "noded used %.2fs of CPU in 2s at its fd limit" % cpu
        assert logged < 4096, "noded logged %d bytes in 2s at its fd limit" % logged
    finally:
        L.close_all(idle)
    # it accepts again once descriptors are free
    wait_until(lambda: L.statuses(e.send(demo_get(b"/again"), timeout=2)[0]) == [200], 10,
               "a request served after the idle connections closed")


# ---- 7. the admin listener under a visitor flood ----

def test_admin_answers_while_flooded(tmp):
    # 300 idle visitor connections with 256 descriptors: the visitor side runs out, the admin
    # listener keeps its reserve
    e = EdgeEnv(tmp, wrap=["prlimit", "--nofile=256:256", "--"])
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection((L.HOST, e.port), timeout=5))
        time.sleep(0.3)
        ok = 0
        for _ in range(8):
            try:
                st, _, _ = e.n.admin("GET", "/healthz", timeout=2)
                ok += st == 200
            except OSError:
                pass
        assert ok == 8, "/healthz answered %d of 8 with 300 idle visitor connections" % ok
    finally:
        L.close_all(idle)
    wait_until(lambda: L.statuses(e.send(demo_get(b"/after"), timeout=2)[0]) == [200], 10,
               "a request served after the idle connections closed")


def assert_coded_framing(raw, coded):
    """raw is one response carrying coded (gzip) bytes framed as RFC 9112 §6.3 reads it: chunked
    as the final transfer coding or a Content-Length, with gzip declared in Transfer-Encoding
    or Content-Encoding."""
    m, used = L.parse_response(raw, eof=True, strict=False)
    assert used == len(raw), raw
    te = [t.strip().lower() for v in L.header_values(m.headers, "transfer-encoding")
          for t in v.split(",")]
    ce = [t.strip().lower() for v in L.header_values(m.headers, "content-encoding")
          for t in v.split(",")]
    if te:
        assert te[-1] == "chunked" and not L.header_values(m.headers, "content-length"), raw
        L._parse_chunked(raw, len(raw) - len(raw.split(b"\r\n\r\n", 1)[1]))
    else:
        assert len(L.header_values(m.headers, "content-length")) == 1, raw
    assert m.body == coded, raw
    assert "gzip" in te or "gzip" in ce, raw


# ---- 8. 1xx, Upgrade, transfer codings in responses ----

def test_interim_upgrade_and_codings(tmp):
    def responder(req):
        if req.target == "/hints":
            return (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                    b"HTTP/1.1 102 Processing\r\n\r\n"
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        if req.target == "/ws":
            return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\n\r\n", "tunnel")
        if req.target == "/unasked101":
            return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\n\r\n", "tunnel")
        if req.target == "/h2c":  # an origin that accepts h2c whenever it is asked
            if (req.get("upgrade") or "").lower() == "h2c":
                return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                        b"Connection: Upgrade\r\n\r\n", "tunnel")
            return b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain"
        if req.target == "/gzip":
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nCODEDBYTES", "close")
        if req.target == "/gzipchunked":
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    b"a\r\nCODEDBYTES\r\n0\r\n\r\n")
        return L.default_response(req)
    e = EdgeEnv(tmp, responder=responder)

    resp, _, _, raw = e.send(demo_get(b"/hints"))
    assert L.statuses(resp) == [103, 102, 200], raw
    assert resp[0].get("link") == "</s.css>; rel=preload", resp[0].headers
    assert resp[2].body == b"ok"

    s = socket.create_connection((L.HOST, e.port), timeout=5)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
              % DEMO.encode())
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        assert b, "closed after the Upgrade request: %r" % got
        got += b
    assert got.startswith(b"HTTP/1.1 101"), got
    head, rest = got.split(b"\r\n\r\n", 1)
    req = e.origin.requests[-1]
    assert (req.get("upgrade") or "").lower() == "websocket", req.headers
    for msg in (b"\x81\x04ping", b"second frame \x00\xff"):
        s.sendall(msg)
        want = rest + msg
        rest = b""
        echo = b""
        s.settimeout(3)
        while len(echo) < len(want):
            b = s.recv(4096)
            assert b, "tunnel closed, got %r" % echo
            echo += b
        assert echo == want, (echo, want)
    s.close()
    # the 101 and the tunnel are not an origin failure
    st, text, _ = e.n.admin("GET", "/metrics")
    assert st == 200, text
    failed = {}
    for line in text.splitlines():
        if line.startswith("cdnca_node_origin_attempts_total{") and 'result="success"' not in line:
            failed[line.split()[0]] = float(line.split()[1])
    assert not any(failed.values()), "origin failures counted: %r" % failed

    # an Upgrade the origin declines (200): the connection stays HTTP, the next request on it
    # is parsed and forwarded by noded, not tunnelled
    e.origin.reset()
    resp, _, _, raw = e.send(
        b"GET /ws-declined HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"\r\n" % DEMO.encode() + demo_get(b"/after-declined"), want=2)
    assert L.statuses(resp) == [200, 200], raw
    assert e.origin.targets() == ["/ws-declined", "/after-declined"], e.origin.targets()
    assert e.origin.requests[1].get("via"), "the second request was not parsed by noded"
    # h2c is never tunnelled (requests inside it would reach the origin without
    # X-Forwarded-For or Via and with any Host): it is forwarded without Upgrade and its
    # Connection tokens, the origin answers plain HTTP, and the connection stays noded's
    e.origin.reset()
    resp, _, _, raw = e.send(
        b"GET /h2c HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" % DEMO.encode()
        + demo_get(b"/after-h2c"), want=2)
    assert L.statuses(resp) == [200, 200], raw
    assert resp[0].body == b"plain", raw
    first = e.origin.requests[0]
    assert first.get("upgrade") is None and first.get("http2-settings") is None, first.headers
    assert "upgrade" not in (first.get("connection") or "").lower(), first.headers
    assert e.origin.targets() == ["/h2c", "/after-h2c"], e.origin.targets()
    assert e.origin.requests[1].get("via"), "the second request was not parsed by noded"
    # a 101 to a request that asked for no upgrade is not a tunnel
    resp, _, closed, raw = e.send(demo_get(b"/unasked101"))
    st = L.statuses(resp)
    assert st == [502] or (not st and closed), "unasked 101 answered %r" % raw

    # a transfer coding noded does not decode: 502, or the coded bytes framed correctly
    for path, coded in ((b"/gzip", b"CODEDBYTES"), (b"/gzipchunked", b"CODEDBYTES")):
        resp, _, _, raw = e.send(demo_get(path))
        st = L.statuses(resp)
        if st == [502]:
            continue
        assert st == [200], (path, raw)
        assert_coded_framing(raw, coded)



def node_metric(e, name, **labels):
    """The value of one sample of noded's /metrics (0 when absent)."""
    st, text, _ = e.n.admin("GET", "/metrics")
    assert st == 200, text
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        key, _, val = line.rpartition(" ")
        inner = key[len(name):].strip("{}")
        if not want or all(part in inner.split(",") for part in want.split(",")):
            total += float(val)
    return total


def test_refused_response_ejects_no_origin(tmp):
    """An answer noded refuses to relay (repeated Content-Length, Transfer-Encoding: identity, a
    101 nobody asked for) says little about the origin: 50 visitors asking for such URLs get 502
    origin_response_refused, the origin is neither counted as failing nor skipped, and other URLs
    are served from it all along (a visitor cannot eject a site's origins)."""
    refused = {
        "/twocl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        "/identity": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n"
                     b"\r\nhello",
        "/h101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
    }

    def responder(req):
        if req.target in refused:
            return (refused[req.target], "close")
        return L.default_response(req)
    # three failures in a minute would skip the site's only origin for a minute
    e = EdgeEnv(tmp, responder=responder,
                node_retry={"fail_count": 3, "fail_window_ms": 60000, "skip_ms": 60000})
    paths = sorted(refused)
    # each visitor says Connection: close: its exchange is read to noded's close, not to 0.3 s
    # of quiet on a connection kept alive
    close = b"Connection: close\r\n"
    for i in range(50):
        resp, _, _, raw = e.send(demo_get(paths[i % len(paths)].encode(), close))
        assert L.statuses(resp) == [502], raw
        assert json.loads(resp[0].body)["error"]["code"] == "origin_response_refused", raw
    assert node_metric(e, "cdnca_node_origin_attempts_total", result="refused_response") == 50
    for result in ("io_error", "error_status", "connect_error", "timeout"):
        assert node_metric(e, "cdnca_node_origin_attempts_total", result=result) == 0, result
    assert node_metric(e, "cdnca_node_origin_skipped") == 0
    e.origin.reset()
    for i in range(5):
        resp, _, _, raw = e.send(demo_get(b"/fine-%d" % i, close))
        assert L.statuses(resp) == [200], raw
    assert e.origin.targets() == ["/fine-%d" % i for i in range(5)], e.origin.targets()


if __name__ == "__main__":
    harness.main()
