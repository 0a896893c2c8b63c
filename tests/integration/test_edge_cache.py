#!/usr/bin/env python3
"""test_edge_cache — the configurations of deploy/edge/ with Debian's nginx and HAProxy in front of
noded (docs/design.md#noded-behind-an-edge-cache): visitor → cache → noded (Unix socket) → origins
on two levels. With nginx as the cache: the primary level's origin down → cached objects keep
being served, misses go to the backup level, no visitor error; noded down too → the cache answers
from stale entries. With HAProxy: PROXY v2 over noded's proxy-protocol socket. The origin sees
the real visitor (a loopback source other than the proxies') in X-Forwarded-For, never the
address a visitor wrote there itself, and noded's access log names it.

The files are used as shipped except for paths and ports, and nginx's proxy_cache_valid, shortened
from 1m to 6s so that entries go stale within the test. Needs nginx and haproxy (tests/deps.sh
installs both); without them it exits 77 (skipped)."""

import json
import os
import re
import shutil
import sys
import time

import harness
from harness import HOST, free_port, wait_until
import edge_lib as L
import front_lib as F
from front_lib import FrontEnv

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EDGE = os.path.join(TOP, "deploy", "edge")
VALID_S = 6
SPOOF = b"X-Forwarded-For: 6.6.6.6\r\n"


def binary(name):
    for p in (shutil.which(name), "/usr/sbin/" + name):
        if p and os.access(p, os.X_OK):
            return p
    return None


def replace_once(text, old, new):
    assert text.count(old) == 1, "deploy/edge file lacks exactly one %r" % old
    return text.replace(old, new)


class Nginx(harness._Proc):
    """deploy/edge/nginx-cdnca.conf inside a minimal main configuration, in a temp prefix."""

    def __init__(self, tmp, sock):
        super().__init__("nginx", tmp)
        self.prefix = os.path.join(tmp, "nginx")
        os.makedirs(self.prefix, exist_ok=True)
        self.port = free_port()
        with open(os.path.join(EDGE, "nginx-cdnca.conf")) as f:
            site = f.read()
        site = replace_once(site, "/var/cache/nginx/cdnca", os.path.join(self.prefix, "cache"))
        site = replace_once(site, "server unix:/run/cdnca/noded.sock", "server unix:" + sock)
        site = replace_once(site, "listen 80;", "listen %s:%d;" % (HOST, self.port))
        site = replace_once(site, "proxy_cache_valid 200 301 302 1m;",
                            "proxy_cache_valid 200 301 302 %ds;" % VALID_S)
        p = self.prefix
        self.conf = os.path.join(p, "nginx.conf")
        with open(self.conf, "w") as f:
            # as root, the worker would be "nobody", which may not enter the test's directory
            # nor connect to noded's socket (mode 0660): it stays root here
            if os.geteuid() == 0:
                f.write("user root;\n")
            f.write("daemon off;\nworker_processes 1;\npid %s/nginx.pid;\n"
                    "error_log %s/error.log warn;\nevents { worker_connections 256; }\n"
                    "http {\n access_log off;\n client_body_temp_path %s/body;\n"
                    " proxy_temp_path %s/proxy;\n fastcgi_temp_path %s/fastcgi;\n"
                    " uwsgi_temp_path %s/uwsgi;\n scgi_temp_path %s/scgi;\n%s\n}\n"
                    % (p, p, p, p, p, p, p, site))

    def start(self):
        self._spawn([binary("nginx"), "-p", self.prefix, "-c", self.conf,
                     "-e", self.prefix + "/error.log"])
        self._wait_ready(lambda: F.tcp_exchange(self.port, b"", timeout=1, quiet=0.05) is not None,
                         10, "nginx on port %d" % self.port)
        return self


class Haproxy(harness._Proc):
    """deploy/edge/haproxy.cfg in the foreground."""

    def __init__(self, tmp, pp_sock):
        super().__init__("haproxy", tmp)
        self.port = free_port()
        with open(os.path.join(EDGE, "haproxy.cfg")) as f:
            cfg = f.read()
        cfg = replace_once(cfg, "unix@/run/cdnca/noded-pp.sock", "unix@" + pp_sock)
        cfg = replace_once(cfg, "bind :80", "bind %s:%d" % (HOST, self.port))
        self.conf = os.path.join(tmp, "haproxy.cfg")
        with open(self.conf, "w") as f:
            f.write(cfg)

    def start(self):
        self._spawn([binary("haproxy"), "-db", "-f", self.conf])
        self._wait_ready(lambda: F.tcp_exchange(self.port, b"", timeout=1, quiet=0.05) is not None,
                         10, "haproxy on port %d" % self.port)
        return self


def visit(port, path, source):
    """A GET through the front proxy from source -> (status, origin name or None, cache status)."""
    resp, _, raw = F.tcp_exchange(port, F.get(path, extra=SPOOF), source=source, timeout=10)
    assert resp, "no answer to %s: %r" % (path, raw[:300])
    r = resp[0]
    name = None
    if r.status == 200:
        name = json.loads(r.body)["origin"]
    return r.status, name, r.get("x-cache-status")


def origin_xff(o, path):
    for r in reversed(o.stats()["recent"]):
        if r["path"] == path:
            return {k.lower(): v for k, v in r["headers"].items()}.get("x-forwarded-for")
    raise AssertionError("%s saw no %s" % (o.name, path))


def client_of(e, path):
    def find():
        for a in F.access_lines(e.n):
            if a["path"] == path:
                return a["client"]
        return None
    return wait_until(find, 5, "access line of %s" % path)


def test_nginx_cache_in_front(tmp):
    e = FrontEnv(tmp)
    ng = Nginx(tmp, e.sock).start()
    visitor = "127.0.0.2"
    errors = []
    warmed = time.monotonic()
    for i in range(5):
        st, name, cache = visit(ng.port, "/obj/%d" % i, visitor)
        assert (st, name, cache) == (200, "a", "MISS"), (i, st, name, cache)
    assert origin_xff(e.a, "/obj/0") == visitor
    assert client_of(e, "/obj/0") == visitor
    # the primary level's only origin goes away
    e.a.stop()
    for i in range(5):
        st, name, cache = visit(ng.port, "/obj/%d" % i, visitor)
        if st != 200:
            errors.append(("/obj/%d" % i, st))
        assert cache == "HIT" and name == "a", (i, st, name, cache)
    for i in range(5):
        st, name, cache = visit(ng.port, "/new/%d" % i, visitor)
        if st != 200:
            errors.append(("/new/%d" % i, st))
        assert name == "b" and cache == "MISS", (i, st, name, cache)
    assert origin_xff(e.b, "/new/0") == visitor
    assert F.metric(e.n, "cdnca_node_backup_picks_total") >= 5
    # noded itself goes away: once the entries are stale, nginx serves them anyway
    e.n.stop()
    left = VALID_S + 1.5 - (time.monotonic() - warmed)  # nginx counts in whole seconds
    if left > 0:
        time.sleep(left)
    for path in ["/obj/%d" % i for i in range(5)] + ["/new/%d" % i for i in range(5)]:
        st, name, cache = visit(ng.port, path, visitor)
        if st != 200:
            errors.append((path, st))
        # /obj/* expired by now; /new/* were stored later and may still be fresh
        fresh_ok = ("HIT",) if path.startswith("/new/") else ()
        assert cache in ("STALE", "UPDATING") + fresh_ok, (path, st, cache)
    assert errors == [], errors
    ng.stop()


def test_haproxy_in_front(tmp):
    e = FrontEnv(tmp)
    hp = Haproxy(tmp, e.pp_sock).start()
    visitor = "127.0.0.3"
    wait_until(lambda: visit(hp.port, "/warm", visitor)[0] == 200, 10, "haproxy → noded")
    st, name, _ = visit(hp.port, "/h/first", visitor)
    assert (st, name) == (200, "a")
    assert origin_xff(e.a, "/h/first") == visitor
    assert client_of(e, "/h/first") == visitor
    e.a.stop()
    errors = []
    for i in range(10):
        st, name, _ = visit(hp.port, "/h/%d" % i, visitor)
        if st != 200 or name != "b":
            errors.append((i, st, name))
    assert errors == [], errors
    assert origin_xff(e.b, "/h/0") == visitor
    # HAProxy's health checks carry their PROXY header too: none is counted as bad
    time.sleep(2.5)
    assert F.metric(e.n, "cdnca_node_proxy_header_errors_total") == 0
    hp.stop(expect_rc=None)  # HAProxy ends on SIGTERM by the signal


if __name__ == "__main__":
    missing = [b for b in ("nginx", "haproxy") if not binary(b)]
    if missing:
        print("SKIP: %s not installed (tests/deps.sh installs them)" % ", ".join(missing))
        sys.exit(77)
    harness.main()
