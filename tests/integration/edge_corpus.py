#!/usr/bin/env python3
"""edge_corpus — raw visitor messages for the differential test of noded's visitor port.

Built from RFC 9112 §6 (message length: Content-Length and Transfer-Encoding, together and
apart), §7 (chunked coding: chunk-size lines, extensions, line ends, trailers), §3.2 (request
targets: origin-, absolute-, authority- and asterisk-form), §5 (field lines), and the
Transfer-Encoding obfuscations of request-smuggling mutation lists (case, whitespace, control
bytes, lists, duplicates, near-miss names), each placed with no Content-Length, with the
Content-Length of the chunked body (CL.TE) and with a short one (TE.CL).

Every case carries a marker "zcNNNN" (in its target and in an X-Case field) so the origin can
tell which case a request belongs to; a request hidden in a body carries "zcNNNNs". interpret()
is the reference reading (strict RFC 9112 plus the target rules of docs/design.md#the-edge-http-path): the list of requests
a proxy must forward and whether the rest must be rejected.

    python3 edge_corpus.py            # print the cases with their reference reading
"""

import random
import re
import sys

import edge_lib as L

HOST = L.DEMO
MUTATIONS = 200
CHUNKED_BODY = b"5\r\nhello\r\n0\r\n\r\n"


class Case:
    """policy "strict": noded must do exactly what the reference does (forward the same
    messages, reject the rest); "either": RFC 9112 lets a recipient accept or reject (bare LF
    in the head, duplicate equal Content-Length, ...), so only the safety properties apply and
    a forwarded message must match the lenient reading."""

    def __init__(self, cid, group, name, data, policy="strict"):
        self.response = None  # index in RESPONSES: the origin's answer is the case
        self.id = cid
        self.group = group
        self.name = name
        self.data = data
        self.policy = policy
        self.marker = "zc%04d" % cid

    def __repr__(self):
        return "#%d %s/%s" % (self.id, self.group, self.name)


def _host_ok(h):
    if h is None:
        return False
    return re.fullmatch(re.escape(HOST) + r"(:[0-9]{1,5})?", h, re.I) is not None


def _target_policy(m):
    """Sets m.want_target / m.want_host; returns a reason to reject or None."""
    t = m.target
    hosts = L.header_values(m.headers, "host")
    if len(hosts) > 1:
        return "more than one Host"
    if m.version == "HTTP/1.1" and not hosts:
        return "no Host"
    host = hosts[0] if hosts else None
    if m.method == "CONNECT":
        return "CONNECT"
    if t == "*":
        if m.method != "OPTIONS":
            return "* without OPTIONS"
        m.want_target = "*"
    elif t.startswith("/"):
        if "#" in t:
            return "fragment in target"
        m.want_target = t
    else:
        mm = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)", t)
        if not mm:
            return "authority-form or invalid target"
        if mm.group(1).lower() not in ("http", "https"):
            return "scheme " + mm.group(1)
        auth, rest = mm.group(2), mm.group(3)
        if "@" in auth or not auth:
            return "userinfo or empty authority"
        if "#" in rest:
            return "fragment in target"
        m.want_target = rest if rest.startswith("/") else "/" + rest
        host = auth
    if not _host_ok(host):
        return "host is not the site"
    m.want_host = host
    return None


def interpret(data, lf_ok=False):
    """The reference reading -> (messages a proxy forwards, None | "reject: why" |
    "incomplete"). Messages after Connection: close are not read."""
    msgs = []
    pos = 0
    while pos < len(data):
        try:
            m, used = L.parse_request(data[pos:], lf_ok=lf_ok)
        except L.Incomplete:
            return msgs, "incomplete"
        except L.Bad as e:
            return msgs, "reject: " + e.reason
        why = _target_policy(m)
        if why:
            return msgs, "reject: " + why
        msgs.append(m)
        pos += used
        conn = ",".join(L.header_values(m.headers, "connection")).lower()
        if "close" in conn or (m.version == "HTTP/1.0" and "keep-alive" not in conn):
            break
    return msgs, None


# ---- generation ----

class _Gen:
    def __init__(self):
        self.cases = []

    def add(self, group, name, build, policy="strict"):
        cid = len(self.cases) + 1
        mk = "zc%04d" % cid
        data = build(mk)
        self.cases.append(Case(cid, group, name, data, policy))


def _req(mk, method=b"POST", path=b"/", fields=b"", body=b"", version=b"HTTP/1.1",
         host=True):
    target = b"/" + mk.encode() + path
    h = b"Host: %s\r\n" % HOST.encode() if host else b""
    return b"%s %s %s\r\n%sX-Case: %s\r\n%s\r\n%s" % (method, target, version, h, mk.encode(),
                                                     fields, body)


def _smuggle(mk):
    """A whole request that must never reach the origin unless it is really a second one."""
    return b"GET /%ss/SMUGGLED HTTP/1.1\r\nHost: %s\r\nX-Case: %ss\r\n\r\n" % (
        mk.encode(), HOST.encode(), mk.encode())


def build():
    g = _Gen()

    # -- RFC 9112 §6.2/6.3 Content-Length --
    for name, value, policy in [
            ("plain", b"5", "strict"), ("leading zeros", b"005", "strict"),
            ("OWS after", b"5 ", "strict"), ("OWS before", b" 5", "strict"),
            ("tab after", b"5\t", "strict"), ("plus", b"+5", "strict"), ("minus", b"-5", "strict"),
            ("hex", b"0x5", "strict"), ("decimal point", b"5.0", "strict"),
            ("list equal", b"5,5", "strict"), ("list equal OWS", b"5, 5", "strict"),
            ("list differ", b"5, 6", "strict"), ("empty", b"", "strict"),
            ("letters", b"five", "strict"), ("trailing junk", b"5x", "strict"),
            ("overflow", b"99999999999999999999999", "strict"), ("NUL", b"5\x00", "strict"),
            ("VT", b"5\x0b", "strict"), ("FF", b"\x0c5", "strict")]:
        g.add("cl", name, lambda mk, v=value: _req(mk, fields=b"Content-Length: %s\r\n" % v,
                                                   body=b"hello"), policy)
    g.add("cl", "two fields equal", lambda mk: _req(
        mk, fields=b"Content-Length: 5\r\nContent-Length: 5\r\n", body=b"hello"), "either")
    g.add("cl", "two fields differ", lambda mk: _req(
        mk, fields=b"Content-Length: 5\r\nContent-Length: 3\r\n", body=b"hello"))
    g.add("cl", "two fields differ reversed", lambda mk: _req(
        mk, fields=b"Content-Length: 3\r\nContent-Length: 5\r\n", body=b"hello"))
    g.add("cl", "body is a request", lambda mk: _req(
        mk, fields=b"Content-Length: %d\r\n" % len(_smuggle(mk)), body=_smuggle(mk)))
    g.add("cl", "short length then a real second request", lambda mk: _req(
        mk, fields=b"Content-Length: 5\r\n", body=b"hello" + _smuggle(mk)))
    g.add("cl", "GET with a body", lambda mk: _req(
        mk, method=b"GET", fields=b"Content-Length: 5\r\n", body=b"hello"))
    g.add("cl", "HTTP/1.0 with length", lambda mk: _req(
        mk, version=b"HTTP/1.0", fields=b"Content-Length: 5\r\n", body=b"hello"))
    g.add("cl", "Expect 100-continue", lambda mk: _req(
        mk, fields=b"Content-Length: 5\r\nExpect: 100-continue\r\n", body=b"hello"))
    g.add("cl", "zero", lambda mk: _req(mk, fields=b"Content-Length: 0\r\n"))
    g.add("cl", "no length, bytes after", lambda mk: _req(mk, body=b"hello\r\n\r\n"))
    g.add("cl", "name with space before colon", lambda mk: _req(
        mk, fields=b"Content-Length : 5\r\n", body=b"hello"))
    g.add("cl", "obs-fold value", lambda mk: _req(
        mk, fields=b"Content-Length:\r\n 5\r\n", body=b"hello"))

    # -- RFC 9112 §6.1 Transfer-Encoding obfuscations, each with no CL, CL.TE and TE.CL --
    te_values = [
        ("chunked", b"chunked"), ("Chunked", b"Chunked"), ("CHUNKED", b"CHUNKED"),
        ("cHuNkEd", b"cHuNkEd"), ("OWS before", b" chunked"), ("OWS after", b"chunked "),
        ("tab before", b"\tchunked"), ("tab after", b"chunked\t"), ("trailing comma", b"chunked,"),
        ("leading comma", b",chunked"), ("identity, chunked", b"identity, chunked"),
        ("chunked, identity", b"chunked, identity"), ("gzip, chunked", b"gzip, chunked"),
        ("chunked, chunked", b"chunked, chunked"), ("chunked;param", b"chunked;foo=bar"),
        ("quoted", b"\"chunked\""), ("chunk", b"chunk"), ("chunkedx", b"chunkedx"),
        ("xchunked", b"xchunked"), ("x-chunked", b"x-chunked"), ("identity", b"identity"),
        ("gzip", b"gzip"), ("empty", b""), ("NUL after", b"chunked\x00"),
        ("VT after", b"chunked\x0b"), ("FF before", b"\x0cchunked"), ("bare CR after", b"chunked\r"),
        ("chunked then junk", b"chunked junk"), ("non-ASCII", b"chunked\xff"),
        ("utf-8 lookalike", b"chunke\xc4\x8f"),
    ]
    te_names = [
        ("lower", b"transfer-encoding", "strict"), ("upper", b"TRANSFER-ENCODING", "strict"),
        ("space before colon", b"Transfer-Encoding ", "strict"),
        ("tab before colon", b"Transfer-Encoding\t", "strict"),
        ("underscore", b"Transfer_Encoding", "strict"), ("plural", b"Transfer-Encodings", "strict"),
        ("prefixed", b"X-Transfer-Encoding", "strict"),
    ]
    placements = [
        ("alone", lambda te: te, CHUNKED_BODY),
        ("CL.TE", lambda te: b"Content-Length: %d\r\n" % len(CHUNKED_BODY) + te, CHUNKED_BODY),
        ("TE.CL", lambda te: te + b"Content-Length: 3\r\n", CHUNKED_BODY),
    ]
    # RFC 9110 §5.6.1: a recipient accepts empty list elements; §11 rejects them
    lenient = ("trailing comma", "leading comma")
    for vname, v in te_values:
        for pname, place, body in placements:
            g.add("te", "%s %s" % (vname, pname),
                  lambda mk, v=v, place=place, body=body: _req(
                      mk, fields=place(b"Transfer-Encoding: %s\r\n" % v), body=body),
                  "either" if vname in lenient and pname == "alone" else "strict")
    for nname, n, policy in te_names:
        for pname, place, body in placements:
            g.add("te-name", "%s %s" % (nname, pname),
                  lambda mk, n=n, place=place, body=body: _req(
                      mk, fields=place(b"%s: chunked\r\n" % n), body=body), policy)
    for name, fields in [
            ("two fields chunked+chunked", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
            ("two fields chunked+identity", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"),
            ("two fields identity+chunked", b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"),
            ("two fields gzip+chunked", b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
            ("empty then chunked", b"Transfer-Encoding:\r\nTransfer-Encoding: chunked\r\n"),
            ("obs-fold", b"Transfer-Encoding:\r\n chunked\r\n"),
            ("obs-fold tab", b"Transfer-Encoding:\r\n\tchunked\r\n"),
            ("folded onto previous", b"X-A: 1\r\n Transfer-Encoding: chunked\r\n"),
            ("bare CR before", b"X-A: 1\rTransfer-Encoding: chunked\r\n"),
            ("NUL in name", b"Transfer-Encoding\x00: chunked\r\n"),
            ("CL zero and TE", b"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n"),
            ("TE and CL zero", b"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"),
            ("TE in HTTP/1.0", None)]:
        if fields is None:
            g.add("te", name, lambda mk: _req(mk, version=b"HTTP/1.0",
                                              fields=b"Transfer-Encoding: chunked\r\n",
                                              body=CHUNKED_BODY))
        else:
            g.add("te", name, lambda mk, f=fields: _req(mk, fields=f, body=CHUNKED_BODY))
    g.add("te", "body is a request", lambda mk: _req(
        mk, fields=b"Transfer-Encoding: chunked\r\n",
        body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(_smuggle(mk)), _smuggle(mk))))
    g.add("te", "CL.TE smuggle", lambda mk: _req(
        mk, fields=b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        body=b"0\r\n\r\n" + _smuggle(mk)))
    g.add("te", "TE.CL smuggle", lambda mk: _req(
        mk, fields=b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
        body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(_smuggle(mk)), _smuggle(mk))))
    g.add("te", "chunked then a real second request", lambda mk: _req(
        mk, fields=b"Transfer-Encoding: chunked\r\n", body=CHUNKED_BODY + _smuggle(mk)))

    # -- RFC 9112 §7.1 chunk lines --
    chunk_bodies = [
        ("plain", b"5\r\nhello\r\n0\r\n\r\n"), ("leading zeros", b"0005\r\nhello\r\n0\r\n\r\n"),
        ("upper hex", b"A\r\nhelloworld\r\n0\r\n\r\n"), ("lower hex", b"a\r\nhelloworld\r\n0\r\n\r\n"),
        ("two chunks", b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
        ("last chunk 000", b"5\r\nhello\r\n000\r\n\r\n"),
        ("ext name", b"5;a\r\nhello\r\n0\r\n\r\n"), ("ext name=value", b"5;a=b\r\nhello\r\n0\r\n\r\n"),
        ("ext quoted", b"5;a=\"b c\"\r\nhello\r\n0\r\n\r\n"),
        ("ext quoted escape", b"5;a=\"b\\\"c\"\r\nhello\r\n0\r\n\r\n"),
        ("ext two", b"5;a=b;c\r\nhello\r\n0\r\n\r\n"), ("ext BWS", b"5 ; a = b\r\nhello\r\n0\r\n\r\n"),
        ("ext on last chunk", b"5\r\nhello\r\n0;end=1\r\n\r\n"),
        ("trailer", b"5\r\nhello\r\n0\r\nX-Trailer: yes\r\n\r\n"),
        ("two trailers", b"5\r\nhello\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n"),
        ("0x prefix", b"0x5\r\nhello\r\n0\r\n\r\n"), ("minus", b"-5\r\nhello\r\n0\r\n\r\n"),
        ("plus", b"+5\r\nhello\r\n0\r\n\r\n"), ("space before size", b" 5\r\nhello\r\n0\r\n\r\n"),
        ("space after size", b"5 \r\nhello\r\n0\r\n\r\n"),
        ("tab after size", b"5\t\r\nhello\r\n0\r\n\r\n"),
        ("junk after size", b"5 junk\r\nhello\r\n0\r\n\r\n"),
        ("letters after size", b"5junk\r\nhello\r\n0\r\n\r\n"),
        ("no size", b"\r\nhello\r\n0\r\n\r\n"),
        ("NUL after size", b"5\x00\r\nhello\r\n0\r\n\r\n"),
        ("ext empty name", b"5;\r\nhello\r\n0\r\n\r\n"), ("ext =value", b"5;=b\r\nhello\r\n0\r\n\r\n"),
        ("ext value with space", b"5;a=b c\r\nhello\r\n0\r\n\r\n"),
        ("ext unterminated quote", b"5;a=\"b\r\nhello\r\n0\r\n\r\n"),
        ("ext NUL", b"5;a\x00b\r\nhello\r\n0\r\n\r\n"), ("ext CR", b"5;a\rb\r\nhello\r\n0\r\n\r\n"),
        ("ext DEL", b"5;a\x7f\r\nhello\r\n0\r\n\r\n"), ("ext bare LF", b"2;\nxx\r\n0\r\n\r\n"),
        ("ext non-ASCII", b"5;a=\xff\r\nhello\r\n0\r\n\r\n"),
        ("bare LF after size", b"5\nhello\r\n0\r\n\r\n"),
        ("bare LF after data", b"5\r\nhello\n0\r\n\r\n"),
        ("bare CR after data", b"5\r\nhello\r0\r\n\r\n"),
        ("no CRLF after data", b"5\r\nhello0\r\n\r\n"),
        ("data longer than size", b"3\r\nhello\r\n0\r\n\r\n"),
        ("data shorter than size", b"7\r\nhello\r\n\r\n0\r\n\r\n"),
        ("bare LF last chunk", b"5\r\nhello\r\n0\n\r\n"),
        ("bare LF final line", b"5\r\nhello\r\n0\r\n\n"),
        ("bare LF in trailer", b"5\r\nhello\r\n0\r\nX-T: 1\n\r\n"),
        ("trailer obs-fold", b"5\r\nhello\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"),
        ("trailer without colon", b"5\r\nhello\r\n0\r\nX-T\r\n\r\n"),
        ("trailer space before colon", b"5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n"),
        ("size overflow", b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
        ("size 2^64", b"10000000000000000\r\n\r\n0\r\n\r\n"),
        ("size long zeros", b"00000000000000000000005\r\nhello\r\n0\r\n\r\n"),
        ("chunk is a request", None),
    ]
    for name, body in chunk_bodies:
        if body is None:
            g.add("chunk", name, lambda mk: _req(
                mk, fields=b"Transfer-Encoding: chunked\r\n",
                body=b"5\r\nhello\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(_smuggle(mk)), _smuggle(mk))))
            continue
        policy = "either" if name == "size long zeros" else "strict"
        g.add("chunk", name, lambda mk, b=body: _req(
            mk, fields=b"Transfer-Encoding: chunked\r\n", body=b), policy)

    # -- RFC 9112 §3.2 request targets --
    h = b"Host: %s\r\n" % HOST.encode()
    targets = [
        ("origin-form", b"GET /%(mk)s/a?b=c HTTP/1.1", "strict"),
        ("origin-form double slash", b"GET //%(mk)s/a HTTP/1.1", "strict"),
        ("absolute http", b"GET http://demo.example.test/%(mk)s/a?b HTTP/1.1", "strict"),
        ("absolute https", b"GET https://demo.example.test/%(mk)s HTTP/1.1", "strict"),
        ("absolute upper scheme", b"GET HTTP://demo.example.test/%(mk)s HTTP/1.1", "strict"),
        ("absolute upper host", b"GET http://DEMO.example.test/%(mk)s HTTP/1.1", "strict"),
        ("absolute with port", b"GET http://demo.example.test:80/%(mk)s HTTP/1.1", "strict"),
        ("absolute query only", b"GET http://demo.example.test?%(mk)s HTTP/1.1", "strict"),
        ("absolute port query slash", b"GET http://demo.example.test:80?/%(mk)s/admin HTTP/1.1",
         "strict"),
        ("absolute no path", b"GET http://demo.example.test HTTP/1.1", "strict"),
        ("absolute fragment", b"GET http://demo.example.test#/%(mk)s HTTP/1.1", "either"),
        ("absolute userinfo", b"GET http://u@demo.example.test/%(mk)s HTTP/1.1", "either"),
        ("absolute other host in userinfo", b"GET http://demo.example.test@x.test/%(mk)s HTTP/1.1",
         "either"),
        ("absolute ftp", b"GET ftp://demo.example.test/%(mk)s HTTP/1.1", "strict"),
        ("absolute ws", b"GET ws://demo.example.test/%(mk)s HTTP/1.1", "strict"),
        ("absolute no authority", b"GET http:///%(mk)s HTTP/1.1", "strict"),
        ("asterisk OPTIONS", b"OPTIONS * HTTP/1.1", "strict"),
        ("asterisk GET", b"GET * HTTP/1.1", "strict"),
        ("CONNECT authority", b"CONNECT demo.example.test:80 HTTP/1.1", "strict"),
        ("GET authority-form", b"GET demo.example.test:80 HTTP/1.1", "strict"),
        ("relative path", b"GET %(mk)s/a HTTP/1.1", "strict"),
        ("fragment", b"GET /%(mk)s#frag HTTP/1.1", "either"),
        ("space in target", b"GET /%(mk)s a HTTP/1.1", "strict"),
        ("tab in target", b"GET /%(mk)s\ta HTTP/1.1", "strict"),
        ("NUL in target", b"GET /%(mk)s\x00 HTTP/1.1", "strict"),
        ("DEL in target", b"GET /%(mk)s\x7f HTTP/1.1", "strict"),
        ("non-ASCII in target", b"GET /%(mk)s\xc3\xa9 HTTP/1.1", "strict"),
        ("percent-encoded", b"GET /%(mk)s/%%2e%%2e/a HTTP/1.1", "strict"),
        ("dot segments", b"GET /%(mk)s/../a HTTP/1.1", "either"),
    ]
    for name, line, policy in targets:
        g.add("target", name, lambda mk, line=line: (line % {b"mk": mk.encode()}) + b"\r\n" + h +
              b"X-Case: %s\r\n\r\n" % mk.encode(), policy)
    g.add("target", "absolute overrides Host", lambda mk: (
        b"GET http://demo.example.test/%s HTTP/1.1\r\nHost: other.example.test\r\nX-Case: %s\r\n\r\n"
        % (mk.encode(), mk.encode())))

    # -- RFC 9112 §3, §5 request line and field lines --
    for name, build_, policy in [
            ("double space", lambda mk: b"GET  /%s HTTP/1.1\r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("trailing space", lambda mk: b"GET /%s HTTP/1.1 \r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("lower-case version", lambda mk: b"GET /%s http/1.1\r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("HTTP/2.0", lambda mk: b"GET /%s HTTP/2.0\r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("HTTP/1.2", lambda mk: b"GET /%s HTTP/1.2\r\n%s\r\n" % (mk.encode(), h), "either"),
            ("HTTP/0.9 style", lambda mk: b"GET /%s\r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("method with slash", lambda mk: b"GE/T /%s HTTP/1.1\r\n%s\r\n" % (mk.encode(), h), "strict"),
            ("leading empty line", lambda mk: b"\r\nGET /%s HTTP/1.1\r\n%s\r\n" % (mk.encode(), h),
             "either"),
            ("bare LF head", lambda mk: b"GET /%s HTTP/1.1\n%s\n" % (
                mk.encode(), h.replace(b"\r\n", b"\n")), "either"),
            ("bare LF one field", lambda mk: b"GET /%s HTTP/1.1\r\n%sX-A: 1\n\r\n" % (mk.encode(), h),
             "either"),
            ("bare CR line end", lambda mk: b"GET /%s HTTP/1.1\r%s\r\n" % (mk.encode(), h), "strict"),
            ("no Host", lambda mk: _req(mk, method=b"GET", host=False), "strict"),
            ("two Host", lambda mk: _req(mk, method=b"GET", fields=h), "strict"),
            ("HTTP/1.0 no Host", lambda mk: _req(mk, method=b"GET", host=False,
                                                 version=b"HTTP/1.0"), "either"),
            ("space before colon", lambda mk: _req(mk, method=b"GET", fields=b"X-A : 1\r\n"), "strict"),
            ("obs-fold", lambda mk: _req(mk, method=b"GET", fields=b"X-A: 1\r\n 2\r\n"), "strict"),
            ("no colon", lambda mk: _req(mk, method=b"GET", fields=b"X-A 1\r\n"), "strict"),
            ("empty name", lambda mk: _req(mk, method=b"GET", fields=b": 1\r\n"), "strict"),
            ("name with @", lambda mk: _req(mk, method=b"GET", fields=b"X@A: 1\r\n"), "strict"),
            ("NUL in value", lambda mk: _req(mk, method=b"GET", fields=b"X-A: 1\x002\r\n"), "strict"),
            ("bare CR in value", lambda mk: _req(mk, method=b"GET", fields=b"X-A: 1\r2\r\n"), "strict"),
            ("obs-text in value", lambda mk: _req(mk, method=b"GET", fields=b"X-A: caf\xe9\r\n"),
             "strict"),
            ("Connection-listed field", lambda mk: _req(
                mk, method=b"GET", fields=b"Connection: X-Secret\r\nX-Secret: 1\r\nX-Keep: 2\r\n"),
             "strict"),
            ("hop-by-hop fields", lambda mk: _req(
                mk, method=b"GET", fields=b"Keep-Alive: 5\r\nTE: trailers\r\nProxy-Authorization: x\r\n"
                b"X-Keep: 1\r\n"), "strict"),
            ("two requests pipelined", lambda mk: _req(mk, method=b"GET") + _smuggle(mk), "strict"),
            ("Connection: close then more", lambda mk: _req(
                mk, method=b"GET", fields=b"Connection: close\r\n") + _smuggle(mk), "strict")]:
        g.add("head", name, build_, policy)
    # -- seeded single-byte mutations of valid messages: only the safety properties apply
    rng = random.Random(9112)
    bases = [
        lambda mk: _req(mk, fields=b"Content-Length: 5\r\n", body=b"hello"),
        lambda mk: _req(mk, fields=b"Transfer-Encoding: chunked\r\n",
                        body=b"5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"),
        lambda mk: _req(mk, fields=b"Transfer-Encoding: chunked\r\n",
                        body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(_smuggle(mk)), _smuggle(mk))),
        lambda mk: _req(mk, fields=b"Content-Length: %d\r\n" % len(_smuggle(mk)), body=_smuggle(mk)),
        lambda mk: b"GET http://demo.example.test/%s?q HTTP/1.1\r\nHost: %s\r\nX-Case: %s\r\n\r\n"
                   % (mk.encode(), HOST.encode(), mk.encode()),
    ]
    inserts = [b"\r", b"\n", b" ", b"\t", b"\x00", b";", b",", b"0", b"\r\n", b"\x0b", b"\xff"]
    made = 0
    while made < MUTATIONS:
        base = rng.randrange(len(bases))
        op = rng.randrange(3)
        seed = rng.getrandbits(32)

        def build_(mk, base=base, op=op, seed=seed):
            r = random.Random(seed)
            d = bases[base](mk)
            # never inside the markers, so every request stays attributable
            spans = [(m.start(), m.end()) for m in re.finditer(rb"zc\d{4}s?", d)]
            while True:
                at = r.randrange(1, len(d))
                if not any(a <= at <= b for a, b in spans):
                    break
            if op == 0:
                return d[:at] + r.choice(inserts) + d[at:]
            if op == 1:
                return d[:at] + d[at + 1:]
            return d[:at] + bytes([r.choice(b"\r\n \t;,:0aAzZ\x00\x7f")]) + d[at + 1:]
        # a message cut short waits for bytes that never come: not a useful case
        if interpret(build_("zc%04d" % (len(g.cases) + 1)))[1] == "incomplete":
            continue
        g.add("mutation", "base %d op %d seed %08x" % (base, op, seed), build_, "either")
        made += 1

    # -- responses (RFC 9112 §6, §7 from the origin's side): the origin answers case K with RESPONSES[K]
    for k, (name, _, policy) in enumerate(RESPONSES):
        g.add("response", name, lambda mk, k=k: _req(mk, method=b"GET", path=b"/zr%d" % k), policy)
        g.cases[-1].response = k
    return g.cases


# (name, bytes the origin sends before it closes, policy). "strict": a valid response reaches
# the visitor with the same status and body, framed by noded; an invalid one becomes a 502.
# "either": RFC 9112 allows a recipient to accept or reject; accepted, it must be framed right.
RESPONSES = [
    ("length", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "strict"),
    ("chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
     "strict"),
    ("chunked with extensions", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5;sig=abc\r\nhello\r\n0;end\r\n\r\n", "strict"),
    ("chunked with trailer", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n", "strict"),
    ("until close", b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", "strict"),
    ("interim 103", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
     b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "strict"),
    ("204 with stray body", b"HTTP/1.1 204 No Content\r\n\r\nhello", "strict"),
    ("304 with length", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "strict"),
    ("chunk bare LF after size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5\nhello\r\n0\r\n\r\n", "strict"),
    ("chunk bare LF after data", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5\r\nhello\n0\r\n\r\n", "strict"),
    ("chunk junk after size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"5 junk\r\nhello\r\n0\r\n\r\n", "strict"),
    ("chunk size overflow", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"10000000000000005\r\nhello\r\n0\r\n\r\n", "strict"),
    ("chunk data too long", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"3\r\nhello\r\n0\r\n\r\n", "strict"),
    ("two lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 3\r\n\r\nhello",
     "strict"),
    ("length list", b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", "either"),
    ("length and chunked", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
     b"\r\n5\r\nhello\r\n0\r\n\r\n", "either"),
    ("gzip coding", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nCODED", "either"),
    ("gzip, chunked coding", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
     b"5\r\nCODED\r\n0\r\n\r\n", "either"),
    ("obs-fold field", b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 5\r\n\r\nhello",
     "either"),
    ("bare LF head", b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", "either"),
    ("NUL in field", b"HTTP/1.1 200 OK\r\nX-A: 1\x002\r\nContent-Length: 5\r\n\r\nhello", "strict"),
    ("bad status line", b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello", "strict"),
    ("stray bytes after length", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK"
     b"\r\nContent-Length: 6\r\n\r\nPOISON", "strict"),
]


def reference_response(k, lenient=False):
    """The reference reading of RESPONSES[k] -> (interim statuses, final Message) or None when
    the response is invalid."""
    data = RESPONSES[k][1]
    interim = []
    pos = 0
    try:
        while True:
            m, used = L.parse_response(data[pos:], eof=True, strict=not lenient)
            pos += used
            if m.status >= 200:
                return interim, m
            interim.append(m.status)
    except (L.Bad, L.Incomplete):
        return None


CASES = build()


def main():
    for c in CASES:
        msgs, end = interpret(c.data)
        print("%-5s %-8s %-40s %-7s forwards %d, %s" % (c.id, c.group, c.name[:40], c.policy,
                                                      len(msgs), end))
    print("%d cases" % len(CASES))


if __name__ == "__main__":
    main()
