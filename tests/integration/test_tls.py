#!/usr/bin/env python3
"""test_tls — controld serving its API over TLS (--tls-cert/--tls-key) and noded syncing from
an https controld with --controld-ca-file (docs/design.md#command-lines, docs/design.md#node-protocol).

A throwaway PKI (certs.make_test_pki) is made per test for 127.0.0.1 and localhost; the client
side always verifies against its CA, never with verification turned off.
"""

import http.client
import json
import re
import socket
import ssl

import harness
from certs import make_test_pki
from harness import HOST, Controld, Noded, wait_until

TLS_ERROR = re.compile(r"(?i)ssl|tls|certificate|handshake")


class TlsControld(Controld):
    """controld with --tls-cert/--tls-key; api() speaks https verified against pki["ca"]."""

    def __init__(self, tmpdir, pki, **kw):
        super().__init__(tmpdir, extra_args=["--tls-cert", pki["cert"], "--tls-key", pki["key"]],
                         **kw)
        self.url = "https://%s:%d" % (HOST, self.port)
        self.ca = pki["ca"]

    def api(self, method, path, body=None, token=harness.DEFAULT, headers=None, raw=None,
            timeout=30.0):
        return https_call(self.port, self.ca, method, path, body=body,
                          token=self.admin_token if token is harness.DEFAULT else token,
                          headers=headers, timeout=timeout)


def https_call(port, cafile, method, path, body=None, token=None, headers=None, timeout=30.0):
    """One verified https request to 127.0.0.1:port -> (status, parsed JSON or text, headers)."""
    ctx = ssl.create_default_context(cafile=cafile)
    hdrs = dict(headers or {})
    data = None
    if token is not None:
        hdrs["Authorization"] = "Bearer " + token
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    conn = http.client.HTTPSConnection(HOST, port, timeout=timeout, context=ctx)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        text = payload.decode("utf-8", errors="replace")
        ctype = resp.getheader("Content-Type", "") or ""
        parsed = json.loads(text) if ctype.startswith("application/json") and payload else text
        return resp.status, parsed, resp.headers
    finally:
        conn.close()


def handshake(port, cafile, server_hostname):
    """A bare TLS handshake to 127.0.0.1:port checking the name; returns the peer certificate."""
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=server_hostname) as s:
            return s.getpeercert()


def pki_for(tmp, sub="pki"):
    return make_test_pki("%s/%s" % (tmp, sub), ["localhost"], ips=("127.0.0.1",))


def status_of(n):
    st, body, _ = n.admin("GET", "/status", timeout=5)
    assert st == 200, body
    return body


def test_https_healthz_verified_and_plain_http_refused(tmp):
    pki = pki_for(tmp)
    other = pki_for(tmp, "other")
    c = TlsControld(tmp, pki).start()
    status, body, _ = https_call(c.port, pki["ca"], "GET", "/healthz")
    assert status == 200 and body["status"] == "ok", (status, body)
    # the certificate is the one given, valid for both names
    assert handshake(c.port, pki["ca"], "localhost")
    assert handshake(c.port, pki["ca"], "127.0.0.1")
    # another CA does not verify it
    try:
        handshake(c.port, other["ca"], "localhost")
        raise AssertionError("the server certificate verified against an unrelated CA")
    except ssl.SSLCertVerificationError:
        pass
    # plain HTTP on the TLS port gets no HTTP answer
    try:
        st, b, _ = harness.http_call(HOST, c.port, "GET", "/healthz", timeout=10)
    except (OSError, http.client.HTTPException):
        pass
    else:
        raise AssertionError("plain http answered %s %r on the TLS port" % (st, b))
    # and the daemon is still fine after that
    assert https_call(c.port, pki["ca"], "GET", "/healthz")[0] == 200
    assert c.log_tail().find("(TLS)") >= 0, c.log_tail()


def test_api_over_tls(tmp):
    pki = pki_for(tmp)
    c = TlsControld(tmp, pki).start()
    status, site, _ = c.api("POST", "/v1/sites", {"name": "tls", "hostnames": ["tls.example.com"]})
    assert status == 201, (status, site)
    status, body, _ = c.api("GET", "/v1/sites")
    assert status == 200 and [s["id"] for s in body["sites"]] == [site["id"]], body
    status, body, _ = c.api("GET", "/v1/sites", token=None)
    assert status == 401 and body["error"]["code"] == "unauthorized", (status, body)
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-tls"})
    assert status == 201, node
    status, _, _ = c.api("POST", "/v1/node/heartbeat", {"version": "0.1.0", "config_version": 0},
                         token=node["token"])
    assert status == 204, status
    status, body, _ = c.api("GET", "/v1/node/config?since=0&wait_ms=0", token=node["token"])
    assert status == 200 and body["seq"] >= 1, (status, body)
    assert [s["id"] for s in body["sites"]] == [site["id"]], body
    status, text, _ = c.api("GET", "/metrics", token=None)
    assert status == 200 and "cdnca_" in text, (status, text[:200])


def test_noded_syncs_over_tls(tmp):
    pki = pki_for(tmp)
    c = TlsControld(tmp, pki).start()
    status, site, _ = c.api("POST", "/v1/sites", {"name": "shop", "hostnames": ["shop.test"],
                                                  "origins": [{"address": "127.0.0.1",
                                                               "port": 9, "scheme": "http"}]})
    assert status == 201, site
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-tls"})
    assert status == 201, node
    n = Noded(c, node["token"], tmp, extra_args=["--controld-ca-file", pki["ca"]]).start()

    def synced():
        s = status_of(n)
        ids = [x.get("id") for x in s.get("sites", [])]
        return s["seq"] > 0 and site["id"] in ids and s
    s = wait_until(synced, 30, "noded /status with seq > 0 and the site, over https")
    assert s["sync"]["last_error"] is None, s["sync"]
    # the heartbeat went over TLS too: controld sees the node on the applied seq
    def current():
        st, body, _ = c.api("GET", "/v1/nodes")
        return st == 200 and any(x["id"] == node["id"] and x["config_seq"] == s["seq"]
                                 for x in body["nodes"])
    wait_until(current, 30, "GET /v1/nodes showing the node on seq %d" % s["seq"])


def test_noded_refuses_controld_with_wrong_ca(tmp):
    pki = pki_for(tmp)
    other = pki_for(tmp, "other")
    c = TlsControld(tmp, pki).start()
    status, site, _ = c.api("POST", "/v1/sites", {"name": "shop", "hostnames": ["shop.test"]})
    assert status == 201, site
    status, node, _ = c.api("POST", "/v1/nodes", {"name": "edge-wrong-ca"})
    assert status == 201, node
    n = Noded(c, node["token"], tmp, extra_args=["--controld-ca-file", other["ca"]]).start()

    def tls_error_reported():
        err = status_of(n)["sync"]["last_error"] or ""
        if TLS_ERROR.search(err):
            return "status: " + err
        for line in n.log_tail(200).splitlines():
            if "controld" in line.lower() and TLS_ERROR.search(line):
                return "log: " + line
        return None
    where = wait_until(tls_error_reported, 30, "a TLS error in noded's /status or log")
    s = status_of(n)
    assert s["seq"] == 0 and not s.get("sites"), (where, s)
    assert s["sync"]["state"] != "live", s["sync"]
    # controld never saw an authenticated call from it
    st, body, _ = c.api("GET", "/v1/nodes")
    assert st == 200, body
    mine = [x for x in body["nodes"] if x["id"] == node["id"]]
    assert mine and not mine[0]["online"] and not mine[0]["config_seq"], mine


if __name__ == "__main__":
    harness.main()
