#!/usr/bin/env python3
"""Shadow health policies (docs/design.md, Shadow health policies): health_check_shadow in the
API with health_check's validation, stored and exported, never published; controld probes it
alone into a shadow state that acts on nothing; GET /v1/sites/{id}/shadow compares it with the
real policy; promoting it is a PATCH of health_check."""

import json
import os
import subprocess

import harness
from harness import Controld, new_db, wait_until
from scenario_lib import (WAIT, card, events, make_site, metric, node_site, origin_spec,
                          start_node, start_origins, wait_health, wait_level, wait_node_level,
                          wait_rounds)

FAST = ["--probe-interval-ms", "300"]


def cli(db, *args):
    """controld --db db ARGS... run to completion -> (exit code, stdout, stderr)."""
    p = subprocess.run([os.path.join(harness.BUILD, "controld", "controld"), "--db", db] +
                       list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def site_get(c, sid):
    status, j, _ = c.api("GET", "/v1/sites/%d" % sid)
    assert status == 200, (status, j)
    return j


def shadow(c, sid):
    status, j, _ = c.api("GET", "/v1/sites/%d/shadow" % sid)
    assert status == 200, (status, j)
    return j


def test_field_validation_storage_export(tmp):
    a, b = start_origins(tmp, "a", "b")
    c = Controld(tmp).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)])
    sid = site["id"]
    assert site["health_check_shadow"] is None, site
    # bad input: 422 (400 for an unknown key) with the path under health_check_shadow, nothing
    # stored
    rev = site_get(c, sid)["revision"]
    for body, code, field in (
            ({"timeout_ms": 50}, 422, "health_check_shadow.timeout_ms"),
            ({"path": "no-slash"}, 422, "health_check_shadow.path"),
            ({"expected_codes": ["600"]}, 422, "health_check_shadow.expected_codes[0]"),
            ({"unhealthy_after": 0}, 422, "health_check_shadow.unhealthy_after"),
            ({"bogus": 1}, 400, "health_check_shadow.bogus"),
            ("strict", 422, "health_check_shadow")):
        status, err, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": body})
        assert status == code, (body, status, err)
        assert err["error"]["field"] == field, (body, err)
    j = site_get(c, sid)
    assert j["health_check_shadow"] is None and j["revision"] == rev, j
    # a POST refuses it the same way
    status, err, _ = c.api("POST", "/v1/sites", {
        "name": "other", "hostnames": ["other.example.com"],
        "health_check_shadow": {"healthy_after": 101}})
    assert status == 422 and err["error"]["field"] == "health_check_shadow.healthy_after", err

    # set: the same object as health_check (defaults filled, enabled true)
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": {
        "path": "/strict", "expected_codes": ["200"], "timeout_ms": 700}})
    assert status == 200, (status, j)
    sh = j["health_check_shadow"]
    assert sh["enabled"] is True and sh["path"] == "/strict" and sh["timeout_ms"] == 700, sh
    assert sh["expected_codes"] == ["200"] and sh["unhealthy_after"] == 3, sh
    assert set(sh) == set(j["health_check"]) - {"state"}, (sh, j["health_check"])
    # a PATCH merges into the shadow, as into health_check
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": {
        "unhealthy_after": 2}})
    assert status == 200 and j["health_check_shadow"]["unhealthy_after"] == 2, j
    assert j["health_check_shadow"]["path"] == "/strict", j
    # its header values are secrets like health_check's: masked below admin, in the site and in
    # the comparison alike (the comparison showed them to read and operator tokens)
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": {
        "headers": {"X-Health-Token": "shadow-secret"}}})
    assert status == 200, j
    for role in ("read", "operator"):
        status, tok, _ = c.api("POST", "/v1/tokens", {"name": "t-" + role, "role": role})
        assert status == 201, tok
        for path in ("/v1/sites/%d" % sid, "/v1/sites/%d/shadow" % sid):
            status, j, _ = c.api("GET", path, token=tok["token"])
            assert status == 200, (path, j)
            assert j["health_check_shadow"]["headers"] == {"X-Health-Token": "***"}, (role, path, j)
            assert "shadow-secret" not in json.dumps(j), (role, path)
    status, j, _ = c.api("GET", "/v1/sites/%d/shadow" % sid)
    assert j["health_check_shadow"]["headers"] == {"X-Health-Token": "shadow-secret"}, j
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": {"headers": {}}})
    assert status == 200 and j["health_check_shadow"]["headers"] == {}, j
    # stored: survives a restart, is exported and imported
    c.stop()
    c.start()
    j = site_get(c, sid)
    assert j["health_check_shadow"]["path"] == "/strict", j
    assert j["health_check_shadow"]["unhealthy_after"] == 2, j
    c.stop()
    doc = os.path.join(tmp, "export.json")
    rc, out, err = cli(c.db, "--export", doc)
    assert rc == 0, (out, err)
    with open(doc) as f:
        exported = [s for s in json.load(f)["sites"] if s["id"] == sid][0]
    assert exported["health_check_shadow"]["expected_codes"] == ["200"], exported
    target = new_db(tmp, "imported")
    rc, out, err = cli(target, "--import", doc)
    assert rc == 0, (out, err)
    c2 = Controld(tmp, name="imported", db=target).start()
    j = site_get(c2, sid)
    assert j["health_check_shadow"]["path"] == "/strict", j
    # null removes it
    status, j, _ = c2.api("PATCH", "/v1/sites/%d" % sid, {"health_check_shadow": None})
    assert status == 200 and j["health_check_shadow"] is None, j
    c2.stop()


def test_stricter_shadow_would_switch_real_never_moves_then_promoted(tmp):
    a, b = start_origins(tmp, "a", "b")
    a.set(health_path_status={"/strict": 403})  # the real check (/hc) still answers 200
    c = Controld(tmp, extra_args=FAST).start()
    strict = {"path": "/strict", "expected_codes": ["200"], "timeout_ms": 1000}
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)], health_check_shadow=strict)
    sid, oa, ob = site["id"], site["origins"][0]["id"], site["origins"][1]["id"]
    wait_health(c, sid, oa, "healthy")
    v0 = card(c, sid)["config_version"]
    _, n = start_node(c, tmp, "edge-1")
    wait_until(lambda: (node_site(n, sid) or {}).get("config_version") == v0, timeout=WAIT,
               what="the node has the site's config")
    cfg0 = node_site(n, sid)
    assert "health_check_shadow" not in json.dumps(cfg0), cfg0  # never published

    def would_switch():
        r = shadow(c, sid)
        return r if r["switches"] else None
    rep = wait_until(would_switch, timeout=WAIT, what="a would-have switch")
    sw = rep["switches"][-1]  # the first one (newest first)
    assert sw["from_level"] == 1 and sw["to_level"] == 2, rep
    assert sw["reason"] == "auto_failover", sw
    assert rep["shadow_level"] == 2 and rep["current_level"] == 1, rep
    assert rep["real_switches"] == [], rep
    by = {o["origin_id"]: o for o in rep["origins"]}
    assert by[oa]["health"] == "unhealthy" and by[oa]["real_health"] == "healthy", by[oa]
    assert by[oa]["disagreements"] >= 3 and by[oa]["last_verdict"] == "failure", by[oa]
    assert by[oa]["last_real_verdict"] == "success", by[oa]
    assert by[oa]["last_error"] == "unexpected status 403", by[oa]
    assert by[ob]["disagreements"] == 0 and by[ob]["agreements"] >= 1, by[ob]
    assert rep["disagreements"] == by[oa]["disagreements"], rep
    assert rep["compared"] == rep["agreements"] + rep["disagreements"], rep
    assert 0 < rep["agreement"] < 1 and rep["rounds"] >= 3, rep
    assert a.stats()["paths"].get("/strict", 0) >= 3  # controld's own shadow probes

    # the real side never moved: no switch, no event, no incident, no republication
    wait_rounds(c, 3)
    cd = card(c, sid)
    assert cd["current_level"] == 1 and cd["config_version"] == v0, cd
    assert cd["shadow"]["level"] == 2 and cd["shadow"]["skipped_rounds"] == 0, cd
    assert events(c, sid, "level.switched") == []
    assert events(c, sid, "site.all_levels_unhealthy") == []
    status, inc, _ = c.api("GET", "/v1/incidents")
    assert status == 200 and inc["incidents"] == [], inc
    assert site_get(c, sid)["current_level"] == 1
    assert node_site(n, sid) == cfg0  # the node's config never changed

    # the shadow state is stored: it survives a restart
    n_before = len(shadow(c, sid)["switches"])
    c.stop()
    c.start()
    rep = shadow(c, sid)
    assert rep["shadow_level"] == 2 and len(rep["switches"]) >= n_before, rep
    assert card(c, sid)["current_level"] == 1

    # promoting it is a PATCH of health_check: now it switches for real
    status, j, _ = c.api("PATCH", "/v1/sites/%d" % sid, {"health_check": strict})
    assert status == 200, (status, j)
    wait_level(c, sid, 2)
    sw = events(c, sid, "level.switched")
    assert len(sw) == 1 and sw[0]["data"]["reason"] == "auto_failover", sw
    rep = shadow(c, sid)
    assert rep["real_switches"] and rep["real_switches"][0]["to_level"] == 2, rep
    wait_node_level(n, sid, 2)
    n.stop()
    c.stop()


def test_shadow_probes_skipped_first_over_the_batch(tmp):
    a, b = start_origins(tmp, "a", "b")
    # a batch of one site: the site's own probes take it, its shadow probes are left out
    c = Controld(tmp, extra_args=FAST + ["--probe-batch", "1"]).start()
    site = make_site(c, [origin_spec(a, 1), origin_spec(b, 2)],
                     health_check_shadow={"path": "/strict"})
    sid, oa = site["id"], site["origins"][0]["id"]
    wait_health(c, sid, oa, "healthy")
    wait_until(lambda: card(c, sid)["shadow"]["skipped_rounds"] >= 3, timeout=WAIT,
               what="skipped shadow rounds")
    cd = card(c, sid)
    assert cd["shadow"]["rounds"] == 0 and cd["shadow"]["level"] is None, cd
    assert a.stats()["paths"].get("/strict", 0) == 0
    assert metric(c, "cdnca_shadow_probes_skipped_total") >= 3
    rep = shadow(c, sid)
    assert rep["rounds"] == 0 and rep["skipped_rounds"] >= 3 and rep["agreement"] is None, rep
    c.stop()


if __name__ == "__main__":
    harness.main()
