#!/usr/bin/env python3
"""test_targets — refused targets at every connection (docs/design.md#errors-and-limits): a fake
"metadata" service on loopback, denied with --deny-targets, is never connected to by controld
or noded, whether the origin names it by a DNS name or by an IPv6 literal carrying its IPv4
address; visitors get 502 origin_refused_target and the attempt is counted.

169.254.169.254 cannot be bound without privileges, so 127.0.0.9 (and 127.0.0.1, which the name
"localhost" resolves to through /etc/hosts) stand in for it with --deny-targets."""

import json
import os
import socket
import threading
import time

import harness
from harness import Controld, Noded, wait_until
from scenario_lib import enrol, node_status

DENY = "127.0.0.9/32,127.0.0.1/32,::1/128"


class Metadata:
    """A TCP listener answering every connection with a secret; counts the connections."""

    def __init__(self, host, port):
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.accepted = 0
        self.stopped = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n"
                             b"\r\nsecret-creds!\n")
            except OSError:
                pass
            conn.close()

    def close(self):
        self.stopped = True
        self.sock.close()


def listeners(port):
    out = [Metadata("127.0.0.9", port), Metadata("127.0.0.1", port)]
    try:
        out.append(Metadata("::1", port))
    except OSError:
        pass  # no IPv6 loopback here
    return out


def metric(n, name, label):
    st, body, _ = n.admin("GET", "/metrics", timeout=5)
    assert st == 200, body
    text = body if isinstance(body, str) else json.dumps(body)
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def origin_status(n, sid):
    for s in node_status(n).get("sites", []):
        if s.get("id") == sid:
            return s.get("origins") or []
    return None


def test_api_refuses_every_spelling(tmp):
    c = Controld(tmp, extra_args=["--deny-targets", DENY]).start()
    port = harness.free_port()
    for addr in ["127.0.0.9", "::ffff:127.0.0.9", "::127.0.0.9", "::ffff:0:127.0.0.9",
                 "64:ff9b::127.0.0.9", "2002:7f00:9::1", "169.254.169.254", "169.254.169.254.",
                 "::a9fe:a9fe", "64:ff9b::169.254.169.254", "fd00:ec2::254", "100.100.100.200"]:
        st, body, _ = c.api("POST", "/v1/sites", {
            "name": "s", "hostnames": ["s.test"],
            "origins": [{"level": 1, "address": addr, "port": port, "scheme": "http"}]})
        # an origin address with a trailing dot is no valid address or hostname at all
        codes = ("target_refused", "invalid_value") if addr.endswith(".") else ("target_refused",)
        assert st == 422 and body["error"]["code"] in codes, (addr, st, body)
    for url in ["http://169.254.169.254./latest", "http://[::a9fe:a9fe]/x",
                "http://[64:ff9b::127.0.0.9]:8080/x", "http://127.0.0.9./x"]:
        st, body, _ = c.api("POST", "/v1/webhooks", {"url": url, "secret": "s" * 32})
        assert st == 422 and body["error"]["code"] == "target_refused", (url, st, body)
    # neighbours stay allowed
    st, body, _ = c.api("POST", "/v1/sites", {
        "name": "ok", "hostnames": ["ok.test"],
        "origins": [{"level": 1, "address": "64:ff9b::8.8.8.8", "port": port, "scheme": "http"}]})
    assert st == 201, body


def test_name_resolving_to_denied_address(tmp):
    """controld --deny-targets reaches the node in the config: an origin named "localhost"
    (accepted: a name) is never connected to by controld's probes nor by noded."""
    port = harness.free_port()
    meta = listeners(port)
    c = Controld(tmp, extra_args=["--deny-targets", DENY, "--probe-interval-ms", "300"]).start()
    st, site, _ = c.api("POST", "/v1/sites", {
        "name": "meta", "hostnames": ["meta.test"],
        "origins": [{"level": 1, "address": "localhost", "port": port, "scheme": "http"}]})
    assert st == 201, site
    _, tok = enrol(c, "edge")
    n = Noded(c, tok, tmp, extra_args=["--heartbeat-interval-ms", "500"]).start()
    wait_until(lambda: origin_status(n, site["id"]), 20, "the site on the node")
    with open(os.path.join(n.state_dir, "config.json")) as f:
        assert json.load(f)["deny_targets"] == DENY
    for _ in range(5):
        st, body, _ = n.visit("GET", "/latest/meta-data/", "meta.test", timeout=10)
        assert st == 502, (st, body)
        assert body["error"]["code"] == "origin_refused_target", body
    assert metric(n, "cdnca_node_origin_attempts_total", 'result="refused_target"') >= 5
    o = origin_status(n, site["id"])[0]
    assert "refused_target" in o and "denied by --deny-targets" in o["refused_target"], o
    time.sleep(2)  # probe rounds of controld and tasks of the node
    assert [m.accepted for m in meta] == [0] * len(meta), [m.accepted for m in meta]
    n.stop()
    log = n.log_tail(400)
    assert '"error":"origin_refused_target"' in log, log
    assert "a refused target: not connected" in log, log
    for m in meta:
        m.close()


def test_literal_refused_by_node_option(tmp):
    """noded's own --deny-targets: origins given as IPv4-mapped, IPv4-compatible, NAT64 and
    plain literals of the denied address, served from the node's config cache while controld
    is unreachable (so nothing but noded could connect)."""
    port = harness.free_port()
    meta = listeners(port)
    n = Noded("http://127.0.0.1:%d" % harness.free_port(), "node-token-unused", tmp,
              extra_args=["--deny-targets", "127.0.0.9/32"])
    os.makedirs(n.state_dir, exist_ok=True)
    addrs = ["127.0.0.9", "::ffff:127.0.0.9", "::127.0.0.9", "64:ff9b::127.0.0.9"]
    sites = []
    for i, a in enumerate(addrs, 1):
        sites.append({"id": i, "name": "m%d" % i, "hostnames": ["m%d.test" % i],
                      "config_version": 1, "current_level": 1,
                      "origins": [{"id": i, "level": 1, "address": a, "port": port,
                                   "scheme": "http", "weight": 1}]})
    with open(os.path.join(n.state_dir, "config.json"), "w") as f:
        json.dump({"seq": 1, "full": True, "deny_targets": "", "sites": sites, "deleted": []}, f)
    n.start()
    wait_until(lambda: all(origin_status(n, i) for i in range(1, len(addrs) + 1)), 20,
               "the cached sites on the node")
    for i, a in enumerate(addrs, 1):
        st, body, _ = n.visit("GET", "/", "m%d.test" % i, timeout=10)
        assert st == 502 and body["error"]["code"] == "origin_refused_target", (a, st, body)
        o = origin_status(n, i)[0]
        assert "refused_target" in o, (a, o)
    assert metric(n, "cdnca_node_origin_attempts_total", 'result="refused_target"') >= len(addrs)
    assert [m.accepted for m in meta] == [0] * len(meta), [m.accepted for m in meta]
    for m in meta:
        m.close()


if __name__ == "__main__":
    harness.main()
