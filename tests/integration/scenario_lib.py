"""scenario_lib — helpers shared by the end-to-end scenario tests (Python 3 stdlib only).

Sites, status cards, events, verdicts and metrics of a Controld; enrolled Noded processes with
the shortest heartbeat settings; and LabOrigin, an in-process origin that can answer one
node differently from the others (it tells nodes apart by the process that owns the client
end of each loopback connection, found in /proc)."""

import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import threading
import time

from harness import Noded, Origin, wait_until

WAIT = 40.0  # generous bound for one state change (rounds are a few hundred ms apart)
HEARTBEAT_MS = 200  # noded heartbeats this often (the option allows 100)
ONLINE_MS = 1000  # controld's --node-online-ms (the smallest the option allows)
NODE_ARGS = ["--heartbeat-interval-ms", str(HEARTBEAT_MS), "--config-wait-ms", "2000"]


# ---- controld API ----

def start_origins(tmp, *names, tls=None):
    return [Origin(n, tmpdir=tmp, tls=tls).start() for n in names]


def origin_spec(o, level, **extra):
    """An origin entry for a site body from an Origin (or anything with address/port/scheme)."""
    d = {"level": level, "address": o.address, "port": o.port, "scheme": o.scheme}
    d.update(extra)
    return d


def make_site(c, origins, name="shop", failback="auto", hc=None, hosts=None, **extra):
    health = {"enabled": True, "path": "/hc", "timeout_ms": 1000}
    health.update(hc or {})
    body = {"name": name, "hostnames": hosts or [name + ".example.com"], "failback": failback,
            "health_check": health, "origins": origins}
    body.update(extra)
    status, j, _ = c.api("POST", "/v1/sites", body)
    assert status == 201, (status, j)
    return j


def plain_site(c, name, host, origin):
    """A site with one hostname and one level-1 http origin, every other field its default."""
    status, body, _ = c.api("POST", "/v1/sites", {
        "name": name, "hostnames": [host],
        "origins": [{"level": 1, "address": origin.address, "port": origin.port,
                     "scheme": "http"}]})
    assert status == 201, body
    return body


def card(c, sid):
    status, body, _ = c.api("GET", "/v1/sites/%d/status" % sid)
    assert status == 200, (status, body)
    return body


def card_origin(cd, oid):
    for lv in cd["levels"]:
        for o in lv["origins"]:
            if o["id"] == oid:
                return o
    raise AssertionError("origin %d not in the card %r" % (oid, cd))


def level_health(cd, level):
    for lv in cd["levels"]:
        if lv["level"] == level:
            return lv["health"]
    raise AssertionError("level %d not in the card %r" % (level, cd))


def events(c, sid, etype=None):
    status, body, _ = c.api("GET", "/v1/sites/%d/messages?limit=1000" % sid)
    assert status == 200, (status, body)
    return [e for e in body["events"] if etype is None or e["type"] == etype]


def verdicts(c, sid, oid, limit=100):
    """The origin's verdicts, newest first."""
    status, body, _ = c.api("GET", "/v1/sites/%d/origins/%d/verdicts?limit=%d" % (sid, oid, limit))
    assert status == 200, (status, body)
    return body["verdicts"]


def switch(c, sid, level):
    status, body, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": level})
    assert status == 200, (status, body)
    return body


def patch_origin(c, sid, oid, **fields):
    status, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oid), fields)
    assert status == 200, (status, body)
    return body


def metric(c, name):
    """Sum of every sample of a metric family (0 when absent)."""
    status, text, _ = c.api("GET", "/metrics", token=None)
    assert status == 200
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_health(c, sid, oid, health, timeout=WAIT):
    return wait_until(lambda: card_origin(card(c, sid), oid)["health"] == health, timeout=timeout,
                      what="origin %d %s" % (oid, health))


def wait_level(c, sid, level, timeout=WAIT):
    return wait_until(lambda: card(c, sid)["current_level"] == level, timeout=timeout,
                      what="site %d on level %d" % (sid, level))


def wait_rounds(c, n, timeout=WAIT):
    """Wait until n more probe rounds have run."""
    start = metric(c, "cdnca_probe_rounds_total")
    wait_until(lambda: metric(c, "cdnca_probe_rounds_total") >= start + n, timeout=timeout,
               what="%d more probe rounds" % n)


def hdr(headers, name):
    for k, v in (headers or {}).items():
        if k.lower() == name.lower():
            return v
    return None


# ---- nodes ----

def enrol(c, name):
    status, body, _ = c.api("POST", "/v1/nodes", {"name": name})
    assert status == 201, (status, body)
    return body["id"], body["token"]


def start_node(c, tmp, name, extra=None):
    """Enrol and start a noded with fast heartbeats; returns (node_id, Noded)."""
    nid, tok = enrol(c, name)
    n = Noded(c, tok, tmp, name=name, extra_args=NODE_ARGS + list(extra or [])).start()
    return nid, n


def node_status(n):
    st, body, _ = n.admin("GET", "/status", timeout=5)
    assert st == 200, body
    return body


def node_site(n, sid):
    for s in node_status(n).get("sites", []):
        if s.get("id") == sid:
            return s
    return None


def wait_node_level(n, sid, level, timeout=WAIT):
    return wait_until(lambda: (node_site(n, sid) or {}).get("current_level") == level,
                      timeout=timeout, what="%s has site %d on level %d" % (n.name, sid, level))


def online_nodes(c):
    st, body, _ = c.api("GET", "/v1/nodes")
    assert st == 200, body
    return sorted(x["id"] for x in body["nodes"] if x["online"])


def wait_online(c, ids, timeout=WAIT):
    want = sorted(ids)
    return wait_until(lambda: online_nodes(c) == want, timeout=timeout,
                      what="exactly nodes %s online" % want)


def visit_origin(n, host, path="/", timeout=10):
    """A GET through the node; returns (status, origin name or None)."""
    st, body, _ = n.visit("GET", path, host, timeout=timeout)
    return st, (body.get("origin") if isinstance(body, dict) else None)


# ---- an origin that tells nodes apart ----

def _proc_addr(addr):
    """("127.0.0.1", 80) as /proc/net/tcp writes it: b"0100007F:0050"."""
    ip = "".join("%02X" % b for b in reversed(socket.inet_aton(addr[0])))
    return ("%s:%04X" % (ip, addr[1])).encode()


def _client_inode(client, server):
    """The socket inode of the client end of the loopback TCP connection client -> server.

    Asks the kernel through sock_diag (`ss`, filtered in the kernel, a few ms however many
    sockets the machine holds); reads /proc/net/tcp when ss is missing."""
    if shutil.which("ss"):
        try:
            out = subprocess.run(
                ["ss", "-Htne", "state", "connected", "src", "%s:%d" % client,
                 "dst", "%s:%d" % server], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is not None:
            for word in out.split():
                if word.startswith("ino:") and word != "ino:0":
                    return word[4:]
            return None
    return _client_inode_proc(client, server)


def _client_inode_proc(client, server):
    """_client_inode from /proc/net/tcp (slow when the machine holds many sockets).

    Both ends must match: an old connection in TIME_WAIT (inode 0) may have used the same
    client port. The kernel lists /proc/net/tcp bucket by bucket without a snapshot, so an entry
    can be missed while other sockets come and go: read it whole, and again if missed."""
    local, remote = _proc_addr(client), _proc_addr(server)
    for _ in range(20):
        try:
            fd = os.open("/proc/net/tcp", os.O_RDONLY)
            try:
                chunks = []
                while True:
                    data = os.read(fd, 1 << 20)
                    if not data:
                        break
                    chunks.append(data)
            finally:
                os.close(fd)
        except OSError:
            return None
        for line in b"".join(chunks).splitlines()[1:]:
            parts = line.split()
            if len(parts) > 9 and parts[1] == local and parts[2] == remote and parts[9] != b"0":
                return parts[9].decode()
    return None


def _pid_owns(pid, inode):
    target = "socket:[%s]" % inode
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == target:
                return True
        except OSError:
            continue
    return False


class LabOrigin:
    """A plain HTTP origin in a background thread of the test process, for answers origin.py
    cannot give: a scripted status per request, or one answer for chosen node processes.

    Each request gets, in this order: bad_status [503] when its connection belongs to a process
    in bad_pids; else the next status of script (consumed one per request; with cycle=True
    the script repeats); else status [200]. .answers lists (pid or None, path, status) per
    request, the pid being one of watch_pids. .address/.port/.scheme fit origin_spec."""

    def __init__(self, name="lab"):
        self.name = name
        self.status = 200
        self.bad_status = 503
        self.bad_pids = set()
        self.watch_pids = set()
        self.script = []
        self.cycle = False
        self._pos = 0
        self.answers = []
        self.lock = threading.Lock()
        self.address = "127.0.0.1"
        self.scheme = "http"
        origin = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                pid = origin._owner(self.client_address)
                st = origin._next(pid, self.path)
                data = (json.dumps({"origin": origin.name, "path": self.path}) + "\n").encode()
                self.send_response(st)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def server_bind(self):
                socketserver.TCPServer.server_bind(self)
                self.server_name = "127.0.0.1"
                self.server_port = self.server_address[1]

        self.server = S(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def set_script(self, statuses, cycle=False):
        with self.lock:
            self.script = list(statuses)
            self.cycle = cycle
            self._pos = 0

    def _next(self, pid, path):
        with self.lock:
            if pid is not None and pid in self.bad_pids:
                st = self.bad_status
            elif self._pos < len(self.script):
                st = self.script[self._pos]
                self._pos += 1
                if self.cycle and self._pos == len(self.script):
                    self._pos = 0
            else:
                st = self.status
            self.answers.append((pid, path, st))
            return st

    def _owner(self, client_address):
        with self.lock:
            pids = set(self.watch_pids)
        if not pids:
            return None
        inode = _client_inode(client_address, ("127.0.0.1", self.port))
        if inode is None:
            return None
        for pid in pids:
            if _pid_owns(pid, inode):
                return pid
        return None

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Plugin:
    """A checkpoint plugin on 127.0.0.1 that records each request and votes (two checkpoints)
    per origin URL: vote(url) -> (ok, status, error); by default ok with status 200 for every
    origin. With garbage set (bytes) it answers those instead of votes; with delay (seconds) it
    waits that long before answering; with two_framings it sends its votes chunked with a
    Content-Length too; with endless_extension it answers a chunked 200 whose first chunk-size
    line has an extension that never ends (until controld goes or 10 s pass)."""

    def __init__(self):
        self.requests = []
        self.vote = lambda url: (True, 200, None)
        self.garbage = None
        self.delay = 0
        self.two_framings = False
        self.endless_extension = False
        plugin = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(n) or b"{}")
                plugin.requests.append(req)
                if plugin.delay:
                    time.sleep(plugin.delay)
                if plugin.endless_extension:
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    end = time.monotonic() + 10
                    try:
                        self.wfile.write(b"1;x=")
                        while time.monotonic() < end:
                            self.wfile.write(b"e" * 4096)
                    except OSError:
                        pass
                    return
                ok, status, error = plugin.vote(req.get("url", ""))
                data = plugin.garbage or json.dumps({"votes": [
                    {"checkpoint": "cp-%d" % i, "ok": ok, "status": status, "error": error}
                    for i in (1, 2)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if plugin.two_framings:
                    self.send_header("Transfer-Encoding", "chunked")
                    data = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            # a round asks up to 32 questions at once: socketserver's backlog of 5 dropped the
            # rest's SYNs, which the kernel sent again a second later
            request_queue_size = 1024

        self.server = S(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
