#!/usr/bin/env python3
"""test_webhooks — webhooks, their signed deliveries from the durable outbox, site messages and the
notification center (docs/design.md#rest-api).

A receiver on loopback (receiver.py) checks every header and signature and the per-site order;
retries, a receiver that is down and comes back, kill -9 with pending deliveries, give-up,
shutdown with an attempt in flight, validation, at most 100 test deliveries of one webhook
waiting at once, receivers whose answers are framed two ways or end in trailers that never end
(not delivered, retried, memory bounded), and events pagination. Events come from
POST /v1/webhooks/{id}/test (optionally naming a site), so no health engine is needed.
controld runs with a millisecond retry schedule so retries happen quickly.
"""

import os
import re
import socket
import threading
import time

import harness
from harness import Controld, wait_until
from receiver import Receiver, verify_signature

SECRET = "s3cret-for-tests-0123456789"
FAST = ["--webhook-retry-ms", "50", "--webhook-retry-max-ms", "300"]


def start(tmp, extra=None):
    return Controld(tmp, extra_args=FAST + list(extra or [])).start()


def mk_site(c, name):
    status, j, _ = c.api("POST", "/v1/sites", {"name": name, "hostnames": [name + ".example.com"]})
    assert status == 201, (status, j)
    return j["id"]


def mk_hook(c, url, secret=SECRET, events=None):
    body = {"url": url, "secret": secret}
    if events is not None:
        body["events"] = events
    status, j, _ = c.api("POST", "/v1/webhooks", body)
    assert status == 201, (status, j)
    assert "secret" not in j, j
    return j["id"]


def send_test(c, hook, site=None):
    """Queue a webhook.test event; returns the delivery (202 body)."""
    body = {"site_id": site} if site is not None else None
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % hook, body)
    assert status == 202, (status, j)
    assert j["state"] in ("pending", "delivered"), j
    assert re.fullmatch(r"[0-9a-f]{32}", j["uuid"]), j
    return j


def deliveries(c, hook):
    out, after = [], None
    for _ in range(100):
        path = "/v1/webhooks/%d/deliveries?limit=50" % hook
        if after is not None:
            path += "&after=%d" % after
        status, j, _ = c.api("GET", path)
        assert status == 200, (status, j)
        out += j["deliveries"]
        if j["next"] is None:
            return out
        after = j["next"]
    raise AssertionError("deliveries pagination did not end")


def by_uuid(c, hook):
    return {d["uuid"]: d for d in deliveries(c, hook)}


def metric(c, result):
    status, text, _ = c.api("GET", "/metrics", token=None)
    assert status == 200
    m = re.search(r'^cdnca_webhook_deliveries_total\{result="%s"\} (\S+)$' % result, text, re.M)
    return float(m.group(1)) if m else 0.0


def check_request(req, secret, hook):
    """Every header and the signature of one delivery; returns the parsed body."""
    assert req.method == "POST" and req.path == "/hook/%d" % hook, req
    assert req.header("content-type") == "application/json", req.headers
    assert verify_signature(secret, req), "bad signature: %s" % req.headers
    ts = int(req.header("x-cdnca-timestamp"))
    assert abs(ts - time.time()) < 600, ts
    assert re.fullmatch(r"[0-9a-f]{32}", req.header("x-cdnca-delivery") or ""), req.headers
    body = req.json()
    assert set(body) == {"id", "type", "title", "site", "created_at", "data"}, body
    assert req.header("x-cdnca-event") == body["type"], (req.headers, body)
    assert isinstance(body["id"], int) and isinstance(body["data"], dict), body
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["created_at"]), body
    return body


def check_site_order(reqs):
    """Per site, successful deliveries arrive in event order, each once."""
    last, seen = {}, set()
    for r in reqs:
        if r.status is None or not 200 <= r.status < 300:
            continue
        b = r.json()
        key = b["site"]["id"] if b["site"] else None
        assert r.header("x-cdnca-delivery") not in seen, "delivered twice: %s" % r
        seen.add(r.header("x-cdnca-delivery"))
        assert b["id"] > last.get(key, 0), "site %s: event %d after %d" % (key, b["id"], last[key])
        last[key] = b["id"]
    return seen


def delivered_all(c, hook, uuids):
    d = by_uuid(c, hook)
    return all(d[u]["state"] == "delivered" for u in uuids)


# ---- tests ----

def test_webhook_validation_and_crud(tmp):
    c = start(tmp)
    bad_urls = ["ftp://example.com/x", "http://", "not a url", "example.com/hook", "http:///path",
                "https://exa mple.com/", "", 42, None, "javascript:alert(1)",
                "http://127.0.0.1:0/", "https://example.com:00/h"]
    for u in bad_urls:
        status, j, _ = c.api("POST", "/v1/webhooks", {"url": u, "secret": SECRET})
        assert status == 422 and j["error"]["field"] == "url", (u, status, j)
    status, j, _ = c.api("POST", "/v1/webhooks", {"secret": SECRET})
    assert status == 422 and j["error"]["field"] == "url", j
    for s in ["short", "x" * 15, "x" * 257, 12345678901234567890, None]:
        status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "secret": s})
        assert status == 422 and j["error"]["field"] == "secret", (s, status, j)
    status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "secret": SECRET,
                                                  "events": ["level.switched", "nope"]})
    assert status == 422 and j["error"]["field"] == "events[1]", j
    # the message names every type a webhook may take, the newest included
    for t in ("incident.resolved", "failback.aborted", "drill.finished"):
        assert t in j["error"]["message"], j
    status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "secret": SECRET,
                                                  "events": [7]})
    assert status == 422 and j["error"]["field"] == "events[0]", j
    for ev in ([], "level.switched", {"a": 1}):
        status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/",
                                                      "secret": SECRET, "events": ev})
        assert status == 422 and j["error"]["field"] == "events", (ev, j)
    status, j, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "secret": SECRET,
                                                  "color": "red"})
    assert status == 400 and j["error"]["code"] == "unknown_field", j
    status, j, _ = c.api("POST", "/v1/webhooks", raw=b"{nope")
    assert status == 400, j
    status, j, _ = c.api("GET", "/v1/webhooks")
    assert status == 200 and j == {"webhooks": []}, j

    status, a, _ = c.api("POST", "/v1/webhooks", {"url": "https://hooks.example.com/cdnca?x=1",
                                                  "secret": SECRET,
                                                  "events": ["level.switched", "site.recovered",
                                                             "level.switched"]})
    assert status == 201, a
    assert a["url"] == "https://hooks.example.com/cdnca?x=1" and "secret" not in a, a
    assert a["events"] == ["level.switched", "site.recovered"], a
    b = mk_hook(c, "http://127.0.0.1:9/all")
    status, j, _ = c.api("GET", "/v1/webhooks")
    assert status == 200 and [w["id"] for w in j["webhooks"]] == [a["id"], b], j
    assert j["webhooks"][1]["events"] is None, j
    assert all("secret" not in w for w in j["webhooks"]), j
    assert SECRET not in str(j)
    status, j, _ = c.api("GET", "/v1/webhooks/%d" % a["id"])
    assert status == 200 and j == a, (j, a)
    status, j, _ = c.api("GET", "/v1/webhooks/%d/deliveries" % a["id"])
    assert status == 200 and j == {"deliveries": [], "next": None}, j

    status, _, _ = c.api("DELETE", "/v1/webhooks/%d" % a["id"])
    assert status == 204
    for method, path in [("DELETE", "/v1/webhooks/%d"), ("GET", "/v1/webhooks/%d"),
                         ("GET", "/v1/webhooks/%d/deliveries"), ("POST", "/v1/webhooks/%d/test")]:
        status, j, _ = c.api(method, path % a["id"])
        assert status == 404 and j["error"]["code"] == "not_found", (method, path, status, j)
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % b, {"site_id": 999})
    assert status == 422 and j["error"]["field"] == "site_id", j
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % b, {"site": 1})
    assert status == 400, j
    status, j, _ = c.api("GET", "/v1/webhooks", token=None)
    assert status == 401, j
    # the secret is not in the API, only in the database where it must be to sign
    status, j, _ = c.api("GET", "/v1/webhooks/%d" % b)
    assert status == 200 and SECRET not in str(j)


def test_signed_deliveries_in_order_per_site(tmp):
    rx = Receiver().start()
    rx.delay = 0.005
    try:
        c = start(tmp)
        sites = [mk_site(c, "alpha"), mk_site(c, "beta"), mk_site(c, "gamma")]
        hook = mk_hook(c, rx.url + "/hook/%d" % 1)
        assert hook == 1
        other_secret = "another-secret-abcdefgh"
        hook2 = mk_hook(c, rx.url + "/hook/%d" % 2, secret=other_secret)
        sent = []
        for i in range(30):
            site = sites[i % 3] if i % 5 else None
            sent.append(send_test(c, hook, site))
        sent2 = [send_test(c, hook2, sites[0]) for _ in range(5)]
        uuids = {d["uuid"] for d in sent}
        wait_until(lambda: delivered_all(c, hook, uuids) and
                   delivered_all(c, hook2, {d["uuid"] for d in sent2}),
                   timeout=60, what="every delivery delivered")

        reqs = rx.snapshot("/hook/1")
        bodies = [check_request(r, SECRET, hook) for r in reqs]
        got = check_site_order(reqs)
        assert got == uuids, (len(got), len(uuids))
        assert len(reqs) == 30, "each delivered once: %d requests" % len(reqs)
        for r, b in zip(reqs, bodies):
            assert b["type"] == "webhook.test" and b["title"] == "Webhook test", b
            assert b["data"]["webhook_id"] == hook, b
            d = next(x for x in sent if x["uuid"] == r.header("x-cdnca-delivery"))
            assert d["event_id"] == b["id"], (d, b)
            if d["site_id"] is None:
                assert b["site"] is None, b
            else:
                assert b["site"]["id"] == d["site_id"], b
                assert b["site"]["name"] in ("alpha", "beta", "gamma"), b
        reqs2 = rx.snapshot("/hook/2")
        assert len(reqs2) == 5
        for r in reqs2:
            check_request(r, other_secret, hook2)
            assert not verify_signature(SECRET, r), "signed with the other webhook's secret"
        check_site_order(reqs2)

        ds = by_uuid(c, hook)
        for d in ds.values():
            assert d["state"] == "delivered" and d["attempts"] == 1, d
            assert d["last_status"] == 200 and d["last_error"] is None, d
            assert d["delivered_at"] and d["next_attempt_at"] is None, d
            assert d["event_type"] == "webhook.test", d
        assert metric(c, "delivered") >= 35
        # a test event goes to its webhook only
        assert all(r.header("x-cdnca-delivery") not in uuids for r in reqs2)
    finally:
        rx.stop()


def test_retry_500_then_200_same_delivery_id(tmp):
    rx = Receiver().start()
    seen = {}

    def plan(req):
        u = req.header("x-cdnca-delivery")
        seen[u] = seen.get(u, 0) + 1
        return 500 if seen[u] <= 2 else 200
    rx.respond = plan
    try:
        c = start(tmp)
        site = mk_site(c, "shop")
        hook = mk_hook(c, rx.url + "/hook/1")
        d1 = send_test(c, hook, site)
        d2 = send_test(c, hook, site)
        wait_until(lambda: delivered_all(c, hook, {d1["uuid"], d2["uuid"]}), timeout=60,
                   what="both delivered after retries")
        reqs = rx.snapshot()
        for r in reqs:
            check_request(r, SECRET, hook)
        ids = [r.header("x-cdnca-delivery") for r in reqs]
        # three attempts each with a stable delivery id; the second waits for the first
        assert ids == [d1["uuid"]] * 3 + [d2["uuid"]] * 3, ids
        assert [r.status for r in reqs] == [500, 500, 200] * 2
        ds = by_uuid(c, hook)
        for u in (d1["uuid"], d2["uuid"]):
            assert ds[u]["attempts"] == 3 and ds[u]["last_status"] == 200, ds[u]
        assert metric(c, "retry") >= 4 and metric(c, "delivered") >= 2
    finally:
        rx.stop()


def test_pending_tests_are_bounded(tmp):
    """Test deliveries to a receiver that is down pile up to 100 per webhook, then 409
    tests_pending and nothing more is stored; another webhook is not held back."""
    c = start(tmp)
    down = mk_hook(c, "http://127.0.0.1:9/down")
    other = mk_hook(c, "http://127.0.0.1:9/other")
    for i in range(100):
        status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % down)
        assert status == 202, (i, status, j)
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % down)
    assert status == 409 and j["error"]["code"] == "tests_pending", (status, j)
    assert len(deliveries(c, down)) == 100
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % other)
    assert status == 202, (status, j)
    st, events, _ = c.api("GET", "/v1/notifications?limit=1000")
    assert st == 200 and len(events["events"]) == 101, len(events["events"])
    # and 120 tests a minute in all: each is an event, kept for a week
    for i in range(19):
        status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % other)
        assert status == 202, (i, status, j)
    status, j, _ = c.api("POST", "/v1/webhooks/%d/test" % other)
    assert status == 409 and j["error"]["code"] == "too_many_tests", (status, j)
    st, events, _ = c.api("GET", "/v1/notifications?limit=1000")
    assert st == 200 and len(events["events"]) == 120, len(events["events"])


def test_old_events_are_pruned(tmp):
    """Events older than --event-retention-days go (hourly, and when the engine starts), test
    events a week after their delivery, oldest first; the newest stays, so event ids keep
    growing (they are the last + 1), and one with a delivery still pending stays too."""
    c = start(tmp, ["--event-retention-days", "2"])
    status, s, _ = c.api("POST", "/v1/sites", {
        "name": "sw", "hostnames": ["sw.example.com"], "health_check": {"enabled": False},
        "origins": [{"level": 1, "address": "127.0.0.1", "port": 9, "scheme": "http"},
                    {"level": 2, "address": "127.0.0.1", "port": 10, "scheme": "http"}]})
    assert status == 201, s
    sid = s["id"]
    hook = mk_hook(c, "http://127.0.0.1:9/down", events=["site.recovered"])  # tests alone
    for _ in range(3):
        send_test(c, hook)

    def switch(level):
        status, j, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": level})
        assert status == 200, (status, j)
    for level in (2, 1, 2):
        switch(level)
    st, events, _ = c.api("GET", "/v1/notifications?limit=1000")
    ids = [e["id"] for e in events["events"]]
    assert len(ids) == 6, events
    day = 86400000
    # three days old: the tests (one still pending) and every other event but the newest
    harness.db_query(c, "UPDATE events SET created_at = created_at - %d" % (3 * day))
    harness.db_query(c, "UPDATE deliveries SET state = 'delivered' WHERE id <> (SELECT MIN(id) "
                        "FROM deliveries)")
    newest = max(ids)
    c.restart()

    def left():
        st, ev, _ = c.api("GET", "/v1/notifications?limit=1000")
        return sorted(e["id"] for e in ev["events"])
    pending = harness.db_query(c, "SELECT event_id FROM deliveries WHERE state = 'pending'")
    wait_until(lambda: left() == sorted({pending[0][0], newest}), 15, "the old events pruned")
    switch(1)
    st, ev, _ = c.api("GET", "/v1/notifications?limit=1000")
    assert max(e["id"] for e in ev["events"]) > newest, ev
    c.stop()


class RawReceiver:
    """A receiver on loopback that reads each request and answers with the given bytes, then
    `endless` (if any) again and again until the client goes or `seconds` pass."""

    def __init__(self, answer, endless=b"", seconds=20.0):
        """answer None: read the request and never answer (hold the connection)."""
        self.answer, self.endless, self.seconds = answer, endless, seconds
        self.requests = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.end = time.monotonic() + seconds
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while time.monotonic() < self.end:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()
        self.sock.close()

    def _serve(self, c):
        c.settimeout(2)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = c.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests += 1
            if self.answer is None:
                while time.monotonic() < self.end:
                    time.sleep(0.1)
                return
            c.sendall(self.answer)
            while self.endless and time.monotonic() < self.end:
                c.sendall(self.endless)
        except OSError:
            pass
        finally:
            c.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_answers_read_two_ways_or_endless_trailers_are_not_delivered(tmp):
    """A 200 with both Content-Length and chunked, or a chunked 200 whose trailer lines never end,
    is no delivery: the attempt ends (bad response framing / response head too large), the
    delivery stays pending to be retried, and controld's memory stays bounded."""
    c = start(tmp)
    both = RawReceiver(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n"
                       b"\r\n2\r\nok\r\n0\r\n\r\n")
    trailers = RawReceiver(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n",
                           endless=b"X-T: " + b"t" * 4000 + b"\r\n")
    rss0 = rss_kib(c.pid())
    for rx, why in [(both, "bad response framing"), (trailers, "response head too large")]:
        hook = mk_hook(c, rx.url + "/h")
        d = send_test(c, hook)

        def attempted(hook=hook):
            got = deliveries(c, hook)[0]
            return got if got["attempts"] >= 2 else None
        got = wait_until(attempted, 15, "two attempts at %s" % why)
        assert got["state"] == "pending" and got["last_error"] == why, got
        assert got["id"] == d["id"]
    rss1 = rss_kib(c.pid())
    print("controld RSS %d KiB before, %d KiB after %d answers with endless trailers"
          % (rss0, rss1, trailers.requests), flush=True)
    assert trailers.requests >= 2
    assert rss1 - rss0 < 64 * 1024, (rss0, rss1)


def test_a_head_cut_short_is_not_a_delivery(tmp):
    """A receiver that closes inside its head ("HTTP/1.1 200 OK" and part of a field) has not
    answered: the delivery stays pending with "response head cut short" and is retried, under
    the same delivery id, until a whole answer comes (libcurl alone took the status line's 200
    for a delivery)."""
    c = start(tmp)
    for answer in (b"HTTP/1.1 200 OK\r\nContent-Le", b"HTTP/1.1 200 OK\r\n"):
        rx = RawReceiver(answer)
        hook = mk_hook(c, rx.url + "/h")
        d = send_test(c, hook)

        def attempted(hook=hook):
            got = deliveries(c, hook)[0]
            return got if got["attempts"] >= 2 else None
        got = wait_until(attempted, 15, "two attempts at a head cut short")
        assert got["state"] == "pending" and got["last_error"] == "response head cut short", got
        assert got["id"] == d["id"] and rx.requests >= 2, (got, rx.requests)
    c.stop()


def cpu_s(pid):
    """The user and system CPU seconds a process has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_endless_answer_bodies_are_cut_and_judged_by_status(tmp):
    """An answer whose body never ends, in data or in a chunk extension libcurl reads and drops
    itself, is read only to the wire bound (256 KiB) and judged by its status at once: a 200 is
    delivered, a 500 retried. Without the bound each attempt read until the 10 s timeout."""
    c = start(tmp)
    ext = RawReceiver(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=",
                      endless=b"e" * 4096)
    data = RawReceiver(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                       endless=b"1000\r\n" + b"d" * 4096 + b"\r\n")
    fail = RawReceiver(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n1;x=",
                       endless=b"e" * 4096)
    cpu0 = cpu_s(c.pid())
    for rx in (ext, data):
        hook = mk_hook(c, rx.url + "/h")
        t0 = time.monotonic()
        d = send_test(c, hook)

        def delivered(hook=hook):
            got = deliveries(c, hook)[0]
            return got if got["state"] == "delivered" else None
        got = wait_until(delivered, 8, "the delivery to a receiver with an endless body")
        took = time.monotonic() - t0
        assert got["id"] == d["id"] and got["attempts"] == 1 and got["last_status"] == 200, got
        assert took < 5, took
    hook = mk_hook(c, fail.url + "/h")
    send_test(c, hook)

    def retried():
        got = deliveries(c, hook)[0]
        return got if got["attempts"] >= 2 else None
    got = wait_until(retried, 8, "two attempts at a 500 with an endless extension")
    assert got["state"] == "pending" and got["last_error"] == "HTTP 500", got
    cpu = cpu_s(c.pid()) - cpu0
    print("controld used %.2f s of CPU for 2 deliveries and %d attempts with endless bodies"
          % (cpu, fail.requests), flush=True)
    assert cpu < 5, cpu


def test_a_hanging_receiver_holds_only_its_own_share(tmp):
    """A receiver that takes every request and never answers, with 40 sites' queues waiting for
    it, holds at most 8 of the 32 attempts in flight: another webhook's delivery still goes out
    at once (it waited for the 10 s attempt timeout when the hanging one held every slot)."""
    c = start(tmp)
    hang = RawReceiver(None, seconds=30)
    stuck = mk_hook(c, hang.url + "/hang")
    sites = [mk_site(c, "s%02d" % i) for i in range(40)]
    for sid in sites:
        send_test(c, stuck, sid)
    wait_until(lambda: hang.requests >= 8, 10, "attempts at the hanging receiver")
    time.sleep(0.5)
    assert hang.requests == 8, hang.requests
    rx = Receiver().start()
    try:
        ok = mk_hook(c, rx.url + "/ok")
        t0 = time.monotonic()
        d = send_test(c, ok, sites[0])
        wait_until(lambda: rx.snapshot("/ok"), 5, "the other webhook's delivery")
        took = time.monotonic() - t0
    finally:
        rx.stop()
    print("another webhook's delivery went out %.2f s after it was queued, beside 8 hanging "
          "attempts" % took, flush=True)
    assert took < 3.0, took
    assert d["state"] in ("pending", "delivered")


def test_receiver_down_then_up(tmp):
    rx = Receiver().start()
    rx.stop()  # the port is closed now
    try:
        c = start(tmp)
        sa, sb = mk_site(c, "a"), mk_site(c, "b")
        hook = mk_hook(c, rx.url + "/hook/1")
        sent = [send_test(c, hook, sa if i % 2 else sb) for i in range(8)]

        def retried():
            ds = by_uuid(c, hook)
            heads = [ds[sent[0]["uuid"]], ds[sent[1]["uuid"]]]
            return all(h["attempts"] >= 2 and h["state"] == "pending" and h["last_error"]
                       and h["last_status"] is None for h in heads) and ds
        ds = wait_until(retried, timeout=60, what="the queue heads retried")
        # head of line: nothing behind the two heads was tried yet
        for d in sent[2:]:
            assert ds[d["uuid"]]["attempts"] == 0, ds[d["uuid"]]
        rx.start()
        wait_until(lambda: delivered_all(c, hook, {d["uuid"] for d in sent}), timeout=60,
                   what="every delivery once the receiver is back")
        reqs = rx.snapshot()
        for r in reqs:
            check_request(r, SECRET, hook)
        assert check_site_order(reqs) == {d["uuid"] for d in sent}
        assert len(reqs) == 8, reqs
    finally:
        rx.stop()


def test_kill9_with_pending_resumes_after_restart(tmp):
    rx = Receiver().start()
    rx.stop()
    try:
        c = start(tmp)
        site = mk_site(c, "durable")
        hook = mk_hook(c, rx.url + "/hook/1")
        sent = [send_test(c, hook, site) for _ in range(4)] + [send_test(c, hook)]
        wait_until(lambda: by_uuid(c, hook)[sent[0]["uuid"]]["attempts"] >= 1, timeout=60,
                   what="a first failed attempt")
        c.kill9()
        rx.start()
        c.start()
        uuids = {d["uuid"] for d in sent}
        wait_until(lambda: delivered_all(c, hook, uuids), timeout=60,
                   what="pending deliveries delivered after the restart")
        reqs = rx.snapshot()
        for r in reqs:
            check_request(r, SECRET, hook)
        # the same delivery ids as before the kill, each once, in order
        assert check_site_order(reqs) == uuids
        assert len(reqs) == 5, reqs
    finally:
        rx.stop()


def test_gives_up_after_the_deadline(tmp):
    rx = Receiver().start()
    rx.respond = lambda req: 503
    try:
        c = start(tmp, ["--webhook-give-up-ms", "1500"])
        hook = mk_hook(c, rx.url + "/hook/1")
        d1 = send_test(c, hook)
        wait_until(lambda: by_uuid(c, hook)[d1["uuid"]]["state"] == "failed", timeout=60,
                   what="the delivery to fail for good")
        d = by_uuid(c, hook)[d1["uuid"]]
        assert d["attempts"] >= 2 and d["last_status"] == 503 and d["last_error"] == "HTTP 503", d
        assert d["next_attempt_at"] is None and d["delivered_at"] is None, d
        assert metric(c, "failed") >= 1
        n = len(rx.snapshot())
        time.sleep(0.5)
        assert len(rx.snapshot()) == n, "a failed delivery is not retried"
        # the queue goes on: a later event is delivered
        rx.respond = lambda req: 200
        d2 = send_test(c, hook)
        wait_until(lambda: delivered_all(c, hook, {d2["uuid"]}), timeout=60,
                   what="the next delivery")
    finally:
        rx.stop()


def test_slow_receiver_and_shutdown_in_flight(tmp):
    slow, fast = Receiver().start(), Receiver().start()
    slow.hold.clear()  # answers wait
    try:
        c = start(tmp, ["--webhook-timeout-ms", "60000"])
        h_slow = mk_hook(c, slow.url + "/hook/1")
        h_fast = mk_hook(c, fast.url + "/hook/2")
        stuck = send_test(c, h_slow)
        wait_until(lambda: slow.snapshot(), timeout=30, what="the slow receiver to get a request")
        # a receiver that hangs does not hold up others, nor the API
        quick = [send_test(c, h_fast) for _ in range(3)]
        wait_until(lambda: delivered_all(c, h_fast, {d["uuid"] for d in quick}), timeout=30,
                   what="deliveries to the fast receiver")
        status, _, _ = c.api("GET", "/v1/webhooks", timeout=5)
        assert status == 200
        # SIGTERM with an attempt in flight: exits 0 (harness asserts it, bounded by its timeout)
        c.stop()
        slow.hold.set()
        c.start()
        wait_until(lambda: delivered_all(c, h_slow, {stuck["uuid"]}), timeout=30,
                   what="the interrupted delivery sent again after the restart")
        ids = [r.header("x-cdnca-delivery") for r in slow.snapshot()]
        assert ids and all(u == stuck["uuid"] for u in ids), ids
        assert len(ids) >= 2, "sent again after the restart: %s" % ids
    finally:
        slow.stop()
        fast.stop()


def test_switch_events_follow_the_filters(tmp):
    rx = Receiver().start()
    try:
        c = start(tmp)
        status, s, _ = c.api("POST", "/v1/sites", {
            "name": "sw", "hostnames": ["sw.example.com"], "health_check": {"enabled": False},
            "origins": [{"level": 1, "address": "127.0.0.1", "port": 9, "scheme": "http"},
                        {"level": 2, "address": "127.0.0.1", "port": 10, "scheme": "http"}]})
        assert status == 201, s
        h_sw = mk_hook(c, rx.url + "/hook/1", events=["level.switched"])
        h_rec = mk_hook(c, rx.url + "/hook/2", events=["site.recovered", "origin.health_changed"])
        h_all = mk_hook(c, rx.url + "/hook/3")
        for level in (2, 1):
            status, j, _ = c.api("POST", "/v1/sites/%d/switch" % s["id"], {"level": level})
            assert status == 200, (status, j)
        status, j, _ = c.api("GET", "/v1/sites/%d/messages" % s["id"])
        assert status == 200, j
        evs = [e for e in j["events"] if e["type"] == "level.switched"]
        assert [(e["data"]["from_level"], e["data"]["to_level"]) for e in evs] == [(1, 2), (2, 1)]
        assert all(e["data"]["reason"] == "manual" for e in evs), evs
        want = [e["id"] for e in evs]
        for hook in (h_sw, h_all):
            wait_until(lambda: len(rx.snapshot("/hook/%d" % hook)) >= 2, timeout=30,
                       what="both switches delivered to webhook %d" % hook)
            reqs = rx.snapshot("/hook/%d" % hook)
            bodies = [check_request(r, SECRET, hook) for r in reqs]
            check_site_order(reqs)
            got = [b for b in bodies if b["type"] == "level.switched"]
            assert [b["id"] for b in got] == want, (got, want)
            assert got[0] == evs[0] and got[1] == evs[1], (got, evs)  # same shape as messages
        # outbox rows are written with the event: none now means none ever
        assert deliveries(c, h_rec) == [] and rx.snapshot("/hook/2") == []
    finally:
        rx.stop()


def test_messages_and_notifications_pagination(tmp):
    c = start(tmp)
    sa, sb = mk_site(c, "pa"), mk_site(c, "pb")
    hook = mk_hook(c, "http://127.0.0.1:9/unused")
    sent = []
    for i in range(7):
        sent.append(send_test(c, hook, sa))
        if i % 2 == 0:
            sent.append(send_test(c, hook, sb))
    sent.append(send_test(c, hook))  # no site: notifications only
    ids_a = [d["event_id"] for d in sent if d["site_id"] == sa]
    ids_all = [d["event_id"] for d in sent]

    def pages(path, limit):
        got, after, n = [], None, 0
        while True:
            p = "%s?limit=%d" % (path, limit) + ("&after=%d" % after if after is not None else "")
            status, j, _ = c.api("GET", p)
            assert status == 200, (p, status, j)
            assert set(j) == {"events", "next"}, j
            assert len(j["events"]) <= limit, j
            got += j["events"]
            n += 1
            assert n < 50, "pagination did not end"
            if j["next"] is None:
                return got, n
            assert j["next"] == j["events"][-1]["id"], j
            after = j["next"]

    evs, npages = pages("/v1/sites/%d/messages" % sa, 3)
    assert [e["id"] for e in evs] == ids_a and npages == 3, ([e["id"] for e in evs], ids_a)
    for e in evs:
        assert set(e) == {"id", "type", "title", "site", "created_at", "data"}, e
        assert e["site"] == {"id": sa, "name": "pa"} and e["type"] == "webhook.test", e
        assert isinstance(e["data"], dict) and e["data"]["webhook_id"] == hook, e
    evs, _ = pages("/v1/sites/%d/messages" % sb, 100)
    assert [e["id"] for e in evs] == [d["event_id"] for d in sent if d["site_id"] == sb]
    evs, npages = pages("/v1/notifications", 4)
    assert [e["id"] for e in evs] == ids_all and npages == 3, [e["id"] for e in evs]
    assert evs[-1]["site"] is None, evs[-1]
    # after= starts past the given id; a full last page gives next null only when nothing is left
    status, j, _ = c.api("GET", "/v1/notifications?after=%d" % ids_all[-3])
    assert status == 200 and [e["id"] for e in j["events"]] == ids_all[-2:] and j["next"] is None
    status, j, _ = c.api("GET", "/v1/notifications?after=%d&limit=2" % ids_all[-3])
    assert status == 200 and len(j["events"]) == 2 and j["next"] is None, j
    status, j, _ = c.api("GET", "/v1/notifications?after=%d" % ids_all[-1])
    assert status == 200 and j == {"events": [], "next": None}, j
    status, j, _ = c.api("GET", "/v1/sites/%d/messages?limit=%d" % (sa, len(ids_a)))
    assert status == 200 and len(j["events"]) == len(ids_a) and j["next"] is None, j
    # errors
    status, j, _ = c.api("GET", "/v1/sites/9999/messages")
    assert status == 404 and j["error"]["code"] == "not_found", j
    for q in ("limit=0", "limit=1001", "limit=x", "after=-1"):
        status, j, _ = c.api("GET", "/v1/notifications?" + q)
        assert status == 400, (q, status, j)
    status, j, _ = c.api("GET", "/v1/notifications", token=None)
    assert status == 401, j
    # events outlive a restart
    c.restart()
    evs, _ = pages("/v1/notifications", 100)
    assert [e["id"] for e in evs] == ids_all


if __name__ == "__main__":
    harness.main()
