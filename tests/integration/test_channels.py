#!/usr/bin/env python3
"""test_channels — notification channels (docs/design.md#notification-channels) on real processes:
fake Slack and PagerDuty receivers on loopback (receiver.py, through each channel's url
override) and a local SMTP server (smtpserver.py, python3-aiosmtpd).

- validation and CRUD: unknown kind, a Slack URL that is not https, a routing key that is not 32
  characters, too many or unparsable addresses (with the index), a denied target; secrets never
  in answers, the audit log or controld's log, only in --export (0600); /v1/webhooks shows only
  webhooks; a read token may not read channels;
- an outage (origin 503, then back): PagerDuty gets trigger then resolve with one dedup_key
  cdnca-incident-<id>; Slack one message per event; an email with correct headers;
- a receiver down (and controld killed meanwhile), then up: nothing lost, order kept;
- an SMTP server without STARTTLS: the delivery fails with a clear error, nothing is sent;
- a host name that passes at create time but resolves to a denied address when sending: every
  kind's delivery fails with target_refused, nothing reaches the receivers.
"""

import json
import os
import stat
import subprocess
import time

import harness
from harness import Controld, wait_until
from receiver import Receiver
from scenario_lib import (ONLINE_MS, WAIT, make_site, origin_spec, start_node, start_origins,
                          node_site, wait_level)
from smtpserver import SmtpServer

KEY = "R0UT1NGKEY0123456789abcdefghijkl"  # 32 characters
SLACK_TOKEN = "T000/B000/XXXXsecretslacktoken"
FAST = ["--webhook-retry-ms", "50", "--webhook-retry-max-ms", "300"]
HOST = "shop.example.com"


def ok(res, want=200):
    st, j, _ = res
    assert st == want, (st, j)
    return j


def channel(c, body, want=201):
    st, j, _ = c.api("POST", "/v1/channels", body)
    assert st == want, (st, j)
    return j


def deliveries(c, cid):
    return ok(c.api("GET", "/v1/channels/%d/deliveries?limit=1000" % cid))["deliveries"]


def all_delivered(c, cid, n=None):
    ds = deliveries(c, cid)
    if n is not None and len(ds) < n:
        return None
    return ds if ds and all(d["state"] == "delivered" for d in ds) else None


def err(c, body, method="POST", path="/v1/channels"):
    st, j, _ = c.api(method, path, body)
    return st, j["error"]["code"], j["error"].get("field"), j["error"]["message"]


def test_validation_crud_and_secrets(tmp):
    rx = Receiver().start()
    c = Controld(tmp, extra_args=FAST + ["--deny-targets", "10.0.0.0/8"]).start()
    slack_url = rx.url + "/services/" + SLACK_TOKEN
    try:
        # bad input: a clear error naming the field, nothing stored
        assert err(c, {"kind": "sms"})[:3] == (422, "invalid_value", "kind")
        assert err(c, {"kind": "slack", "url": "http://hooks.slack.example/x"})[:3] == \
            (422, "invalid_value", "url")
        assert err(c, {"kind": "slack"})[:3] == (422, "required", "url")
        assert err(c, {"kind": "pagerduty", "routing_key": KEY[:31]})[:3] == \
            (422, "invalid_value", "routing_key")
        assert err(c, {"kind": "pagerduty", "routing_key": KEY + "x"})[:3] == \
            (422, "invalid_value", "routing_key")
        mail = {"kind": "email", "smtp_url": "smtp://127.0.0.1:25", "from": "cdnca@example.com"}
        assert err(c, dict(mail, to=["a%d@example.org" % i for i in range(21)]))[:3] == \
            (422, "invalid_value", "to")
        assert err(c, dict(mail, to=["a@example.org", "b@example.org", "not an address"]))[:3] \
            == (422, "invalid_value", "to[2]")
        assert err(c, dict(mail, to=["a@example.org"], smtp_url="smtp://u:p@127.0.0.1"))[:3] == \
            (422, "invalid_value", "smtp_url")
        assert err(c, dict(mail, to=["a@example.org"], smtp_url="imap://127.0.0.1"))[:3] == \
            (422, "invalid_value", "smtp_url")
        assert err(c, {"kind": "slack", "url": slack_url, "routing_key": KEY})[:3] == \
            (422, "invalid_value", "routing_key")
        assert err(c, {"kind": "slack", "url": slack_url, "bogus": 1})[:3] == \
            (400, "unknown_field", "bogus")
        assert err(c, {"kind": "slack", "url": slack_url, "site_ids": [999]})[:3] == \
            (422, "invalid_value", "site_ids[0]")
        assert err(c, {"kind": "pagerduty", "routing_key": KEY,
                       "events": ["level.switched"]})[:3] == (422, "invalid_value", "events[0]")
        # targets on the deny list
        st, code, field, msg = err(c, {"kind": "slack", "url": "https://10.1.2.3/services/" +
                                       SLACK_TOKEN})
        assert (st, code, field) == (422, "target_refused", "url"), msg
        assert SLACK_TOKEN not in msg, msg  # the URL's token is not echoed
        assert err(c, {"kind": "pagerduty", "routing_key": KEY,
                       "url": "https://169.254.169.254/x"})[:3] == (422, "target_refused", "url")
        assert err(c, dict(mail, to=["a@example.org"], smtp_url="smtps://10.9.9.9"))[:3] == \
            (422, "target_refused", "smtp_url")
        assert ok(c.api("GET", "/v1/channels"))["channels"] == []

        # create one of each kind; no answer carries a secret
        s = channel(c, {"kind": "slack", "name": "ops room", "url": slack_url})
        p = channel(c, {"kind": "pagerduty", "routing_key": KEY, "url": rx.url + "/pd"})
        e = channel(c, dict(mail, to=["oncall@example.org"], username="relay",
                            password="smtp-pass-123"))
        w = channel(c, {"kind": "webhook", "url": rx.url + "/hook", "secret": "s" * 20})
        assert s["url_set"] is True and "url" not in s, s
        assert p["routing_key_set"] is True and p["events"] == [
            "site.all_levels_unhealthy", "site.recovered", "incident.opened",
            "incident.resolved"], p
        assert e["password_set"] is True and e["to"] == ["oncall@example.org"], e
        assert e["username"] == "relay" and e["from"] == "cdnca@example.com", e
        assert w["secret_set"] is True and w["url"] == rx.url + "/hook", w
        # a change keeps what it leaves out, and the kind cannot change
        ch = ok(c.api("PATCH", "/v1/channels/%d" % s["id"], {"name": "ops", "site_ids": None}))
        assert ch["name"] == "ops" and ch["url_set"] is True, ch
        assert err(c, {"kind": "email"}, "PATCH", "/v1/channels/%d" % s["id"])[:3] == \
            (422, "invalid_value", "kind")
        assert err(c, {"routing_key": "short"}, "PATCH", "/v1/channels/%d" % p["id"])[:3] == \
            (422, "invalid_value", "routing_key")
        # /v1/webhooks shows the webhook kind only; a read token may not read channels
        hooks = ok(c.api("GET", "/v1/webhooks"))["webhooks"]
        assert [h["id"] for h in hooks] == [w["id"]], hooks
        assert c.api("GET", "/v1/webhooks/%d" % s["id"])[0] == 404
        tok = ok(c.api("POST", "/v1/tokens", {"name": "reader", "role": "read"}), 201)["token"]
        assert c.api("GET", "/v1/channels", token=tok)[0] == 403
        # no secret anywhere it could leak: answers, the audit log, the log file
        listing = json.dumps(ok(c.api("GET", "/v1/channels")))
        audit = json.dumps(ok(c.api("GET", "/v1/audit?limit=1000")))
        with open(c.log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        for secret in (SLACK_TOKEN, KEY, "smtp-pass-123", "s" * 20):
            for where, text in (("answers", listing), ("audit", audit), ("log", log)):
                assert secret not in text, (secret, where)
        assert "created channel %d" % s["id"] in audit, audit
        # the test message goes to the channel (a Slack message, not a signed webhook)
        d = ok(c.api("POST", "/v1/channels/%d/test" % s["id"]), 202)
        assert d["channel_id"] == s["id"] and d["event_type"] == "webhook.test", d
        wait_until(lambda: all_delivered(c, s["id"]), timeout=WAIT, what="the test delivered")
        got = [r for r in rx.snapshot() if r.path.startswith("/services/")]
        assert len(got) == 1 and "text" in got[0].json() and "blocks" in got[0].json(), got
        assert got[0].header("x-cdnca-signature") is None
        # the export holds the secrets, in a file only its owner reads
        c.stop()
        doc = os.path.join(tmp, "export.json")
        p_ = subprocess.run([c.binary, "--db", c.db, "--export", doc], capture_output=True,
                            text=True, timeout=60)
        assert p_.returncode == 0, p_.stderr
        assert stat.S_IMODE(os.stat(doc).st_mode) == 0o600
        with open(doc, encoding="utf-8") as f:
            exported = json.load(f)["webhooks"]
        kinds = {x["kind"]: x for x in exported}
        assert kinds["slack"]["url"] == slack_url and kinds["pagerduty"]["secret"] == KEY
        assert kinds["email"]["secret"] == "smtp-pass-123"
        assert kinds["email"]["config"]["to"] == ["oncall@example.org"]
        # and it imports again as the same channels
        c2 = Controld(tmp, name="controld2")
        p_ = subprocess.run([c2.binary, "--db", c2.db, "--import", doc], capture_output=True,
                            text=True, timeout=60)
        assert p_.returncode == 0, p_.stdout + p_.stderr
        c2.start()
        again = ok(c2.api("GET", "/v1/channels"))["channels"]
        assert [(x["id"], x["kind"]) for x in again] == [(x["id"], x["kind"]) for x in exported]
        c2.stop()
        c.start()
        assert c.api("DELETE", "/v1/channels/%d" % s["id"])[0] == 204
        assert c.api("GET", "/v1/channels/%d" % s["id"])[0] == 404
    finally:
        rx.stop()


def test_outage_reaches_slack_pagerduty_and_email(tmp):
    rx = Receiver().start()
    smtp = SmtpServer(tmp).start()
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST + [
        "--probe-interval-ms", "1000", "--node-online-ms", str(ONLINE_MS),
        "--incident-quiet-ms", "2000", "--public-url", "https://cdnca.example.org"]).start()
    try:
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST],
                         failback="auto", hc={"healthy_after": 1, "unhealthy_after": 2})
        sid = site["id"]
        s = channel(c, {"kind": "slack", "url": rx.url + "/slack", "site_ids": [sid]})
        p = channel(c, {"kind": "pagerduty", "routing_key": KEY, "url": rx.url + "/pd"})
        e = channel(c, {"kind": "email", "smtp_url": "smtp://127.0.0.1:%d" % smtp.port,
                        "from": "cdnca@example.com", "to": ["oncall@example.org",
                                                           "ops@example.net"],
                        "events": ["incident.opened"], "site_ids": [sid]})
        _, n = start_node(c, tmp, "edge-1")
        wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 2,
                   timeout=WAIT, what="the node has the site")
        wait_until(lambda: all(o["health"] == "healthy" for o in
                               ok(c.api("GET", "/v1/sites/%d" % sid))["origins"]),
                   timeout=WAIT, what="both origins healthy")
        a.set(status=503)
        wait_level(c, sid, 2)
        time.sleep(1.0)
        a.set(status=200)
        wait_level(c, sid, 1)
        inc = wait_until(lambda: next((i for i in ok(c.api("GET", "/v1/incidents?site_id=%d" %
                                                                  sid))["incidents"]
                                       if i["state"] == "resolved"), None),
                         timeout=WAIT, what="the incident resolved")
        key = "cdnca-incident-%d" % inc["id"]

        # PagerDuty: trigger, then resolve, one dedup_key
        pd = wait_until(lambda: (lambda r: r if any(x.json()["event_action"] == "resolve"
                                                    for x in r) else None)(
            [x for x in rx.snapshot() if x.path == "/pd"]), timeout=WAIT, what="the resolve")
        bodies = [x.json() for x in pd]
        assert [x["event_action"] for x in bodies][:1] == ["trigger"], bodies
        assert {x["dedup_key"] for x in bodies} == {key}, bodies
        first_resolve = [x["event_action"] for x in bodies].index("resolve")
        assert all(x["event_action"] == "trigger" for x in bodies[:first_resolve]), bodies
        trig = bodies[0]
        assert trig["routing_key"] == KEY and trig["payload"]["source"] == "shop", trig
        assert trig["payload"]["severity"] in ("error", "critical"), trig
        assert trig["payload"]["custom_details"]["incident_id"] == inc["id"], trig
        assert trig["links"][0]["href"] == \
            "https://cdnca.example.org/ui/#/incidents/%d" % inc["id"], trig
        assert len(trig["payload"]["summary"]) <= 1024

        # Slack: one message per event of the site
        ds = wait_until(lambda: all_delivered(c, s["id"]), timeout=WAIT,
                        what="the Slack deliveries")
        ev_ids = sorted(d["event_id"] for d in ds)
        assert len(set(ev_ids)) == len(ev_ids), ds
        slack = [x.json() for x in rx.snapshot() if x.path == "/slack"]
        assert len(slack) == len(ds), (len(slack), ds)
        seen = sorted(int(m["blocks"][-1]["elements"][0]["text"].split("event ")[1].split(" ")[0])
                      for m in slack)
        assert seen == ev_ids, (seen, ev_ids)
        assert any(m["text"].startswith("shop: Incident opened") for m in slack), slack

        # email: the incident.opened event, with correct headers
        wait_until(lambda: all_delivered(c, e["id"], 1), timeout=WAIT, what="the email sent")
        msgs = smtp.messages()
        assert len(msgs) == 1, msgs
        m = msgs[0]
        assert m["From"] == "cdnca@example.com", m["From"]
        assert m["To"].addresses[0].addr_spec == "oncall@example.org", m["To"]
        assert len(m["To"].addresses) == 2, m["To"]
        assert m["Subject"].startswith("[cdnca] shop: Incident opened"), m["Subject"]
        assert m["Message-ID"] == "<%s@example.com>" % deliveries(c, e["id"])[0]["uuid"], \
            m["Message-ID"]
        assert m["Date"].datetime is not None and m["Content-Type"].startswith("text/plain")
        body = m.get_content()
        assert "Incident opened" in body and "https://cdnca.example.org/ui/#/incidents/%d" % \
            inc["id"] in body, body
        assert p["id"] != s["id"]
    finally:
        smtp.stop()
        rx.stop()


def test_receiver_down_then_up_keeps_order(tmp):
    rx = Receiver().start()
    c = Controld(tmp, extra_args=FAST).start()
    try:
        site = ok(c.api("POST", "/v1/sites", {"name": "shop", "hostnames": [HOST]}), 201)
        p = channel(c, {"kind": "pagerduty", "routing_key": KEY, "url": rx.url + "/pd"})
        s = channel(c, {"kind": "slack", "url": rx.url + "/slack"})
        rx.stop()
        for _ in range(3):
            for ch in (p, s):
                ok(c.api("POST", "/v1/channels/%d/test" % ch["id"], {"site_id": site["id"]}), 202)
        wait_until(lambda: all(d["attempts"] >= 2 for d in deliveries(c, s["id"])[:1]),
                   timeout=WAIT, what="retries while the receiver is down")
        assert all(d["state"] == "pending" for d in deliveries(c, s["id"]))
        assert "connect" in (deliveries(c, s["id"])[0]["last_error"] or ""), \
            deliveries(c, s["id"])[0]
        # across a crash: the outbox is the database
        c.restart(kill=True)
        assert all(d["state"] == "pending" for ch in (p, s) for d in deliveries(c, ch["id"]))
        rx.start()
        for ch in (p, s):
            wait_until(lambda ch=ch: all_delivered(c, ch["id"], 3), timeout=WAIT,
                       what="every delivery after the receiver came back")
        pd = [x.json() for x in rx.snapshot() if x.path == "/pd"]
        keys = [x["dedup_key"] for x in pd]
        want = ["cdnca-test-%d" % d["event_id"] for d in deliveries(c, p["id"])]
        # nothing lost, order kept (a repeat of an attempt cut short may come twice, in place)
        assert [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k] == want, (keys, want)
    finally:
        rx.stop()


def test_starttls_refused_sends_nothing(tmp):
    smtp = SmtpServer(tmp).start()  # offers no STARTTLS
    c = Controld(tmp, extra_args=FAST).start()
    try:
        # the IPv4-mapped form reaches the same loopback server but is not one of the loopback
        # forms exempt from STARTTLS (localhost, 127.0.0.0/8, ::1): TLS is required
        e = channel(c, {"kind": "email", "smtp_url": "smtp://[::ffff:127.0.0.1]:%d" % smtp.port,
                        "from": "cdnca@example.com", "to": ["oncall@example.org"]})
        ok(c.api("POST", "/v1/channels/%d/test" % e["id"]), 202)
        d = wait_until(lambda: (lambda ds: ds[0] if ds and ds[0]["attempts"] >= 1 else None)(
            deliveries(c, e["id"])), timeout=WAIT, what="an attempt")
        assert d["state"] != "delivered", d
        assert "SSL" in d["last_error"] or "STARTTLS" in d["last_error"], d
        time.sleep(0.5)
        assert smtp.messages() == []
        # the same server through a loopback form takes the mail (STARTTLS if offered)
        e2 = channel(c, {"kind": "email", "smtp_url": "smtp://127.0.0.1:%d" % smtp.port,
                         "from": "cdnca@example.com", "to": ["oncall@example.org"]})
        ok(c.api("POST", "/v1/channels/%d/test" % e2["id"]), 202)
        wait_until(lambda: all_delivered(c, e2["id"], 1), timeout=WAIT, what="the loopback mail")
        msgs = smtp.messages()
        assert len(msgs) == 1 and msgs[0]["Subject"].startswith("[cdnca]"), msgs
        assert deliveries(c, e["id"])[0]["state"] != "delivered"
    finally:
        smtp.stop()


def test_name_resolving_to_denied_address_when_sending(tmp):
    """A name is not refused when a channel is created (its addresses are not known yet), but
    every address it resolves to is checked before each connection: "localhost" resolves to
    127.0.0.1 (and ::1) through /etc/hosts, both denied here, where the receivers listen. Each
    kind's delivery fails at once with target_refused and nothing reaches a receiver."""
    rx = Receiver().start()
    smtp = SmtpServer(tmp).start()
    c = Controld(tmp, extra_args=FAST + ["--deny-targets", "127.0.0.1/32,::1/128"]).start()
    try:
        named = "http://localhost:%d" % rx.port
        # the address literal is refused at once; the name passes
        assert err(c, {"kind": "slack", "url": rx.url + "/services/" + SLACK_TOKEN})[:3] == \
            (422, "target_refused", "url")
        chans = [
            channel(c, {"kind": "slack", "url": named + "/services/" + SLACK_TOKEN}),
            channel(c, {"kind": "pagerduty", "routing_key": KEY, "url": named + "/pd"}),
            channel(c, {"kind": "email", "smtp_url": "smtp://localhost:%d" % smtp.port,
                        "from": "cdnca@example.com", "to": ["oncall@example.org"]}),
            channel(c, {"kind": "webhook", "url": named + "/hook", "secret": "s" * 20}),
        ]
        for ch in chans:
            ok(c.api("POST", "/v1/channels/%d/test" % ch["id"]), 202)
        for ch in chans:
            d = wait_until(lambda ch=ch: (lambda ds: ds[0] if ds and ds[0]["state"] != "pending"
                                          else None)(deliveries(c, ch["id"])),
                           timeout=WAIT, what="the %s delivery settled" % ch["kind"])
            assert d["state"] == "failed" and d["attempts"] == 1, (ch["kind"], d)
            assert d["last_error"].startswith("target_refused: ") and \
                "denied by --deny-targets" in d["last_error"], (ch["kind"], d)
        time.sleep(0.5)
        assert rx.snapshot() == [], rx.snapshot()
        assert smtp.messages() == []
        with open(c.log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        assert "target_refused: " in log and SLACK_TOKEN not in log
    finally:
        smtp.stop()
        rx.stop()


if __name__ == "__main__":
    harness.main()
