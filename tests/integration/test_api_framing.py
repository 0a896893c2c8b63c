#!/usr/bin/env python3
"""test_api_framing — one message, one reading, at controld's API (docs/design.md, One message,
one reading).

A request head that could be framed or read two ways is answered at once (400, or 501 for a
transfer coding other than chunked), names the header, closes the connection and does nothing:
two Content-Length headers, Content-Length with Transfer-Encoding, a space before the colon, a
coding other than chunked, no Host or two on HTTP/1.1, two copies of Authorization, Content-Type
or If-Match. The bytes after such a head (a smuggled DELETE) are never run. A query parameter
given twice or without a value, or an integer with a sign or a space, is 400 naming it. An
encoded '/' in a path reaches no route. A number with a fraction that a double reads as a whole
number is refused, not stored as another number. A burst of malformed requests leaves at most a few log
lines. A node call refused for its input does not mark the node seen. noded's admin port keeps
the same head rules."""

import json
import socket
import time

import harness
import restart_lib as R
from harness import HOST, Controld, Noded


def raw(c, data, timeout=5.0):
    """Send data on one connection; -> (list of (status, body dict or None), closed by server)."""
    s = socket.create_connection((HOST, c.port), timeout=timeout)
    try:
        s.sendall(data)
        answers, closed = [], False
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            resp, _, closed = R.read_response(s, end)
            if resp is None:
                break
            try:
                body = json.loads(resp.body) if resp.body else None
            except ValueError:
                body = None
            answers.append((resp.status, body))
            if closed:
                break
        if not closed:
            s.settimeout(1.0)
            try:
                closed = s.recv(1) == b""
            except socket.timeout:
                closed = False
        return answers, closed
    finally:
        s.close()


def site_body(name):
    return {"name": name, "hostnames": [name + ".example.com"],
            "origins": [{"address": "10.0.0.1", "level": 1}, {"address": "10.0.0.2", "level": 2}]}


def test_heads_read_two_ways_are_refused_and_close(tmp):
    c = Controld(tmp).start()
    st, site, _ = c.api("POST", "/v1/sites", site_body("shop"))
    assert st == 201, site
    sid = site["id"]
    auth = b"Authorization: Bearer " + c.admin_token.encode() + b"\r\n"
    smuggled = (b"DELETE /v1/sites/%d HTTP/1.1\r\nHost: x\r\n" % sid) + auth + \
        b"Content-Length: 0\r\n\r\n"
    body = b'{"name":"edge-a"}'
    post = b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Type: application/json\r\n"
    cases = [
        # (what, request bytes, status, code, field)
        ("two Content-Length", post + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
         % (len(body), len(body) + len(smuggled)) + body + smuggled,
         400, "duplicate_header", "Content-Length"),
        ("Content-Length and chunked", post + b"Content-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n11\r\n" + body + b"\r\n0\r\n\r\n" + smuggled,
         400, "invalid_header", "Content-Length"),
        ("a space before the colon", post + b"Content-Length : %d\r\n\r\n" % len(body) + body
         + smuggled, 400, "invalid_header", "Content-Length "),
        ("Transfer-Encoding: identity", post + b"Transfer-Encoding: identity\r\n\r\n" + body
         + smuggled, 501, "unsupported_transfer_coding", "Transfer-Encoding"),
        ("Transfer-Encoding: gzip, chunked", post + b"Transfer-Encoding: gzip, chunked\r\n\r\n"
         + body + smuggled, 501, "unsupported_transfer_coding", "Transfer-Encoding"),
        ("no Host", b"GET /v1/sites HTTP/1.1\r\n" + auth + b"\r\n" + smuggled,
         400, "invalid_header", "Host"),
        ("two Host", b"GET /v1/sites HTTP/1.1\r\nHost: a\r\nHost: b\r\n" + auth + b"\r\n"
         + smuggled, 400, "duplicate_header", "Host"),
        ("two Authorization", b"GET /v1/sites HTTP/1.1\r\nHost: x\r\n" + auth
         + b"Authorization: Bearer nope\r\n\r\n" + smuggled,
         400, "duplicate_header", "Authorization"),
        ("two Content-Type", b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\n" + auth
         + b"Content-Type: text/plain\r\nContent-Type: application/json\r\n"
         b"Content-Length: %d\r\n\r\n" % len(body) + body, 400, "duplicate_header", "Content-Type"),
        ("two If-Match", (b"PATCH /v1/sites/%d HTTP/1.1\r\nHost: x\r\n" % sid) + auth
         + b'If-Match: "999"\r\nIf-Match: "1"\r\nContent-Type: application/json\r\n'
         b"Content-Length: 2\r\n\r\n{}", 400, "duplicate_header", "If-Match"),
    ]
    for what, data, status, code, field in cases:
        t0 = time.monotonic()
        answers, closed = raw(c, data)
        took = time.monotonic() - t0
        assert len(answers) == 1, (what, answers)
        got, err = answers[0]
        assert got == status and err and err["error"]["code"] == code \
            and err["error"]["field"] == field, (what, got, err)
        assert closed, (what, "the connection stayed open after a head read two ways")
        assert took < 3.0, (what, took)
    # nothing was done: the site is there and no node was made
    st, got, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert st == 200, (st, got)
    st, nodes, _ = c.api("GET", "/v1/nodes")
    assert st == 200 and nodes["nodes"] == [], nodes
    # clean requests still keep their connection open
    s = socket.create_connection((HOST, c.port), timeout=5)
    for _ in range(2):
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        resp, _, closed = R.read_response(s, time.monotonic() + 5)
        assert resp is not None and resp.status == 200 and not closed, resp
    s.close()
    # HTTP/1.0 needs no Host
    answers, _ = raw(c, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert [a[0] for a in answers] == [200], answers


def test_noded_admin_port_keeps_the_head_rules(tmp):
    c = Controld(tmp).start()
    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-a"})
    assert st == 201, node
    n = Noded(c, node["token"], tmp).start()
    port = n.admin_port
    for what, data, status, code, field in [
            ("two Host", b"GET /status HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
             400, "duplicate_header", "Host"),
            ("no Host", b"GET /status HTTP/1.1\r\n\r\n", 400, "invalid_header", "Host"),
            ("two lengths", b"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
             b"Content-Length: 40\r\n\r\nabGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
             400, "duplicate_header", "Content-Length"),
            ("identity", b"POST /status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n"
             b"\r\nab", 501, "unsupported_transfer_coding", "Transfer-Encoding")]:
        s = socket.create_connection((HOST, port), timeout=5)
        s.sendall(data)
        resp, _, closed = R.read_response(s, time.monotonic() + 5)
        assert resp is not None and resp.status == status, (what, resp)
        err = json.loads(resp.body)["error"]
        assert err["code"] == code and err["field"] == field, (what, err)
        s.settimeout(2)
        try:
            rest = s.recv(100)
        except socket.timeout:
            rest = None
        assert closed or rest == b"", (what, "the connection stayed open", rest)
        s.close()
    s = socket.create_connection((HOST, port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    resp, _, _ = R.read_response(s, time.monotonic() + 5)
    assert resp is not None and resp.status == 200, resp
    s.close()


def test_query_parameters_once_with_a_value(tmp):
    c = Controld(tmp).start()
    for i in range(3):
        st, site, _ = c.api("POST", "/v1/sites", site_body("s%d" % i))
        assert st == 201, site
    for query, field in [("limit=1&limit=abc", "limit"), ("limit=3&limit=1", "limit"),
                         ("limit&limit=2", "limit"), ("limit", "limit"), ("limit=+2", "limit"),
                         ("limit=%202", "limit"), ("after=0&after=1", "after")]:
        st, err, _ = c.api("GET", "/v1/sites?" + query)
        assert st == 400 and err["error"]["code"] == "invalid_query" \
            and err["error"]["field"] == field, (query, st, err)
    st, err, _ = c.api("GET", "/v1/audit?site_id=1&site_id=x")
    assert st == 400 and err["error"]["field"] == "site_id", (st, err)
    st, got, _ = c.api("GET", "/v1/sites?limit=2")
    assert st == 200 and len(got["sites"]) == 2, got
    st, got, _ = c.api("GET", "/v1/sites?limit=-1")
    assert st == 400, got
    st, got, _ = c.api("GET", "/v1/sites?q=")  # an empty value is a value
    assert st == 200 and len(got["sites"]) == 3, got


def test_encoded_slash_reaches_no_route(tmp):
    c = Controld(tmp).start()
    st, site, _ = c.api("POST", "/v1/sites", site_body("shop"))
    assert st == 201, site
    sid, oid = site["id"], site["origins"][0]["id"]
    for path in ["/v1/sites/%d%%2forigins%%2f%d" % (sid, oid),
                 "/v1/sites/%d%%2Forigins/%d" % (sid, oid)]:
        st, err, _ = c.api("DELETE", path)
        assert st == 404 and err["error"]["code"] == "not_found", (path, st, err)
    st, err, _ = c.api("POST", "/v1/sites/%d%%2Fswitch" % sid, {"level": 2})
    assert st == 404, (st, err)
    st, got, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert st == 200 and len(got["origins"]) == 2, got
    # an encoded '/' in a query value is a plain character there
    st, got, _ = c.api("GET", "/v1/sites?q=a%2Fb")
    assert st == 200 and got["sites"] == [], (st, got)


def test_a_fraction_is_not_stored_as_a_whole_number(tmp):
    c = Controld(tmp).start()
    body = json.dumps(site_body("shop"))[:-1] + ', "failback_hold_ms": 1000.00000000000001}'
    st, err, _ = c.api("POST", "/v1/sites", raw=body.encode(),
                       headers={"Content-Type": "application/json"})
    assert st == 422 and err["error"]["code"] == "out_of_range" \
        and err["error"]["field"] == "failback_hold_ms", (st, err)
    st, got, _ = c.api("GET", "/v1/sites")
    assert got["sites"] == [], got
    body = json.dumps(site_body("shop"))[:-1] + ', "failback_hold_ms": 1000.0}'
    st, site, _ = c.api("POST", "/v1/sites", raw=body.encode(),
                        headers={"Content-Type": "application/json"})
    assert st == 201 and site["failback_hold_ms"] == 1000, (st, site)


def test_malformed_burst_logs_a_few_lines(tmp):
    c = Controld(tmp).start()
    time.sleep(1.2)
    with open(c.log_path, "rb") as f:
        before = f.read().count(b"\n")
    t0 = time.monotonic()
    for i in range(2000):
        s = socket.create_connection((HOST, c.port), timeout=5)
        # a length libmicrohttpd itself refuses, and a chunk size that is no number
        s.sendall(b"POST /v1/sites HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n" if i % 2 else
                  b"POST /v1/sites HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    took = time.monotonic() - t0
    time.sleep(1.2)
    with open(c.log_path, "rb") as f:
        text = f.read()
    lines = text.count(b"\n") - before
    print("2,000 malformed requests in %.1f s: %d log lines" % (took, lines), flush=True)
    assert lines <= took + 4, (lines, took, text[-3000:])
    st, _, _ = c.api("GET", "/v1/sites")
    assert st == 200


def test_refused_node_call_does_not_mark_the_node_seen(tmp):
    c = Controld(tmp).start()
    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-a"})
    assert st == 201, node
    tok = node["token"]
    refused = [
        ("POST", "/v1/node/heartbeat", {"version": "1", "config_version": -1}, 422),
        ("POST", "/v1/node/heartbeat", {"version": "1\n2", "config_version": 0}, 422),
        ("GET", "/v1/node/config?since=-1", None, 400),
        ("GET", "/v1/node/tasks?wait_ms=x", None, 400),
        ("POST", "/v1/node/votes", {"round_id": 0, "results": []}, 422),
    ]
    for method, path, body, want in refused:
        st, err, _ = c.api(method, path, body, token=tok)
        assert st == want, (method, path, st, err)
    time.sleep(1.5)  # past the hub's batch of seen marks
    st, nodes, _ = c.api("GET", "/v1/nodes")
    n = nodes["nodes"][0]
    assert n["last_seen_at"] is None and not n["online"], n
    # an accepted heartbeat does
    st, _, _ = c.api("POST", "/v1/node/heartbeat", {"version": "0.1.0", "config_version": 0},
                     token=tok)
    assert st == 204
    assert harness.wait_until(lambda: c.api("GET", "/v1/nodes")[1]["nodes"][0]["online"],
                              timeout=10)


if __name__ == "__main__":
    harness.main()
