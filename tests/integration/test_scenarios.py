#!/usr/bin/env python3
"""test_scenarios — the seed "Origins: levels and health checks", row by row, end to end.

Each test walks one row of the seed's "Decision rules" table (or the rule that health checks
need two enabled origins) against a real controld probing test origins on loopback, with probe
rounds a few hundred milliseconds apart instead of 30 s. No node is enrolled here, so every
verdict is controld's own probe (the seed's third source); node votes, visitor traffic and the
"Common questions" are in test_scenarios_questions.py and test_scenarios_nodes.py.

Waits are bounded and generous; nothing asserts a duration. Where a rule is about counts
("3 consecutive failures"), the test scripts the origin's answers per probe and reads the
verdict history, so the count is exact whatever the machine's speed."""

import os

import harness
from harness import Controld, Origin, db_query, wait_until
from certs import make_test_pki
from scenario_lib import (LabOrigin, WAIT, card, card_origin, events, hdr, level_health,
                          make_site, origin_spec, start_origins, switch, verdicts,
                          wait_health, wait_level, wait_rounds)

FAST = ["--probe-interval-ms", "300"]


def host_only(h):
    return h.rsplit(":", 1)[0] if h and ":" in h else h


def after(evs, first):
    """The events after (not including) event `first`, in order."""
    ids = [e["id"] for e in evs]
    return evs[ids.index(first["id"]) + 1:]


# ---- "Probe cycle" ----

def test_probe_cycle_oldest_first_up_to_batch(tmp):
    """Seed row "Probe cycle": each round probes the sites probed longest ago, up to the batch
    size (here --probe-batch 2 with 4 sites: rounds alternate between the two pairs, never
    probed first, and every site gets probed)."""
    a, b = start_origins(tmp, "a", "b")
    # created while rounds are far apart, so no site has been probed when the test starts
    c = Controld(tmp, extra_args=["--probe-interval-ms", "600000"]).start()
    sites = []
    for i in range(4):
        s = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], name="s%d" % i)
        sites.append(s)
    for s in sites:
        o = card_origin(card(c, s["id"]), s["origins"][0]["id"])
        assert o["last_checked_at"] is None and o["last_verdict"] is None, o
    c.stop()
    c.extra_args = ["--probe-interval-ms", "300", "--probe-batch", "2"]
    c.start()

    def rounds_of(s):
        return sorted(v["round_id"] for v in verdicts(c, s["id"], s["origins"][0]["id"]))
    wait_until(lambda: all(len(rounds_of(s)) >= 3 for s in sites), timeout=WAIT,
               what="three probes of every site")
    # every verdict in one statement, so one snapshot: a round's verdicts are written in one
    # transaction, so each round read is whole (read site by site through the API, rounds that
    # end between the reads would look half written)
    ids = [s["id"] for s in sites]
    rows = db_query(c, "SELECT site_id, origin_id, round_id FROM verdicts WHERE site_id IN (%s)"
                    % ",".join(str(i) for i in ids))
    by_round = {}
    for s in sites:
        first_o, second_o = s["origins"][0]["id"], s["origins"][1]["id"]
        mine = sorted(r for (sid, oid, r) in rows if sid == s["id"] and oid == first_o)
        for r in mine:
            by_round.setdefault(r, set()).add(s["id"])
        # both origins of a site are probed in the same rounds
        assert mine == sorted(r for (sid, oid, r) in rows
                              if sid == s["id"] and oid == second_o), s["id"]
    first, second = set(ids[:2]), set(ids[2:])
    rounds = sorted(by_round)
    assert len(rounds) >= 5, by_round
    for r in rounds:
        assert len(by_round[r]) == 2, ("a round probed %d sites (batch 2)" % len(by_round[r]),
                                       by_round)
    # never probed first (the lowest ids among equals), then always the pair probed longest ago
    assert by_round[rounds[0]] == first, by_round
    for i, r in enumerate(rounds):
        assert by_round[r] == (first if i % 2 == 0 else second), (r, by_round)
    for s in sites:
        cd = card(c, s["id"])
        for lv in cd["levels"]:
            for o in lv["origins"]:
                assert o["last_checked_at"] and o["source"] == "control", o
    c.stop()


# ---- "One probe" and "Success" ----

def test_one_probe_is_get_of_path_with_host_and_user_agent(tmp):
    """Seed row "One probe" (GET to the health check path, Host = the site's hostname or the
    origin's host header) and "Who probes" (the control plane's User-Agent
    cdnca-control-api/origin-probe)."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2, host_header="origin-b.example.net")],
                     hosts=["www.shop.test", "shop.test"], hc={"path": "/health/deep?x=1"})
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    for o, host in ((a, "www.shop.test"), (b, "origin-b.example.net")):
        st = o.stats()
        probes = [r for r in st["recent"] if r["path"] == "/health/deep"]
        assert len(probes) >= 2 and len(probes) == len(st["recent"]), st["recent"]
        for r in probes:
            assert r["method"] == "GET" and r["target"] == "/health/deep?x=1", r
            assert host_only(hdr(r["headers"], "Host")) == host, r
            assert hdr(r["headers"], "User-Agent") == "cdnca-control-api/origin-probe", r
            assert r["body_len"] == 0, r
    c.stop()


def test_success_is_below_500_so_404_and_302_stay_healthy(tmp):
    """Seed row "Success" (a response with status below 500) and the common question "a 4xx
    (such as 404) counts as success": origins answering 404 and 302 become and stay healthy,
    and the redirect is not followed."""
    a, b, target = start_origins(tmp, "a", "b", "target")
    a.set(health_path_status={"/hc": 404})
    b.set(redirect="http://127.0.0.1:%d/elsewhere" % target.port, redirect_status=302)
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 1)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    wait_rounds(c, 4)
    cd = card(c, sid)
    for oid, status in ((oa, 404), (ob, 302)):
        o = card_origin(cd, oid)
        assert o["health"] == "healthy" and o["last_verdict"] == "success", o
        vs = verdicts(c, sid, oid)
        assert len(vs) >= 5 and all(v["verdict"] == "success" for v in vs), vs
        assert all(v["votes"][0]["status"] == status for v in vs), vs
    assert target.stats()["total"] == 0, target.stats()
    assert cd["current_level"] == 1 and level_health(cd, 1) == "healthy", cd
    assert events(c, sid, "level.switched") == []
    c.stop()


# ---- "Failure" ----

def test_failure_kinds_5xx_refused_tls_name_timeout(tmp):
    """Seed row "Failure": 5xx, connection failure (origin stopped), certificate verification
    failure (a TLS origin whose certificate name does not match), timeout (answer slower than
    timeout_ms). Each makes its origin unhealthy; a TLS origin with the right name stays
    healthy, so the certificate failure is the name."""
    pki = make_test_pki(os.path.join(tmp, "pki"), ["origin.test"])
    tls = {"cert": pki["cert"], "key": pki["key"]}
    e5, slow, ok = start_origins(tmp, "e5", "slow", "ok")
    gone = Origin("gone", tmpdir=tmp).start()
    gone_port = gone.port
    gone.stop()
    tbad = Origin("tbad", tmpdir=tmp, tls=tls).start()
    tgood = Origin("tgood", tmpdir=tmp, tls=tls).start()
    e5.set(status=503)
    slow.set(delay_ms=1500)
    c = Controld(tmp, extra_args=FAST + ["--probe-ca-file", pki["ca"]]).start()
    site = make_site(c, [
        origin_spec(e5, 1), {"level": 1, "address": "127.0.0.1", "port": gone_port,
                             "scheme": "http"},
        origin_spec(tbad, 1, host_header="wrong.test"), origin_spec(slow, 1),
        origin_spec(tgood, 2, host_header="origin.test"), origin_spec(ok, 2)],
        hc={"timeout_ms": 500})
    sid = site["id"]
    ids = [o["id"] for o in site["origins"]]
    for oid in ids[:4]:
        wait_health(c, sid, oid, "unhealthy")
    for oid in ids[4:]:
        wait_health(c, sid, oid, "healthy")
    wait_level(c, sid, 2)
    cd = card(c, sid)
    errs = {}
    for oid in ids[:4]:
        o = card_origin(cd, oid)
        assert o["last_verdict"] == "failure" and o["source"] == "control", o
        assert o["last_error"], o
        errs[oid] = o["last_error"]
        v = verdicts(c, sid, oid, limit=3)
        assert [x["verdict"] for x in v] == ["failure"] * 3, v
    assert errs[ids[0]] == "status 503", errs
    v_e5 = verdicts(c, sid, ids[0], limit=1)[0]["votes"][0]
    assert v_e5["status"] == 503, v_e5
    for oid in ids[1:4]:  # no HTTP status for refused, bad certificate, timeout
        assert verdicts(c, sid, oid, limit=1)[0]["votes"][0]["status"] is None, oid
    low = {k: v.lower() for k, v in errs.items()}
    assert "connect" in low[ids[1]] or "refused" in low[ids[1]], errs
    assert "certificate" in low[ids[2]] or "ssl" in low[ids[2]] or "tls" in low[ids[2]], errs
    assert "timeout" in low[ids[3]] or "timed out" in low[ids[3]], errs
    assert level_health(cd, 1) == "unhealthy" and level_health(cd, 2) == "healthy", cd
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failover", sw
    # the bad-name origin was reached (TLS handshake) yet never answered a probe
    assert tbad.stats()["total"] == 0 and tbad.stats()["connections"] >= 3, tbad.stats()
    assert tgood.stats()["paths"].get("/hc", 0) >= 2, tgood.stats()
    c.stop()


# ---- "Unhealthy" and "Healthy again" ----

def test_unhealthy_after_three_failures_healthy_after_two_successes(tmp):
    """Seed rows "Unhealthy" (3 consecutive failures, not 2; a success in between resets) and
    "Healthy again" (2 consecutive successes; a failure in between resets). The origin answers
    a fixed script, one status per probe, and the verdict history shows the state after each."""
    S, F = 200, 503
    script = [S, S, F, F, S, F, F, S, F, F, F, S, F, S, S]
    want = ["unknown", "healthy",            # S S: healthy after 2
            "healthy", "healthy", "healthy",  # F F S: 2 failures are not enough
            "healthy", "healthy", "healthy",  # F F S again
            "healthy", "healthy", "unhealthy",  # F F F: the third one
            "unhealthy", "unhealthy",         # S F: the failure resets the streak
            "unhealthy", "healthy"]           # S S: healthy again
    with LabOrigin("a") as a:
        a.set_script(script)
        b, = start_origins(tmp, "b")
        c = Controld(tmp, extra_args=FAST).start()
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
        sid, oa = site["id"], site["origins"][0]["id"]
        wait_until(lambda: len(verdicts(c, sid, oa)) >= len(script) + 2, timeout=WAIT,
                   what="%d verdicts" % (len(script) + 2))
        vs = list(reversed(verdicts(c, sid, oa)))[:len(script)]
        got_v = [v["verdict"] for v in vs]
        assert got_v == ["success" if s == S else "failure" for s in script], got_v
        got = [v["state_after"] for v in vs]
        assert got == want, "state after each verdict:\n got  %s\n want %s" % (got, want)
        assert [st for _, _, st in a.answers[:len(script)]] == script
        hc = [(e["data"]["from"], e["data"]["to"]) for e in events(c, sid, "origin.health_changed")
              if e["data"]["origin_id"] == oa]
        assert hc == [("unknown", "healthy"), ("healthy", "unhealthy"),
                      ("unhealthy", "healthy")], hc
        # the level followed: one failover at the third failure, one failback
        sw = [(e["data"]["from_level"], e["data"]["to_level"], e["data"]["reason"])
              for e in events(c, sid, "level.switched")]
        assert sw == [(1, 2, "auto_failover"), (2, 1, "auto_failback")], sw
        assert card(c, sid)["current_level"] == 1
        c.stop()


# ---- "Level health" and "Level switch" ----

def test_level_health_any_all_unknown_and_switch_to_next_not_down(tmp):
    """Seed rows "Level health" (healthy if any origin is, unhealthy only if all are, otherwise
    unknown) and "Level switch" (no healthy level after the current one: the next level not
    confirmed down). Level 1 = two origins, level 2 = one flapping origin (never confirmed
    either way: unknown) and one dead one, level 3 = dead."""
    with LabOrigin("flap") as flap:
        flap.set_script([200, 503], cycle=True)  # S F S F ...: neither 2 successes nor 3 failures
        a1, a2, d2, d3 = start_origins(tmp, "a1", "a2", "d2", "d3")
        d2.set(status=500)
        d3.set(status=502)
        c = Controld(tmp, extra_args=FAST).start()
        site = make_site(c, [origin_spec(a1, 1), origin_spec(a2, 1), origin_spec(flap, 2),
                             origin_spec(d2, 2), origin_spec(d3, 3)])
        sid = site["id"]
        o_a1, o_a2, o_flap, o_d2, o_d3 = [o["id"] for o in site["origins"]]
        wait_health(c, sid, o_d2, "unhealthy")
        wait_health(c, sid, o_d3, "unhealthy")
        wait_health(c, sid, o_a1, "healthy")
        wait_health(c, sid, o_a2, "healthy")
        cd = card(c, sid)
        assert card_origin(cd, o_flap)["health"] == "unknown", cd
        assert [level_health(cd, n) for n in (1, 2, 3)] == ["healthy", "unknown", "unhealthy"], cd
        assert cd["decision"]["action"] == "stay", cd

        a1.set(status=503)  # one origin of level 1 down: the level stays healthy (any)
        wait_health(c, sid, o_a1, "unhealthy")
        wait_rounds(c, 3)
        cd = card(c, sid)
        assert level_health(cd, 1) == "healthy" and cd["current_level"] == 1, cd
        assert events(c, sid, "level.switched") == []

        a2.set(drop=True)  # both down: unhealthy (all); 3 is down, 2 is not confirmed down
        wait_level(c, sid, 2)
        cd = card(c, sid)
        assert card_origin(cd, o_a2)["health"] == "unhealthy", cd
        assert [level_health(cd, n) for n in (1, 2, 3)] == ["unhealthy", "unknown",
                                                            "unhealthy"], cd
        assert card_origin(cd, o_flap)["health"] == "unknown", cd
        sw = events(c, sid, "level.switched")
        assert len(sw) == 1 and sw[0]["data"]["to_level"] == 2, sw
        assert sw[0]["data"]["reason"] == "auto_failover", sw
        # not every level is confirmed down: no all-levels alert
        assert events(c, sid, "site.all_levels_unhealthy") == []
        assert cd["all_levels_unhealthy"] is False, cd
        wait_rounds(c, 3)
        assert card(c, sid)["current_level"] == 2
        c.stop()


def test_level_switch_skips_unhealthy_level_to_next_healthy(tmp):
    """Seed row "Level switch": the current level unhealthy -> the next healthy level (levels
    1, 2, 3 with 2 unhealthy and 3 healthy -> 3), in one switch."""
    a, b, d = start_origins(tmp, "a", "b", "d")
    b.set(status=503)
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2), origin_spec(d, 3)])
    sid, oa, ob, od = [site["id"]] + [o["id"] for o in site["origins"]]
    wait_health(c, sid, ob, "unhealthy")
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, od, "healthy")
    cd = card(c, sid)
    assert [level_health(cd, n) for n in (1, 2, 3)] == ["healthy", "unhealthy", "healthy"], cd
    a.set(status=500)
    wait_level(c, sid, 3)
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1, sw
    assert (sw[0]["data"]["from_level"], sw[0]["data"]["to_level"]) == (1, 3), sw
    assert sw[0]["title"] == "Origin level switched automatically", sw
    # level 2 healthy again: auto failback goes to the first healthy level before 3, i.e. 2
    b.set(status=200)
    wait_health(c, sid, ob, "healthy")
    wait_rounds(c, 2)
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd
    sw = events(c, sid, "level.switched")
    assert (sw[-1]["data"]["to_level"], sw[-1]["data"]["reason"]) == (2, "auto_failback"), sw
    a.set(status=200)
    wait_level(c, sid, 1)
    c.stop()


# ---- "All unhealthy" ----

def test_all_levels_unhealthy_stays_one_alert_then_recovered(tmp):
    """Seed row "All unhealthy" and the common question "when every level is unhealthy, the
    current level is kept": the site stays on its level, exactly one site.all_levels_unhealthy
    event for the incident (not one per round), then one site.recovered once a level is healthy
    again, and the site moves to it."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    b.set(status=503)  # the backup first, so the site has nowhere to go when the primary fails
    wait_health(c, sid, ob, "unhealthy")
    a.set(drop="rst")
    wait_until(lambda: events(c, sid, "site.all_levels_unhealthy"), timeout=WAIT,
               what="the all-levels-unhealthy event")
    wait_rounds(c, 6)
    cd = card(c, sid)
    assert cd["current_level"] == 1, cd
    assert cd["all_levels_unhealthy"] is True and cd["decision"]["action"] == "stay", cd
    assert [level_health(cd, n) for n in (1, 2)] == ["unhealthy", "unhealthy"], cd
    alerts = events(c, sid, "site.all_levels_unhealthy")
    assert len(alerts) == 1, alerts
    assert alerts[0]["title"] and alerts[0]["data"]["current_level"] == 1, alerts
    assert events(c, sid, "level.switched") == []
    assert events(c, sid, "site.recovered") == []

    b.set(status=200)
    wait_until(lambda: events(c, sid, "site.recovered"), timeout=WAIT, what="recovered event")
    wait_level(c, sid, 2)
    wait_rounds(c, 3)
    assert len(events(c, sid, "site.recovered")) == 1
    assert len(events(c, sid, "site.all_levels_unhealthy")) == 1
    assert card(c, sid)["all_levels_unhealthy"] is False
    sw = events(c, sid, "level.switched")
    assert [(e["data"]["to_level"], e["data"]["reason"]) for e in sw] == [(2, "auto_failover")], sw
    a.set(drop=False)
    wait_level(c, sid, 1)
    c.stop()


# ---- "Automatic failback" and "Manual failback" ----

def test_automatic_failback_at_once(tmp):
    """Seed row "Automatic failback": when a higher level is healthy again, switch back at once
    — in the same evaluation that makes its origin healthy (the health change event is directly
    followed by the failback switch), after the 2nd success, with no notice."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    a.set(status=503)
    wait_level(c, sid, 2)
    a.set(status=200)
    wait_level(c, sid, 1)
    evs = events(c, sid)
    back = [e for e in evs if e["type"] == "origin.health_changed"
            and e["data"]["origin_id"] == oa and e["data"]["to"] == "healthy"][-1]
    nxt = after(evs, back)
    assert nxt and nxt[0]["type"] == "level.switched", nxt[:2]
    assert nxt[0]["data"] == dict(nxt[0]["data"], from_level=2, to_level=1,
                                  reason="auto_failback"), nxt[0]
    assert nxt[0]["title"] == "Origin level switched automatically", nxt[0]
    vs = verdicts(c, sid, oa)  # newest first: the healthy verdict came after 2 successes
    i = next(k for k in range(len(vs)) if vs[k]["state_after"] == "healthy"
             and vs[k + 1]["state_after"] == "unhealthy")
    assert vs[i]["verdict"] == "success" and vs[i + 1]["verdict"] == "success", vs[i:i + 3]
    assert vs[i + 2]["verdict"] == "failure", vs[i:i + 3]
    assert events(c, sid, "origin.failback_available") == []
    assert card(c, sid)["manual_pin"] is False
    c.stop()


def test_manual_failback_only_notifies_until_switched(tmp):
    """Seed row "Manual failback" and the common question "with manual failback the primary is
    not switched back automatically after it recovers; switch back on the site yourself": one
    "Origin recovered (manual failback available)" notice, the site stays on the backup, and
    POST /v1/sites/{id}/switch brings it back."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], failback="manual")
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    a.set(status=502)
    wait_level(c, sid, 2)
    a.set(status=200)
    wait_until(lambda: events(c, sid, "origin.failback_available"), timeout=WAIT,
               what="the failback notice")
    wait_rounds(c, 6)
    cd = card(c, sid)
    assert cd["current_level"] == 2 and cd["failback_available"] is True, cd
    assert card_origin(cd, oa)["health"] == "healthy" and level_health(cd, 1) == "healthy", cd
    assert cd["decision"]["action"] == "stay", cd
    fb = events(c, sid, "origin.failback_available")
    assert len(fb) == 1, fb
    assert fb[0]["title"] == "Origin recovered (manual failback available)", fb[0]
    # the notice belongs to the outage's incident (docs/design.md#incidents)
    assert isinstance(fb[0]["data"].pop("incident_id"), int), fb[0]
    assert fb[0]["data"] == {"level": 1, "current_level": 2}, fb[0]
    # the notice is also in the notification center
    st, nc, _ = c.api("GET", "/v1/notifications?limit=1000")
    assert st == 200 and fb[0]["id"] in [e["id"] for e in nc["events"]], nc
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failover", sw

    cd = switch(c, sid, 1)
    assert cd["current_level"] == 1 and cd["failback_available"] is False, cd
    assert cd["manual_pin"] is False, cd  # level 1 has no level before it: nothing to pin
    sw = events(c, sid, "level.switched")
    assert (sw[-1]["data"]["from_level"], sw[-1]["data"]["to_level"],
            sw[-1]["data"]["reason"]) == (2, 1, "manual"), sw
    wait_rounds(c, 3)
    assert card(c, sid)["current_level"] == 1
    assert len(events(c, sid, "origin.failback_available")) == 1
    c.stop()


# ---- "Health checks need at least two enabled origins" ----

def test_health_checks_need_two_enabled_origins(tmp):
    """Seed: "Health checks need at least two enabled origins on the site." Enabling them with
    one is a 422 (on create and on PATCH); disabling origins below two pauses them (the status
    card says so, and no probe is sent); enabling an origin again resumes them."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    st, err, _ = c.api("POST", "/v1/sites", {
        "name": "one", "hostnames": ["one.example.com"],
        "health_check": {"enabled": True, "path": "/hc"}, "origins": [origin_spec(a, 1)]})
    assert st == 422 and err["error"]["field"] == "health_check.enabled", (st, err)
    st, lst, _ = c.api("GET", "/v1/sites")
    assert st == 200 and lst["sites"] == [], lst  # nothing was stored

    one = make_site(c, [origin_spec(a, 1)], name="single", hc={"enabled": False})
    assert one["health_check"]["state"] == "disabled", one
    st, err, _ = c.api("PATCH", "/v1/sites/%d" % one["id"], {"health_check": {"enabled": True}})
    assert st == 422 and err["error"]["field"] == "health_check.enabled", (st, err)
    assert card(c, one["id"])["health_check"]["state"] == "disabled"

    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    assert card(c, sid)["health_check"]["state"] == "active"
    # a second site on b alone keeps rounds going (a round with nothing due is not counted)
    make_site(c, [origin_spec(b, 1), origin_spec(b, 2)], name="witness")
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")
    st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, ob), {"enabled": False})
    assert st == 200, body
    cd = card(c, sid)
    assert cd["health_check"]["state"] == "paused" and cd["health_check"]["reason"], cd
    st, g, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert g["health_check"]["enabled"] is True and g["health_check"]["state"] == "paused", g
    st, err, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": {"enabled": True}})
    assert st == 422 and err["error"]["field"] == "health_check.enabled", (st, err)
    wait_rounds(c, 1)  # a round that may have started before the pause is over
    n_probes, n_verdicts = a.stats()["paths"].get("/hc", 0), len(verdicts(c, sid, oa))
    wait_rounds(c, 4)
    assert a.stats()["paths"].get("/hc", 0) == n_probes, a.stats()["paths"]
    assert len(verdicts(c, sid, oa)) == n_verdicts
    assert card(c, sid)["current_level"] == 1

    st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (sid, ob), {"enabled": True})
    assert st == 200 and body["health"] == "unknown", body
    assert card(c, sid)["health_check"]["state"] == "active"
    wait_until(lambda: a.stats()["paths"].get("/hc", 0) > n_probes, timeout=WAIT,
               what="probes resumed")
    wait_health(c, sid, ob, "healthy")
    c.stop()


if __name__ == "__main__":
    harness.main()
