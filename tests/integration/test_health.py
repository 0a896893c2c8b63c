#!/usr/bin/env python3
"""Health engine end to end: controld's probe rounds against test origins (no nodes, so the
verdicts come from controld's own probes or the checkpoint plugin), level failover and failback,
events, the status card, verdict evidence, the manual switch, TLS, restarts."""

import os
import resource
import socket
import time

import harness
from harness import Controld, Origin, wait_until
from certs import make_test_pki
import scenario_lib
from scenario_lib import (WAIT, card, card_origin, events, metric, origin_spec, start_origins,
                          verdicts, wait_health, wait_level, wait_rounds)

FAST = ["--probe-interval-ms", "300"]


# ---- helpers (the shared ones are scenario_lib's) ----

def make_site(c, origins, name="shop", failback="auto", hc=None):
    """scenario_lib's site with 2 s probe timeouts (these tests probe TLS origins too)."""
    health = {"timeout_ms": 2000}
    health.update(hc or {})
    return scenario_lib.make_site(c, origins, name=name, failback=failback, hc=health)


def host_only(h):
    """A Host header without its port."""
    return h.rsplit(":", 1)[0] if h and ":" in h else h


def hdr(headers, name):
    for k, v in (headers or {}).items():
        if k.lower() == name.lower():
            return v
    return None


# ---- tests ----

def test_failover_after_three_failures_then_auto_failback(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    cd = card(c, sid)
    assert cd["current_level"] == 1 and cd["decision"]["action"] == "stay", cd
    v0 = cd["config_version"]
    # the probe itself: GET /hc, Host = the site's first hostname, our User-Agent
    st = a.stats()
    assert st["paths"].get("/hc", 0) >= 2, st
    assert host_only(hdr(st["last_headers"], "Host")) == "shop.example.com", st["last_headers"]
    assert hdr(st["last_headers"], "User-Agent") == "cdnca-control-api/origin-probe"

    a.set(status=503)
    wait_level(c, sid, 2)
    cd = card(c, sid)
    assert cd["config_version"] > v0, cd  # a switch is a republication
    o = card_origin(cd, oa)
    assert o["health"] == "unhealthy" and o["last_verdict"] == "failure", o
    assert o["source"] == "control" and o["votes"] == {"success": 0, "failure": 1}, o
    assert o["last_error"] == "status 503", o
    # the evidence: exactly the third consecutive failure made it unhealthy
    vs = verdicts(c, sid, oa)
    run = []
    for v in vs:  # newest first
        if v["verdict"] != "failure":
            break
        run.append(v)
    run.reverse()
    assert len(run) >= 3, vs[:6]
    assert [v["state_after"] for v in run[:3]] == ["healthy", "healthy", "unhealthy"], run[:3]
    assert run[0]["source"] == "control"
    assert run[0]["votes"][0]["ok"] is False and run[0]["votes"][0]["status"] == 503, run[0]
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1, sw
    assert sw[0]["title"] == "Origin level switched automatically", sw[0]
    assert sw[0]["data"]["from_level"] == 1 and sw[0]["data"]["to_level"] == 2
    assert sw[0]["data"]["reason"] == "auto_failover", sw[0]
    hc = [e for e in events(c, sid, "origin.health_changed") if e["data"]["origin_id"] == oa]
    assert hc[-1]["data"]["from"] == "healthy" and hc[-1]["data"]["to"] == "unhealthy", hc
    assert hc[-1]["data"]["source"] == "control", hc[-1]

    a.set(status=200)
    wait_level(c, sid, 1)
    sw = events(c, sid, "level.switched")
    assert len(sw) == 2 and sw[1]["data"]["reason"] == "auto_failback", sw
    assert events(c, sid, "origin.failback_available") == []
    assert metric(c, "cdnca_level_switches_total") >= 2
    assert metric(c, "cdnca_probes_total") > 0
    c.stop()


def test_manual_failback_notice_then_operator_switch(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], failback="manual")
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    a.set(status=500)
    wait_level(c, sid, 2)
    a.set(status=200)
    wait_until(lambda: events(c, sid, "origin.failback_available"), timeout=WAIT,
               what="failback notice")
    wait_rounds(c, 5)
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd  # manual: never switched back by itself
    assert cd["failback_available"] is True, cd
    assert cd["decision"]["action"] == "stay", cd
    fb = events(c, sid, "origin.failback_available")
    assert len(fb) == 1, fb  # once per recovery
    assert fb[0]["title"] == "Origin recovered (manual failback available)", fb[0]
    # the notice belongs to the outage's incident (docs/design.md#incidents)
    assert isinstance(fb[0]["data"].pop("incident_id"), int), fb[0]
    assert fb[0]["data"] == {"level": 1, "current_level": 2}, fb[0]

    # validation of the switch
    for body, code, field in (({"level": 3}, 422, "level"), ({"level": 0}, 422, "level"),
                              ({"level": 17}, 422, "level"), ({"level": "1"}, 422, "level"),
                              ({}, 422, "level"), ({"level": 1, "x": 1}, 400, "x")):
        status, err, _ = c.api("POST", "/v1/sites/%d/switch" % sid, body)
        assert status == code, (body, status, err)
        assert err["error"]["field"] == field, (body, err)
    status, _, _ = c.api("POST", "/v1/sites/%d/switch" % (sid + 99), {"level": 1})
    assert status == 404
    assert card(c, sid)["current_level"] == 2  # bad input changed nothing

    status, cd, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1})
    assert status == 200, (status, cd)
    assert cd["current_level"] == 1 and cd["failback_available"] is False, cd
    assert cd["site_id"] == sid and "levels" in cd and "decision" in cd, cd
    sw = events(c, sid, "level.switched")
    assert sw[-1]["data"]["reason"] == "manual", sw
    assert sw[-1]["title"] == "Origin level switched manually", sw[-1]
    wait_rounds(c, 3)
    assert card(c, sid)["current_level"] == 1
    assert len(events(c, sid, "origin.failback_available")) == 1
    c.stop()


def test_all_levels_down_one_alert_then_recovered(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    a.set(status=503)
    b.set(drop=True)
    wait_until(lambda: events(c, sid, "site.all_levels_unhealthy"), timeout=WAIT,
               what="all levels unhealthy event")
    wait_rounds(c, 5)
    cd = card(c, sid)
    assert cd["all_levels_unhealthy"] is True, cd
    assert [lv["health"] for lv in cd["levels"]] == ["unhealthy", "unhealthy"], cd
    assert len(events(c, sid, "site.all_levels_unhealthy")) == 1
    # whichever level it was on when both went down, it stays there while all are down
    stuck = cd["current_level"]
    wait_rounds(c, 3)
    assert card(c, sid)["current_level"] == stuck
    assert events(c, sid, "site.recovered") == []

    b.set(drop=False)
    wait_until(lambda: events(c, sid, "site.recovered"), timeout=WAIT, what="recovered event")
    wait_level(c, sid, 2)
    wait_rounds(c, 3)
    assert len(events(c, sid, "site.recovered")) == 1
    assert len(events(c, sid, "site.all_levels_unhealthy")) == 1
    assert card(c, sid)["all_levels_unhealthy"] is False
    c.stop()


def test_tls_origin_with_ca_file_and_wrong_name(tmp):
    pki = make_test_pki(os.path.join(tmp, "pki"), ["origin.test"])
    t = Origin("tls", tmpdir=tmp, tls={"cert": pki["cert"], "key": pki["key"]}).start()
    p, = start_origins(tmp, "plain")
    c = Controld(tmp, extra_args=FAST + ["--probe-ca-file", pki["ca"]]).start()
    site = make_site(c, [origin_spec(t, 1, host_header="origin.test"), origin_spec(p, 2)])
    sid, ot = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, ot, "healthy")
    # verification passed against the CA for the name origin.test, which was also the Host
    st = t.stats()
    assert host_only(hdr(st["last_headers"], "Host")) == "origin.test", st["last_headers"]

    status, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, ot),
                            {"host_header": "wrong.test"})
    assert status == 200, (status, body)
    wait_health(c, sid, ot, "unhealthy")
    o = card_origin(card(c, sid), ot)
    assert o["last_verdict"] == "failure" and o["last_error"], o
    assert card(c, sid)["current_level"] == 2
    c.stop()


def test_redirect_is_success_and_not_followed_404_is_success(tmp):
    a, b, target = start_origins(tmp, "a", "b", "target")
    a.set(redirect="http://127.0.0.1:%d/redirected" % target.port, redirect_status=302)
    b.set(health_path_status={"/hc": 404})
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    vs = verdicts(c, sid, oa, limit=5)
    assert vs[0]["verdict"] == "success" and vs[0]["votes"][0]["status"] == 302, vs[0]
    vs = verdicts(c, sid, ob, limit=5)
    assert vs[0]["verdict"] == "success" and vs[0]["votes"][0]["status"] == 404, vs[0]
    assert target.stats()["total"] == 0, target.stats()  # the redirect was never followed
    assert len(verdicts(c, sid, oa, limit=2)) == 2  # limit is honoured
    status, _, _ = c.api("GET", "/v1/sites/%d/origins/%d/verdicts?limit=101" % (sid, oa))
    assert status == 400
    status, _, _ = c.api("GET", "/v1/sites/%d/origins/%d/verdicts" % (sid, oa + 99))
    assert status == 404
    c.stop()


def test_disabling_current_levels_last_origin_switches_at_once(tmp):
    a, b, b2 = start_origins(tmp, "a", "b", "b2")
    # rounds far apart: only the config change can cause the switch
    c = Controld(tmp, extra_args=["--probe-interval-ms", "600000"]).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2), origin_spec(b2, 2)])
    sid, oa = site["id"], site["origins"][0]["id"]
    v0 = card(c, sid)["config_version"]
    status, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, oa), {"enabled": False})
    assert status == 200, (status, body)
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd
    assert cd["config_version"] >= v0 + 2, cd  # the change and the switch
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "no_enabled_origins", sw
    assert sw[0]["title"] == "Origin level switched automatically"
    assert cd["levels"][0]["health"] == "empty", cd
    # the operator cannot switch to the empty level
    status, err, _ = c.api("POST", "/v1/sites/%d/switch" % sid, {"level": 1})
    assert status == 422 and err["error"]["field"] == "level", err
    c.stop()


def test_restart_keeps_state_without_spurious_switch(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], failback="manual")
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    a.set(status=503)
    wait_level(c, sid, 2)
    a.set(status=200)
    wait_until(lambda: events(c, sid, "origin.failback_available"), timeout=WAIT,
               what="failback notice")
    before = card(c, sid)
    n_events = len(events(c, sid))
    n_verdicts = len(verdicts(c, sid, oa))
    c.restart()
    after = card(c, sid)
    assert after["current_level"] == 2, after
    assert after["config_version"] == before["config_version"], (before, after)
    assert card_origin(after, oa)["health"] == "healthy"
    assert card_origin(after, ob)["health"] == "healthy"
    wait_rounds(c, 5)
    after = card(c, sid)
    assert after["current_level"] == 2 and after["config_version"] == before["config_version"]
    # no switch, no repeated notice, no health change: the same events as before the restart
    assert len(events(c, sid)) == n_events, events(c, sid)[n_events:]
    assert len(verdicts(c, sid, oa)) > n_verdicts  # rounds resumed
    c.restart(kill=True)
    assert card(c, sid)["current_level"] == 2
    c.stop()


def test_checkpoint_plugin_votes_and_garbage(tmp):
    a, b = start_origins(tmp, "a", "b")
    plugin = scenario_lib.Plugin()
    try:
        c = Controld(tmp, extra_args=FAST + ["--checkpoint-url",
                                             "http://127.0.0.1:%d/votes" % plugin.port]).start()
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hc={"checkpoints": True})
        sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
        url_a = "http://127.0.0.1:%d/hc" % a.port
        plugin.vote = lambda url: (False, 503, "status 503") if url == url_a else (True, 200, None)
        # the checkpoints say a is down although it answers 200: their votes decide
        wait_health(c, sid, oa, "unhealthy")
        wait_health(c, sid, ob, "healthy")
        o = card_origin(card(c, sid), oa)
        assert o["source"] == "checkpoints" and o["votes"] == {"success": 0, "failure": 2}, o
        assert o["last_error"] == "checkpoint cp-1: status 503", o
        assert a.stats()["paths"].get("/hc", 0) == 0, a.stats()  # controld never probed it
        v = verdicts(c, sid, oa, limit=1)[0]
        assert v["source"] == "checkpoints", v
        assert sorted(x["checkpoint"] for x in v["votes"]) == ["cp-1", "cp-2"], v
        req = [r for r in plugin.requests if r.get("url") == url_a][0]
        assert req == {"url": url_a, "host": "shop.example.com", "timeout_ms": 2000,
                       "user_agent": "cdnca-control-api/origin-probe",
                       "check": {"type": "http", "method": "GET", "headers": {},
                                 "expected_codes": None, "expected_body": None,
                                 "port": None}}, req
        assert card(c, sid)["current_level"] == 2

        # a plugin answering garbage gives no votes: controld's probes decide, rounds go on
        plugin.garbage = b"<html>not what you expected"
        errors0 = metric(c, "cdnca_checkpoint_errors_total")
        wait_health(c, sid, oa, "healthy")
        o = card_origin(card(c, sid), oa)
        assert o["source"] == "control", o
        assert metric(c, "cdnca_checkpoint_errors_total") > errors0
        wait_rounds(c, 3)
        wait_level(c, sid, 1)  # auto failback once a is healthy
        c.stop()
    finally:
        plugin.close()


def test_checkpoint_plugin_too_slow_or_framed_two_ways(tmp):
    """A plugin slower than the probe timeout costs a round one timeout, not one per 32 origins:
    of 40 origins a round asks at most 32 (one wave; over 6 rounds at most 32 * 7 questions,
    where asking all 40 a round makes 240), and all of them get verdicts from controld's own
    probes. A plugin whose answer is chunked with a Content-Length too gives no
    votes (the answer is refused), and controld's probes decide. So does one whose chunk
    extension never ends: read to the wire bound, its answer is refused at once, not at the
    timeout."""
    a, b = start_origins(tmp, "a", "b")
    plugin = scenario_lib.Plugin()
    plugin.delay = 4.0  # each request's own time is 2 s + the 1 s grace
    try:
        c = Controld(tmp, extra_args=FAST + ["--checkpoint-url",
                                             "http://127.0.0.1:%d/votes" % plugin.port]).start()
        sites = [make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], name="s%02d" % i,
                           hc={"checkpoints": True, "path": "/hc%d" % i}) for i in range(20)]
        for s in sites:
            for o in s["origins"]:
                wait_health(c, s["id"], o["id"], "healthy")
        # every site is there: from here a round may ask one wave only
        n0, r0 = len(plugin.requests), metric(c, "cdnca_probe_rounds_total")
        wait_until(lambda: metric(c, "cdnca_probe_rounds_total") >= r0 + 6, 90, "six probe rounds")
        asked, rounds = len(plugin.requests) - n0, metric(c, "cdnca_probe_rounds_total") - r0
        print("a plugin 4 s late: %d questions about 40 origins in %d rounds" % (asked, rounds),
              flush=True)
        assert 0 < asked <= 32 * (rounds + 1), (asked, rounds)
        o = card_origin(card(c, sites[-1]["id"]), sites[-1]["origins"][0]["id"])
        assert o["source"] == "control", o
        assert metric(c, "cdnca_checkpoint_errors_total") >= 40

        # votes framed two ways are no votes
        plugin.delay = 0
        plugin.two_framings = True
        plugin.vote = lambda url: (False, 503, "status 503")
        n0 = len(plugin.requests)
        wait_until(lambda: len(plugin.requests) >= n0 + 120, 60, "three rounds of questions")
        for s in sites[:3]:
            o = card_origin(card(c, s["id"]), s["origins"][0]["id"])
            assert o["health"] == "healthy" and o["source"] == "control", o

        # an extension that never ends: each question is cut at the wire bound, not at the
        # timeout, so the plugin is asked about all 40 origins in every round (at least 9 whole
        # rounds in 12); questions held to the timeout would stop at one wave of 32 a round
        plugin.two_framings = False
        plugin.endless_extension = True
        n0, r0 = len(plugin.requests), metric(c, "cdnca_probe_rounds_total")
        wait_until(lambda: metric(c, "cdnca_probe_rounds_total") >= r0 + 12, 90, "twelve rounds")
        asked, rounds = len(plugin.requests) - n0, metric(c, "cdnca_probe_rounds_total") - r0
        print("a plugin with an endless extension: %d questions in %d rounds" % (asked, rounds),
              flush=True)
        assert asked > 32 * (rounds + 1), (asked, rounds)
        for s in sites[:3]:
            o = card_origin(card(c, s["id"]), s["origins"][0]["id"])
            assert o["health"] == "healthy" and o["source"] == "control", o
        c.stop()
    finally:
        plugin.close()


def test_own_descriptor_shortage_is_no_verdict(tmp):
    """controld with every descriptor taken (idle API connections from several loopback
    addresses, each under the per-address cap) cannot open a probe's socket: that is its own
    shortage, not the origin's failure. No verdict is recorded, the origin stays healthy (no
    incident, no event), a line says why, and probing resumes once descriptors are free."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST)
    limit = 96
    wrapper = os.path.join(tmp, "controld-nofile")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec prlimit --nofile=%d:%d %s \"$@\"\n" % (limit, limit, c.binary))
    os.chmod(wrapper, 0o755)
    c.binary = wrapper
    c.start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    socks = []
    try:
        for k in range(2, 6):  # 4 addresses x 40 connections: more than the limit
            for _ in range(40):
                s = socket.socket()
                s.bind(("127.0.0.%d" % k, 0))
                s.settimeout(2)
                try:
                    s.connect((harness.HOST, c.port))
                except OSError:
                    s.close()
                    continue
                socks.append(s)
        wait_until(lambda: len(os.listdir("/proc/%d/fd" % c.pid())) >= limit, timeout=WAIT,
                   what="controld's descriptors all taken")
        # a round met the shortage (a line about it, or the origin's failure recorded)
        wait_until(lambda: "Too many open files" in open(c.log_path, errors="replace").read(),
                   timeout=WAIT, what="a probe round without descriptors")
        time.sleep(1.5)  # 5 rounds: more than unhealthy_after
    finally:
        for s in socks:
            s.close()
    cd = card(c, sid)
    o = card_origin(cd, oa)
    assert cd["current_level"] == 1 and o["health"] == "healthy", cd
    assert o["last_error"] is None, o
    assert [e for e in events(c, sid) if e["type"] != "origin.health_changed"
            or e["data"]["to"] != "healthy"] == [], events(c, sid)
    log = open(c.log_path, errors="replace").read()
    assert "own probes: " in log and "Too many open files" in log, log[-2000:]
    assert metric(c, "cdnca_probes_not_made_total") >= 1  # what the CdncaProbesNotMade alert reads
    # descriptors back: probes are made again
    n0 = len(verdicts(c, sid, oa))
    wait_until(lambda: len(verdicts(c, sid, oa)) > n0, timeout=WAIT, what="new verdicts")



def _nofile_wrapper(c, tmp, limit):
    """Run c's binary under prlimit with soft and hard RLIMIT_NOFILE at limit."""
    wrapper = os.path.join(tmp, "controld-nofile-%d" % limit)
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec prlimit --nofile=%d:%d %s \"$@\"\n"
                % (limit, limit, os.path.join(harness.BUILD, "controld", "controld")))
    os.chmod(wrapper, 0o755)
    c.binary = wrapper


def test_descriptor_limit_below_the_cap_is_warned(tmp):
    """A hard descriptor limit of 512 under --max-connections 1000 (2 descriptors a connection
    and 256 more: 2,256): controld starts and warns once, naming the listener, the limit, what
    the cap needs and the option to lower; under a limit that fits, no such line."""
    c = Controld(tmp, extra_args=["--max-connections", "1000"])
    _nofile_wrapper(c, tmp, 512)
    c.start()
    c.stop()
    log = open(c.log_path, errors="replace").read()
    lines = [ln for ln in log.splitlines() if "the descriptor limit (RLIMIT_NOFILE)" in ln]
    assert len(lines) == 1, log[-2000:]
    assert "warn" in lines[0] and "api listener: the descriptor limit (RLIMIT_NOFILE) is 512, " \
        "below the 2256 that 1000 connections need" in lines[0], lines
    assert lines[0].endswith("or lower --max-connections"), lines
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4096:
        print("the limit that fits not tried: this runner's hard limit is %d" % hard)
        return
    _nofile_wrapper(c, tmp, 4096)
    c.start()
    c.stop()
    last = open(c.log_path, errors="replace").read().split("\n---- ")[-1]
    assert "listening on" in last and "RLIMIT_NOFILE" not in last, last[-2000:]

if __name__ == "__main__":
    harness.main()
