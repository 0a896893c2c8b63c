#!/usr/bin/env python3
"""test_scenarios_questions — the seed's "Common questions", end to end.

"The origin is down but nothing switched" (the ~90 s arithmetic scaled down, another healthy
origin on the level), "Requests still reach the primary after the switch" (a node without the
new configuration), "Maintaining an origin" (disable it, or switch to the backup by hand).
The other answers of that section have their own rows in test_scenarios.py: every level
unhealthy (test_all_levels_unhealthy_stays_one_alert_then_recovered), a 404 is a success
(test_success_is_below_500_so_404_and_302_stay_healthy), manual failback
(test_manual_failback_only_notifies_until_switched).

controld probes every 300 ms; a noded takes part where the question is about traffic."""

import harness
from harness import Controld, wait_until
from scenario_lib import (LabOrigin, WAIT, card, card_origin, events, level_health, make_site,
                          node_site, node_status, origin_spec, patch_origin, start_node,
                          start_origins, switch, verdicts, visit_origin, wait_health, wait_level,
                          wait_node_level, wait_rounds)

FAST = ["--probe-interval-ms", "300", "--node-online-ms", "1000"]
HOST = "shop.example.com"


def served_by(n, count, path="/page"):
    """count GETs through node n; returns {origin name: answers} (every answer must be 200)."""
    out = {}
    for i in range(count):
        st, who = visit_origin(n, HOST, path)
        assert st == 200, (i, st, who)
        out[who] = out.get(who, 0) + 1
    return out


def page_hits(o, path="/page"):
    return o.stats()["paths"].get(path, 0)


def test_down_origin_switches_no_earlier_than_third_failed_round(tmp):
    """Common question "The origin is down but nothing switched": "It takes 3 consecutive
    failures, one round every 30 s, so about 90 seconds at best." Scaled down to 300 ms rounds:
    the verdict history shows exactly 3 failure verdicts, in 3 successive rounds, up to the
    round of the switch, whose level.switched event directly follows the health change; the
    card kept level 1 and the same config_version until then."""
    with LabOrigin("a") as a:
        b, = start_origins(tmp, "b")
        c = Controld(tmp, extra_args=FAST).start()
        site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
        sid, oa = site["id"], site["origins"][0]["id"]
        wait_health(c, sid, oa, "healthy")
        v0 = card(c, sid)["config_version"]
        a.status = 503  # the origin breaks (every probe from now on fails)
        seen = []  # (current_level, config_version, failures seen after reading the card)

        def switched():
            cd = card(c, sid)
            nfail = sum(1 for v in verdicts(c, sid, oa) if v["verdict"] == "failure")
            seen.append((cd["current_level"], cd["config_version"], nfail))
            return cd["current_level"] == 2
        wait_until(switched, timeout=WAIT, what="the switch to level 2", interval=0.02)
        for level, version, nfail in seen:
            if level == 1:
                assert version == v0, seen  # nothing was published before the switch
            else:
                assert nfail >= 3, ("switched with only %d failures seen" % nfail, seen)
        vs = list(reversed(verdicts(c, sid, oa)))  # oldest first
        fails = [v for v in vs if v["verdict"] == "failure"]
        assert len(fails) >= 3, vs
        first3 = fails[:3]
        rounds = [v["round_id"] for v in first3]
        # 3 successive rounds of this site (no other site: round ids follow each other)
        assert rounds == [rounds[0], rounds[0] + 1, rounds[0] + 2], rounds
        assert [v["state_after"] for v in first3] == ["healthy", "healthy", "unhealthy"], first3
        # the incident's own events (docs/design.md#incidents) may come between the two
        evs = [e for e in events(c, sid) if not e["type"].startswith("incident.")]
        hc = [e for e in evs if e["type"] == "origin.health_changed"
              and e["data"]["origin_id"] == oa and e["data"]["to"] == "unhealthy"]
        assert len(hc) == 1, hc
        i = [e["id"] for e in evs].index(hc[0]["id"])
        sw = [e for e in evs if e["type"] == "level.switched"]
        assert len(sw) == 1 and evs[i + 1]["id"] == sw[0]["id"], evs[i - 1:i + 3]
        assert sw[0]["data"]["reason"] == "auto_failover", sw
        # the switch came no earlier than the third failed round (seconds resolution)
        assert sw[0]["created_at"] >= first3[2]["round_at"] >= first3[0]["round_at"], (sw, first3)
        c.stop()


def test_other_healthy_origin_keeps_level_healthy(tmp):
    """Common question "The origin is down but nothing switched": "while another origin of the
    same level is healthy, the level stays healthy" — two origins on level 1, one dies: it is
    unhealthy, the level is healthy, the decision is to stay, and no switch happens."""
    a1, a2, b = start_origins(tmp, "a1", "a2", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a1, 1), origin_spec(a2, 1), origin_spec(b, 2)])
    sid, o1, o2 = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, o1, "healthy")
    wait_health(c, sid, o2, "healthy")
    v0 = card(c, sid)["config_version"]
    a1.stop()
    wait_health(c, sid, o1, "unhealthy")
    wait_rounds(c, 6)
    cd = card(c, sid)
    assert card_origin(cd, o1)["health"] == "unhealthy", cd
    assert card_origin(cd, o2)["health"] == "healthy", cd
    assert level_health(cd, 1) == "healthy" and cd["current_level"] == 1, cd
    assert cd["decision"]["action"] == "stay" and cd["decision"]["to_level"] == 1, cd
    assert cd["config_version"] == v0, cd
    assert events(c, sid, "level.switched") == []
    c.stop()


def test_node_without_new_config_keeps_old_level(tmp):
    """Common question "Requests still reach the primary after the switch": a switch is a
    publication; until a node has the new configuration it uses the old level. A noded that was
    down while the switch happened comes back with controld unreachable: from its cached config
    it keeps proxying to level 1; once controld is back it moves to level 2."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST])
    sid, oa = site["id"], site["origins"][0]["id"]
    _, n = start_node(c, tmp, "edge")
    wait_health(c, sid, oa, "healthy")
    wait_node_level(n, sid, 1)
    assert served_by(n, 5) == {"a": 5}
    n.stop()

    # the health check of the primary fails (its pages still answer): controld switches
    a.set(health_path_status={"/hc": 503})
    wait_level(c, sid, 2)
    c.stop()

    n.start()
    s = node_status(n)
    assert s["sync"]["from_cache"] is True, s["sync"]
    assert node_site(n, sid)["current_level"] == 1, s
    before = page_hits(a)
    assert served_by(n, 10) == {"a": 10}  # the old level, for as long as it has no news
    assert page_hits(a) == before + 10
    assert node_status(n)["sync"]["state"] in ("cached", "retrying"), node_status(n)["sync"]

    c.start()
    wait_node_level(n, sid, 2, timeout=60)
    assert served_by(n, 10) == {"b": 10}
    assert node_status(n)["sync"]["state"] == "live"
    cd = card(c, sid)
    assert cd["current_level"] == 2, cd
    wait_until(lambda: card(c, sid)["propagation"]["nodes_on_current_version"] == 1,
               timeout=WAIT, what="the node reported on the current version")
    assert card(c, sid)["propagation"]["seq"] >= 1  # the site's last publication


def test_maintenance_by_disabling_origins(tmp):
    """Common question "Maintaining an origin": disable it before the maintenance. With another
    origin on its level, traffic through the node stops going to it and nothing switches;
    disabling the level's last origin switches at once (no_enabled_origins) and traffic moves
    to the backup; enabling them again brings the site back (auto failback once healthy)."""
    a1, a2, b = start_origins(tmp, "a1", "a2", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a1, 1), origin_spec(a2, 1), origin_spec(b, 2)], hosts=[HOST])
    sid, o1, o2, ob = [site["id"]] + [o["id"] for o in site["origins"]]
    _, n = start_node(c, tmp, "edge")
    wait_health(c, sid, o1, "healthy")
    wait_health(c, sid, o2, "healthy")
    wait_until(lambda: len((node_site(n, sid) or {}).get("origins", [])) == 3, timeout=WAIT,
               what="the node has the site")
    got = served_by(n, 20)
    assert set(got) == {"a1", "a2"}, got  # both level-1 origins share the traffic

    patch_origin(c, sid, o1, enabled=False)
    wait_until(lambda: o1 not in [o["id"] for o in node_site(n, sid)["origins"]], timeout=WAIT,
               what="a1 out of the node's config")
    h1 = page_hits(a1)
    assert served_by(n, 20) == {"a2": 20}
    assert page_hits(a1) == h1
    cd = card(c, sid)
    assert cd["current_level"] == 1 and cd["health_check"]["state"] == "active", cd
    assert events(c, sid, "level.switched") == []

    cd0 = card(c, sid)
    patch_origin(c, sid, o2, enabled=False)
    cd = card(c, sid)  # at once, not after a round
    assert cd["current_level"] == 2, cd
    assert cd["config_version"] > cd0["config_version"], (cd0, cd)
    assert cd["health_check"]["state"] == "paused", cd  # one enabled origin left
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "no_enabled_origins", sw
    assert (sw[0]["data"]["from_level"], sw[0]["data"]["to_level"]) == (1, 2), sw
    wait_node_level(n, sid, 2)
    h1, h2 = page_hits(a1), page_hits(a2)
    assert served_by(n, 10) == {"b": 10}
    assert (page_hits(a1), page_hits(a2)) == (h1, h2)

    # maintenance over: enable them; once healthy the site fails back (failback auto)
    patch_origin(c, sid, o1, enabled=True)
    patch_origin(c, sid, o2, enabled=True)
    assert card(c, sid)["health_check"]["state"] == "active"
    wait_level(c, sid, 1)
    sw = events(c, sid, "level.switched")
    assert sw[-1]["data"]["reason"] == "auto_failback", sw
    wait_node_level(n, sid, 1)
    got = served_by(n, 20)
    assert set(got) == {"a1", "a2"}, got


def test_maintenance_by_switching_to_backup_by_hand(tmp):
    """Common question "Maintaining an origin": switch to the backup level by hand. With
    failback auto the site stays on the backup while the primary is healthy (the manual switch
    pins it: like manual failback, a recovery of the primary is only a notice); switching back
    by hand returns it. An automatic failover also ends the pin."""
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp, extra_args=FAST).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], hosts=[HOST], failback="auto")
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    _, n = start_node(c, tmp, "edge")
    wait_health(c, sid, oa, "healthy")
    wait_health(c, sid, ob, "healthy")

    cd = switch(c, sid, 2)
    assert cd["current_level"] == 2 and cd["manual_pin"] is True, cd
    sw = events(c, sid, "level.switched")
    assert [(e["data"]["to_level"], e["data"]["reason"]) for e in sw] == [(2, "manual")], sw
    assert sw[0]["title"] == "Origin level switched manually", sw[0]
    wait_node_level(n, sid, 2)
    assert served_by(n, 10) == {"b": 10}  # the primary gets no traffic during the maintenance
    wait_rounds(c, 6)
    cd = card(c, sid)
    assert cd["current_level"] == 2 and cd["manual_pin"] is True, cd
    assert level_health(cd, 1) == "healthy" and cd["failback"] == "auto", cd
    assert cd["failback_available"] is True and cd["decision"]["action"] == "stay", cd
    # the operator chose this: no notice for a level that was healthy all along
    assert events(c, sid, "origin.failback_available") == []
    # the primary goes down during the maintenance and recovers: a notice, still no switch
    a.set(status=503)
    wait_health(c, sid, oa, "unhealthy")
    a.set(status=200)
    wait_until(lambda: events(c, sid, "origin.failback_available"), timeout=WAIT,
               what="the failback notice")
    wait_rounds(c, 4)
    cd = card(c, sid)
    assert cd["current_level"] == 2 and cd["manual_pin"] is True, cd
    assert card_origin(cd, oa)["health"] == "healthy", cd
    fb = events(c, sid, "origin.failback_available")
    assert len(fb) == 1 and fb[0]["title"] == "Origin recovered (manual failback available)", fb
    assert len(events(c, sid, "level.switched")) == 1

    cd = switch(c, sid, 1)  # maintenance over
    assert cd["current_level"] == 1 and cd["manual_pin"] is False, cd
    wait_node_level(n, sid, 1)
    assert served_by(n, 5) == {"a": 5}
    wait_rounds(c, 3)
    assert card(c, sid)["current_level"] == 1

    # pinned on the backup again; the backup fails: automatic failover to 1 ends the pin
    cd = switch(c, sid, 2)
    assert cd["manual_pin"] is True, cd
    b.set(status=503)
    wait_level(c, sid, 1)
    cd = card(c, sid)
    assert cd["manual_pin"] is False, cd
    sw = events(c, sid, "level.switched")
    assert (sw[-1]["data"]["from_level"], sw[-1]["data"]["to_level"],
            sw[-1]["data"]["reason"]) == (2, 1, "auto_failover"), sw
    c.stop()


if __name__ == "__main__":
    harness.main()
