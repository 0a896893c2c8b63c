#!/usr/bin/env python3
"""test_edge_front — noded's listeners for a front proxy (docs/design.md#noded-behind-an-edge-cache):
repeated --listen with Unix sockets (mode, a stale socket file replaced, anything else refused),
proxy-protocol listeners (PROXY v1 and v2 required there and giving the visitor's address; a
missing, malformed or cut header closes the connection, is counted and logged at most once a
second; never read on the other listeners) and X-Forwarded-For extended from trusted peers and
replaced from anyone else, with the real visitor in the access log. Real processes; the visitor
is told apart from the proxies by its loopback source address."""

import os
import socket
import stat
import subprocess
import time

import harness
from harness import Controld, Noded, wait_until
import edge_lib as L
import front_lib as F
from front_lib import DEMO, FrontEnv


def origin_headers(o, path):
    """The headers of the last request for path the origin o saw."""
    for r in reversed(o.stats()["recent"]):
        if r["path"] == path:
            return {k.lower(): v for k, v in r["headers"].items()}
    raise AssertionError("%s saw no %s: %r" % (o.name, path, o.stats()["recent"]))


def test_listeners_and_forwarded_for(tmp):
    """The same site on a TCP, a Unix and a proxy-protocol Unix listener; the sockets get their
    mode. X-Forwarded-For: replaced on TCP (an untrusted peer), passed on from a trusted Unix
    peer, replaced by the PROXY source on the proxy-protocol listener; the access log's client
    is the visitor each time."""
    e = FrontEnv(tmp)
    for p in (e.sock, e.pp_sock):
        st = os.lstat(p)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    spoof = b"X-Forwarded-For: 6.6.6.6\r\n"
    resp, _, raw = F.tcp_exchange(e.port, F.get("/tcp", extra=spoof), source="127.0.0.2")
    assert L.statuses(resp) == [200], raw
    assert origin_headers(e.a, "/tcp")["x-forwarded-for"] == "127.0.0.2"
    resp, _, raw = F.unix_exchange(e.sock, F.get("/unix", extra=b"X-Forwarded-For: 192.0.2.9\r\n"))
    assert L.statuses(resp) == [200], raw
    assert origin_headers(e.a, "/unix")["x-forwarded-for"] == "192.0.2.9"
    for name, hdr in (("v1", F.pp_v1("198.51.100.7")), ("v2", F.pp_v2("198.51.100.8")),
                      ("v2tlv", F.pp_v2("198.51.100.9", tlvs=b"\x04\x00\x02ab"))):
        path = "/pp-" + name
        resp, _, raw = F.unix_exchange(e.pp_sock, hdr + F.get(path, extra=spoof))
        assert L.statuses(resp) == [200], (name, raw)
        want = {"v1": "198.51.100.7", "v2": "198.51.100.8", "v2tlv": "198.51.100.9"}[name]
        assert origin_headers(e.a, path)["x-forwarded-for"] == want, name
    # LOCAL (the proxy's own health check): the socket's own peer, a Unix one
    resp, _, raw = F.unix_exchange(e.pp_sock, F.pp_v2("0.0.0.0", command=0) + F.get("/local"))
    assert L.statuses(resp) == [200], raw
    # the header arrives in pieces, the request in the same segment as its end
    hdr = F.pp_v1("203.0.113.4")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.pp_sock)
    s.sendall(hdr[:10])
    time.sleep(0.05)
    resp, _, raw = F._exchange(s, hdr[10:] + F.get("/pieces"), 5.0, 0.3, 1)
    assert L.statuses(resp) == [200], raw
    assert origin_headers(e.a, "/pieces")["x-forwarded-for"] == "203.0.113.4"

    def logged():
        got = {a["path"]: a["client"] for a in F.access_lines(e.n)}
        return all(p in got for p in ("/tcp", "/unix", "/pp-v1", "/pp-v2", "/local", "/pieces")) \
            and got
    got = wait_until(logged, 5, "access lines")
    assert got["/tcp"] == "127.0.0.2", got
    assert got["/unix"] == "192.0.2.9", got
    assert got["/pp-v1"] == "198.51.100.7" and got["/pp-v2"] == "198.51.100.8", got
    assert got["/local"] == "unix:", got
    assert got["/pieces"] == "203.0.113.4", got


def test_proxy_header_required_and_bounded(tmp):
    """On the proxy-protocol listener a request without a header, a malformed header, one that
    never ends or a v2 length past the bound closes the connection unanswered; each is counted
    by reason, the origin sees nothing, and 60 of them log at most a few lines. A PROXY header
    on the other listeners is a malformed request (400)."""
    # no health checks: controld's probes would reach origin a too (its first round can come
    # after the reset below, as on PostgreSQL once the engine lease is taken)
    e = FrontEnv(tmp, extra_args=["--header-timeout-ms", "1000"], health_checks=False)
    e.a.set(reset_stats=True)
    cases = {
        "missing": [F.get("/no-header")],
        "malformed": [b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n" + F.get("/bad"),
                      b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n" + F.get("/bad"),
                      b"PROXY UNKNOWN " + b"x" * 200 + b"\r\n",
                      b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\xff" + b"\x00" * 64,
                      b"\r\n\r\n\x00\r\nQUIT\n\x22\x11\x00\x0c" + b"\x00" * 12],
    }
    before = {r: F.metric(e.n, 'cdnca_node_proxy_header_errors_total{reason="%s"}' % r)
              for r in ("missing", "malformed", "incomplete")}
    n = {"missing": 0, "malformed": 0}
    for rnd in range(6):
        for reason, datas in cases.items():
            for d in datas:
                resp, closed, raw = F.unix_exchange(e.pp_sock, d, timeout=3, quiet=0.2)
                assert raw == b"" and closed, (reason, raw[:200])
                n[reason] += 1
    # a header cut short: closed at the header timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.pp_sock)
    s.sendall(b"PROXY TCP4 1.2.3.4")
    t0 = time.monotonic()
    raw, closed = F._read_all(s, 5.0, 5.0, 1)
    s.close()
    assert closed and raw == b"" and time.monotonic() - t0 < 3.0, (closed, raw)
    for reason in ("missing", "malformed"):
        got = F.metric(e.n, 'cdnca_node_proxy_header_errors_total{reason="%s"}' % reason)
        assert got - before[reason] == n[reason], (reason, got, n)
    assert F.metric(e.n, 'cdnca_node_proxy_header_errors_total{reason="incomplete"}') >= \
        before["incomplete"] + 1
    assert e.a.stats()["total"] == 0, e.a.stats()
    with open(e.n.log_path, "rb") as f:
        lines = [l for l in f.read().decode("utf-8", "replace").splitlines() if "PROXY header" in l]
    assert 1 <= len(lines) <= 15, "%d PROXY lines:\n%s" % (len(lines), "\n".join(lines))
    # never read elsewhere: a PROXY line on TCP or the plain Unix listener is a bad request
    resp, closed, raw = F.tcp_exchange(e.port, F.pp_v1("9.9.9.9") + F.get("/x"))
    assert L.statuses(resp) == [400] and closed, raw
    resp, closed, raw = F.unix_exchange(e.sock, F.pp_v1("9.9.9.9") + F.get("/x"))
    assert L.statuses(resp) == [400] and closed, raw
    assert e.a.stats()["total"] == 0, e.a.stats()


def test_unix_socket_files(tmp):
    """A stale socket file (its process gone) is replaced; a regular file, or a socket another
    noded listens on, stops the start with the path named and is left as it was; the socket file
    is removed at a clean stop."""
    e = FrontEnv(tmp)
    e.n.stop()
    assert not os.path.exists(e.sock) and not os.path.exists(e.pp_sock)
    # stale: bound by a process that is gone (the file stays, nothing accepts)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(e.sock)
    s.close()
    assert stat.S_ISSOCK(os.lstat(e.sock).st_mode)
    e.n.start()
    resp, _, raw = F.unix_exchange(e.sock, F.get("/after-stale"))
    assert L.statuses(resp) == [200], raw
    # a second noded on the same socket: refused, the first one keeps serving
    st, body, _ = e.c.api("POST", "/v1/nodes", {"name": "second"})
    assert st == 201, body
    other = os.path.join(tmp, "other.sock")
    n2 = Noded(e.c, body["token"], tmp, name="noded2",
               extra_args=["--listen", "unix:%s" % e.sock, "--listen", "unix:%s" % other])
    n2._spawn([n2.binary, "--controld", e.c.url, "--listen", "127.0.0.1:%d" % n2.port,
               "--admin-listen", "127.0.0.1:%d" % n2.admin_port, "--state-dir", n2.state_dir,
               "--name", "noded2"] + n2.extra_args, {"CDNCA_NODE_TOKEN": body["token"]})
    rc = n2.proc.wait(timeout=20)
    assert rc != 0
    with open(n2.log_path) as f:
        log = f.read()
    assert "another process listens on it" in log and e.sock in log, log
    resp, _, raw = F.unix_exchange(e.sock, F.get("/still"))
    assert L.statuses(resp) == [200], raw
    e.n.stop()
    # a regular file at the path: refused, untouched
    with open(e.sock, "w") as f:
        f.write("precious")
    n3 = subprocess.run([e.n.binary, "--controld", e.c.url, "--listen", "unix:%s" % e.sock,
                         "--admin-listen", "127.0.0.1:%d" % harness.free_port(),
                         "--state-dir", os.path.join(tmp, "s3")],
                        env=dict(os.environ, CDNCA_NODE_TOKEN=body["token"]),
                        capture_output=True, text=True, timeout=20)
    assert n3.returncode != 0
    assert "exists and is not a socket; refusing to replace it" in n3.stderr, n3.stderr
    with open(e.sock) as f:
        assert f.read() == "precious"
    # --check-config names bad listen values and trusted proxies
    for argv, word in ((["--listen", "unix:/x,mode=999"], "mode"),
                       (["--listen", "127.0.0.1:1,group=www"], "unix:"),
                       (["--trusted-proxies", "10.0.0.1/8"], "trusted-proxies"),
                       (["--listen", "unix:/x,owner=no-such-user-here"], "no user")):
        r = subprocess.run([e.n.binary, "--check-config", "--controld", e.c.url,
                            "--state-dir", os.path.join(tmp, "s4")] + argv,
                           env=dict(os.environ, CDNCA_NODE_TOKEN=body["token"]),
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and word in r.stderr, (argv, r.returncode, r.stderr)


if __name__ == "__main__":
    harness.main()
