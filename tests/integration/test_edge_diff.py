#!/usr/bin/env python3
"""test_edge_diff — the edge_corpus messages against noded's visitor port and against Debian's
nginx (proxy_pass) in front of the same recording origin (docs/design.md#the-edge-http-path).

Fails on the safety properties, for noded:
  framing   every byte the origin receives parses strictly (RFC 9112), and each forwarded
            request equals the reference reading of what the visitor sent (method, target,
            Host, end-to-end fields in order, body bytes);
  one-to-one no visitor message reaches the origin twice, and no request hidden in a body or
            in bytes after a rejected message reaches it at all;
and on noded differing from the reference reading (accepting what the edge rules of docs/design.md#the-edge-http-path reject, or rejecting a
valid message) unless the case is in ALLOWED below with its reason.
nginx's accept/reject for every case is reported side by side (agreement with noded, with
the reference); a difference from nginx fails unless NGINX_DIFFERENCES documents it.
"""

import concurrent.futures
import os
import re
import time

import harness
import edge_corpus
import edge_lib as L
from edge_lib import EdgeEnv, Nginx

WORKERS = 8
MARK = re.compile(r"zc(\d{4})(s?)")
COMPARED = [0]  # forwarded requests compared field by field with the reference

# Documented differences between noded and the reference reading: (group, name) -> reason.
# Only accept/reject differences may be listed; the framing and one-to-one properties have
# no exceptions.
ALLOWED = {
    ("chunk", "space after size"):
        "BWS after a chunk size with no extension: RFC 9112 §7.1 allows BWS only before ';'; "
        "noded reads '5 ' as 5 (as nginx does) and re-frames the body, so no reader after it "
        "sees a different message",
    ("chunk", "tab after size"): "as 'space after size', with a tab",
}


# Documented differences from nginx 1.22 (Debian 12): reason -> (does noded accept, cases).
# A difference not listed here fails the test, so a change on either side is looked at.
_CHUNK_LINES = ["junk after size", "ext empty name", "ext =value", "ext value with space",
                "ext unterminated quote", "ext NUL", "ext DEL", "ext bare LF", "ext non-ASCII",
                "bare LF after size", "bare LF after data", "bare LF last chunk",
                "bare LF final line", "bare LF in trailer", "trailer obs-fold",
                "trailer without colon", "trailer space before colon", "size long zeros"]
NGINX_DIFFERENCES = {
    "nginx does not check chunk lines and trailers against the RFC 9112 §7.1 grammar (bare LF, "
    "junk and control bytes in extensions, malformed trailers, 16+ digit sizes); noded answers "
    "400": (False, [("chunk", n) for n in _CHUNK_LINES]),
    "nginx passes an origin's malformed chunk lines, repeated or listed Content-Length, "
    "Content-Length with chunked and non-chunked codings on (head first, then aborts or "
    "forwards); noded answers 502 before anything is sent":
        (False, [("response", n) for n in (
            "chunk bare LF after size", "chunk bare LF after data", "chunk junk after size",
            "two lengths", "length list", "length and chunked", "gzip coding",
            "gzip, chunked coding")]),
    "nginx rejects a tab as OWS around Content-Length and Transfer-Encoding values; RFC 9110 "
    "§5.5 allows it": (True, [("cl", "tab after"), ("te", "tab before alone"),
                              ("te", "tab after alone")]),
    "nginx ends a field line at a bare CR; noded answers 400": (False, [("te", "bare CR after alone")]),
    "nginx reads request lines loosely (extra spaces, HTTP/0.9 form) and drops field lines with "
    "invalid names; noded answers 400": (False, [("head", "double space"), ("head", "trailing space"),
                                               ("head", "HTTP/0.9 style"), ("head", "name with @")]),
    "nginx proxies any scheme in absolute-form; noded: http and https only":
        (False, [("target", "absolute ftp"), ("target", "absolute ws")]),
    "nginx answers OPTIONS * itself (400); noded forwards it": (True, [("target", "asterisk OPTIONS")]),
    "nginx takes a fragment in an origin-form target; a request-target has none (RFC 9112 "
    "§3.2) and noded answers 400": (False, [("target", "fragment")]),
    "nginx's only server takes a HTTP/1.0 request without Host; noded routes by Host and answers "
    "404": (False, [("head", "HTTP/1.0 no Host")]),
}


def nginx_documented(c, noded_accepts):
    for reason, (acc, cases) in NGINX_DIFFERENCES.items():
        if (c.group, c.name) in cases and acc == noded_accepts:
            return reason
    return None


def marker_of(req):
    m = MARK.search(req.target or "")
    if not m:
        m = MARK.search(req.get("x-case") or "")
    return (m.group(0)) if m else None


def run_pass(port, cases):
    """Send every case on its own connection (WORKERS at a time) -> {case id: (raw, closed)}."""
    def one(c):
        msgs, end = edge_corpus.interpret(c.data)
        want = max(1, len(msgs) + (1 if end else 0))
        try:
            # a mutated message may leave bytes a proxy waits on; its answer is not checked
            t = 1.0 if c.group == "mutation" else 5.0
            return c.id, L.exchange(port, c.data, timeout=t, quiet=0.15, want=want)
        except OSError as e:
            return c.id, (("error: %s" % e).encode(), True)
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as ex:
        return dict(ex.map(one, cases))


def collect(origin):
    """-> ({marker: [requests]}, unattributed requests, errors) of the pass just run."""
    time.sleep(0.3)
    by = {}
    stray = []
    with origin.lock:
        reqs = list(origin.requests)
        errors = list(origin.errors)
    for r in reqs:
        mk = marker_of(r)
        if mk is None:
            stray.append(r)
        else:
            by.setdefault(mk, []).append(r)
    return by, stray, errors


def same_message(got, want):
    """'' when the forwarded request got matches the reference message want, else why not."""
    why = []
    if got.method != want.method:
        why.append("method %r != %r" % (got.method, want.method))
    if got.target != want.want_target:
        why.append("target %r != %r" % (got.target, want.want_target))
    host = got.get("host") or ""
    if host.lower() != want.want_host.lower() and host.lower() != want.want_host.lower().split(":")[0]:
        why.append("Host %r != %r" % (host, want.want_host))
    if got.end_to_end() != want.end_to_end():
        why.append("fields %r != %r" % (got.end_to_end(), want.end_to_end()))
    if got.body != want.body:
        why.append("body %r != %r" % (got.body[:100], want.body[:100]))
    return "; ".join(why)


def check_noded(cases, by, stray, errors):
    """-> (list of property failures, list of accept/reject differences, accepted set)."""
    fails = []
    diffs = []
    accepted = set()
    compared = COMPARED
    for cid, reason, raw in errors:
        mm = MARK.search(raw.decode("latin-1"))
        fails.append("framing: the origin could not parse what it got (%s) near case %s: %r"
                     % (reason, mm.group(0) if mm else "?", raw[:300]))
    for r in stray:
        fails.append("framing: a request without a case marker reached the origin: %r" % r)
    for c in cases:
        strict, end = edge_corpus.interpret(c.data)
        lenient, _ = edge_corpus.interpret(c.data, lf_ok=True)
        ref = {}
        for m in strict:
            ref.setdefault(marker_of(m), []).append(m)
        alt = {}
        for m in lenient:
            alt.setdefault(marker_of(m), []).append(m)
        got_main = by.get(c.marker, [])
        if got_main:
            accepted.add(c.id)
        for mk in (c.marker, c.marker + "s"):
            if c.response is not None and mk == c.marker:
                continue  # a GET may be retried after an invalid response (docs/design.md#node-skip-and-retry)
            got = by.get(mk, [])
            # what noded forwarded is read against the strict reading, else the lenient one
            # (an accepted message the strict reading rejects is also reported below)
            want = ref.get(mk) or alt.get(mk) or []
            # the case's own message at most as often as the reference reads it (once when
            # the reference rejects it: that is an accept/reject difference, below); a hidden
            # request ("s") never unless the reference reads it as a real second request
            if len(got) > max(len(want), 0 if mk.endswith("s") else 1):
                fails.append("one-to-one: %r: %d origin requests for %s (reference: %d): %r"
                             % (c, len(got), mk, len(want), [g.target for g in got]))
                continue
            for g, w in zip(got, want):
                compared[0] += 1
                why = same_message(g, w)
                if why:
                    fails.append("framing: %r: forwarded request differs from what was sent: %s"
                                 % (c, why))
        if c.policy == "strict":
            ref_accepts = bool(ref.get(c.marker))
            if ref_accepts != bool(got_main) and (c.group, c.name) not in ALLOWED:
                diffs.append("%r: reference %s (%s), noded %s" % (
                    c, "accepts" if ref_accepts else "rejects", end or "valid",
                    "accepts" if got_main else "rejects"))
    return fails, diffs, accepted


def response_accepted(raw):
    """The final status a visitor read (lenient reading), or 0."""
    resp, _ = L.split_responses(raw)
    finals = [r.status for r in resp if r.status >= 200]
    return finals[0] if finals else 0


def check_response(c, raw, closed):
    """'' when the visitor got what docs/design.md#the-edge-http-path asks for the origin's response RESPONSES[c.response]:
    a valid one with its status, interim responses and body, framed by noded; an invalid one
    as a 5xx, or (when the error comes after the head went out) an incomplete response and a
    closed connection -- never as a complete response or bytes a strict reader misframes."""
    name, _, policy = edge_corpus.RESPONSES[c.response]
    ref = edge_corpus.reference_response(c.response)
    if "gzip" in name and policy == "either":
        final = response_accepted(raw)
        if final >= 500:
            return ""
        try:
            m, used = L.parse_response(raw, eof=closed, strict=False)
        except (L.Bad, L.Incomplete) as e:
            return "coded response passed on unreadable (%s): %r" % (e, raw[:300])
        te = [t.strip().lower() for v in L.header_values(m.headers, "transfer-encoding")
              for t in v.split(",")]
        ce = (m.get("content-encoding") or "").lower()
        if used != len(raw) or m.body != b"CODED" or (te and te[-1] != "chunked") or \
                not ("gzip" in te or "gzip" in ce):
            return "coded response framed wrong: %r" % raw[:300]
        return ""
    resps = []
    pos = 0
    problem = ""
    while pos < len(raw):
        try:
            m, used = L.parse_response(raw[pos:], eof=closed)
        except L.Incomplete:
            problem = "incomplete response"
            break
        except L.Bad as e:
            problem = "visitor got a response a strict reader cannot frame (%s)" % e.reason
            break
        resps.append(m)
        pos += used
        if m.status >= 200:
            break
    finals = [m for m in resps if m.status >= 200]
    if ref is None and policy == "strict" and closed and not finals and \
            problem in ("", "incomplete response"):
        return ""  # the head went out before the framing error: the visitor sees an abort
    if not problem and raw[pos:]:
        problem = "bytes after the response: %r" % raw[pos:pos + 80]
    if problem:
        return "%s: %r" % (problem, raw[:300])
    if not finals:
        return "no final response: %r" % raw[:300]
    final = finals[0]
    if ref is None:
        if final.status < 500 and policy == "strict":
            return "invalid origin response passed on as %d: %r" % (final.status, raw[:300])
        if final.status < 500:
            alt = edge_corpus.reference_response(c.response, lenient=True)
            if alt is None or alt[1].body != final.body:
                return "accepted response has the wrong body: %r" % raw[:300]
        return ""
    interim, want = ref
    if final.status >= 500:
        return "valid origin response answered %d" % final.status
    if [m.status for m in resps[:-1]] != interim:
        return "interim responses %r, origin sent %r" % ([m.status for m in resps[:-1]], interim)
    if final.status != want.status or final.body != want.body:
        return "got %d %r, origin sent %d %r" % (final.status, final.body, want.status, want.body)
    for frag in (b"sig=abc", b";end", b"POISON"):
        if frag in raw:
            return "origin framing bytes %r reached the visitor: %r" % (frag, raw[:300])
    return ""


def responder(req):
    m = re.search(r"/zr(\d+)", req.target)
    if m:
        return edge_corpus.RESPONSES[int(m.group(1))][1], "close"
    return L.default_response(req)


def test_corpus_noded_and_nginx(tmp):
    if not L.nginx_binary():
        raise AssertionError("nginx is not installed: apt-get install nginx (see .ci/run)")
    cases = edge_corpus.CASES
    e = EdgeEnv(tmp, responder=responder)
    ng = Nginx(tmp, e.origin.port).start()
    t0 = time.monotonic()

    e.origin.reset()
    noded_raw = run_pass(e.port, cases)
    by, stray, errors = collect(e.origin)
    fails, diffs, n_acc = check_noded(cases, by, stray, errors)

    for c in cases:
        if c.response is not None:
            raw, closed = noded_raw[c.id]
            why = check_response(c, raw, closed)
            if why:
                fails.append("response: %r: %s" % (c, why))

    e.origin.reset()
    nginx_raw = run_pass(ng.port, cases)
    nby, nstray, nerrors = collect(e.origin)
    x_acc = {c.id for c in cases if nby.get(c.marker)}
    # response cases: accepted = the visitor got the origin's answer, not a 5xx
    for c in cases:
        if c.response is not None:
            n_acc.discard(c.id)
            x_acc.discard(c.id)
            if 0 < response_accepted(noded_raw[c.id][0]) < 500:
                n_acc.add(c.id)
            if 0 < response_accepted(nginx_raw[c.id][0]) < 500:
                x_acc.add(c.id)
    took = time.monotonic() - t0

    ref_acc = {c.id for c in cases if any(marker_of(m) == c.marker
                                          for m in edge_corpus.interpret(c.data)[0])
               and (c.response is None or edge_corpus.reference_response(c.response))}
    agree = [c for c in cases if (c.id in n_acc) == (c.id in x_acc)]
    print("corpus: %d cases in %.1fs; noded accepts %d, nginx %d, reference %d; noded and nginx "
          "agree on %d/%d" % (len(cases), took, len(n_acc), len(x_acc), len(ref_acc),
                              len(agree), len(cases)))
    print("  %d forwarded requests compared with the reference reading, %d origin parse errors"
          % (COMPARED[0], len(errors)))
    groups = {}
    for c in cases:
        g = groups.setdefault(c.group, [0, 0])
        g[0] += 1
        g[1] += (c.id in n_acc) == (c.id in x_acc)
    print("  agreement by group: " + ", ".join("%s %d/%d" % (k, v[1], v[0])
                                              for k, v in groups.items()))
    undocumented = []
    for c in cases:
        if (c.id in n_acc) != (c.id in x_acc) and c.group != "mutation":
            line = "%-60r noded %s, nginx %s, reference %s" % (
                c, "accepts" if c.id in n_acc else "rejects",
                "accepts" if c.id in x_acc else "rejects",
                "accepts" if c.id in ref_acc else "rejects")
            print("  differs from nginx: " + line)
            if c.group != "mutation" and not nginx_documented(c, c.id in n_acc):
                undocumented.append("nginx: undocumented difference: " + line)
    listed = {k for _, (_, ks) in NGINX_DIFFERENCES.items() for k in ks}
    gone = [k for k in sorted(listed) if not any(
        (c.group, c.name) == k and (c.id in n_acc) != (c.id in x_acc) for c in cases)]
    if gone:
        print("  documented nginx differences that did not occur: %r" % gone)
    nsmuggled = [mk for mk in nby if mk.endswith("s")
                 and not any(marker_of(m) == mk for m in edge_corpus.interpret(
                     edge_corpus.CASES[int(mk[2:6]) - 1].data)[0])]
    if nsmuggled or nerrors:
        print("  note: nginx forwarded hidden requests %s, origin parse errors %d"
              % (nsmuggled, len(nerrors)))
    if os.environ.get("EDGE_DIFF_VERBOSE"):
        for c in cases:
            print("   %r -> %r" % (c, noded_raw[c.id][0][:120]))
    problems = fails + ["reference: " + d for d in diffs] + undocumented
    assert not problems, "%d problems:\n  %s" % (len(problems), "\n  ".join(problems[:60]))


if __name__ == "__main__":
    harness.main()
