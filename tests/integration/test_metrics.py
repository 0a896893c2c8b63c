#!/usr/bin/env python3
"""test_metrics — the alertable metrics of docs/design.md#metrics for a fleet in mixed states: cdnca_sites
{state}, the per-site gauges with the --metrics-max-sites label cap, cdnca_origin_health,
cdnca_nodes_lagging, cdnca_webhook_backlog, and noded's per-origin skip state."""

import re

import harness
from harness import Controld, Noded, Origin, wait_until

FAST = ["--probe-interval-ms", "300"]
SAMPLE = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (\S+)$')


def scrape(text):
    """{(name, frozenset(labels.items())): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "bad sample line: %r" % line
        labels = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def get(samples, name, **labels):
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def names(samples, name):
    return [dict(k[1]) for k in samples if k[0] == name]


def controld_metrics(c):
    st, body, _ = c.api("GET", "/metrics", token=None, timeout=10)
    assert st == 200, body
    return scrape(body)


def site(c, name, origins, **extra):
    body = {"name": name, "hostnames": [name + ".test"], "health_check": {"enabled": True},
            "origins": [{"level": lvl, "address": o.address, "port": o.port, "scheme": "http"}
                        for lvl, o in origins]}
    body.update(extra)
    st, s, _ = c.api("POST", "/v1/sites", body)
    assert st == 201, s
    return s


def test_fleet_in_mixed_states(tmp):
    c = Controld(tmp, extra_args=FAST + ["--metrics-max-sites", "3"]).start()
    up1, up2, down1, down2, back1, back2, p1 = (Origin(n, tmpdir=tmp).start() for n in
                                               ("up1", "up2", "down1", "down2", "back1", "back2",
                                                "p1"))
    # failing before the sites exist: both of 'dead's levels fail in its first round, so it stays
    # on level 1 (all down, not on backup) instead of first moving to a level still unknown
    for o in (down1, down2, back1):
        o.set(status=500)
    fine = site(c, "fine", [(1, up1), (2, up2)])
    moved = site(c, "moved", [(1, back1), (2, back2)], failback="manual")
    dead = site(c, "dead", [(1, down1), (2, down2)])
    paused = site(c, "paused", [(1, p1), (2, up2)])
    # paused: health checks on, then its second origin disabled
    po = paused["origins"][1]["id"]
    st, body, _ = c.api("PATCH", "/v1/sites/%d/origins/%d" % (paused["id"], po), {"enabled": False})
    assert st == 200, body

    def settled():
        m = controld_metrics(c)
        return (get(m, "cdnca_sites", state="on_backup") == 1 and
                get(m, "cdnca_sites", state="all_levels_unhealthy") == 1 and m)
    m = wait_until(settled, 30, "one site on backup, one all down")
    # 'moved' is on level 2; its primary comes back: manual failback becomes available
    back1.set(status=200)

    def failback():
        m = controld_metrics(c)
        return get(m, "cdnca_sites", state="failback_available") == 1 and m
    m = wait_until(failback, 30, "failback available on 'moved'")

    assert get(m, "cdnca_sites", state="on_primary") == 3, m
    assert get(m, "cdnca_sites", state="on_backup") == 1
    assert get(m, "cdnca_sites", state="all_levels_unhealthy") == 1
    assert get(m, "cdnca_sites", state="paused") == 1

    # per-site gauges: the first 3 sites by id carry labels, the 4th ('paused') only counts
    labelled = sorted(int(l["site"]) for l in names(m, "cdnca_site_current_level"))
    assert labelled == [fine["id"], moved["id"], dead["id"]], labelled
    assert get(m, "cdnca_site_current_level", site=fine["id"]) == 1
    assert get(m, "cdnca_site_current_level", site=moved["id"]) == 2
    assert get(m, "cdnca_site_on_backup", site=moved["id"]) == 1
    assert get(m, "cdnca_site_on_backup", site=fine["id"]) == 0
    assert get(m, "cdnca_site_failback_available", site=moved["id"]) == 1
    assert get(m, "cdnca_site_failback_available", site=fine["id"]) == 0
    assert get(m, "cdnca_site_all_levels_unhealthy", site=dead["id"]) == 1
    assert get(m, "cdnca_site_all_levels_unhealthy", site=fine["id"]) == 0
    assert not [l for l in names(m, "cdnca_origin_health") if int(l["site"]) == paused["id"]]

    def health(s, k):
        o = s["origins"][k]
        return get(m, "cdnca_origin_health", site=s["id"], origin=o["id"], level=o["level"])
    assert health(fine, 0) == 1 and health(fine, 1) == 1
    assert health(dead, 0) == 2 and health(dead, 1) == 2
    assert health(moved, 0) == 1 and health(moved, 1) == 1  # back1 recovered; back2 never failed

    assert get(m, "cdnca_nodes_lagging") == 0
    assert get(m, "cdnca_webhook_backlog") == 0

    # a webhook to a dead receiver: its deliveries wait in the outbox
    st, body, _ = c.api("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/hook",
                                                 "secret": "s" * 20})
    assert st == 201, body
    st, body, _ = c.api("POST", "/v1/webhooks/%d/test" % body["id"])
    assert st in (200, 201, 202), body
    wait_until(lambda: (get(controld_metrics(c), "cdnca_webhook_backlog") or 0) >= 1, 10,
               "webhook backlog counted")


def test_label_cap_zero_and_node_lagging(tmp):
    c = Controld(tmp, extra_args=FAST + ["--metrics-max-sites", "0",
                                         "--node-online-ms", "60000"]).start()
    o1, o2 = Origin("a", tmpdir=tmp).start(), Origin("b", tmpdir=tmp).start()
    s = site(c, "shop", [(1, o1), (2, o2)])
    m = controld_metrics(c)
    assert get(m, "cdnca_sites", state="on_primary") == 1
    assert not names(m, "cdnca_site_current_level") and not names(m, "cdnca_origin_health")

    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge"})
    assert st == 201, node
    n = Noded(c, node["token"], tmp, extra_args=["--heartbeat-interval-ms", "300"]).start()
    wait_until(lambda: n.visit("GET", "/", "shop.test", timeout=5)[0] == 200, 20, "site served")
    wait_until(lambda: get(controld_metrics(c), "cdnca_nodes_lagging") == 0, 15, "node current")
    # the node stops (SIGSTOP would keep it online by its last heartbeat): it stays online for
    # node-online-ms with an old config once a change is published
    n.proc.send_signal(19)  # SIGSTOP
    try:
        st, body, _ = c.api("PATCH", "/v1/sites/%d" % s["id"], {"name": "shop2"})
        assert st == 200, body
        wait_until(lambda: get(controld_metrics(c), "cdnca_nodes_lagging") == 1, 15,
                   "a lagging node")
    finally:
        n.proc.send_signal(18)  # SIGCONT
    wait_until(lambda: get(controld_metrics(c), "cdnca_nodes_lagging") == 0, 30,
               "the node caught up")


def test_node_skip_state(tmp):
    c = Controld(tmp, extra_args=["--probe-interval-ms", "600000"]).start()
    good, bad = Origin("good", tmpdir=tmp).start(), Origin("bad", tmpdir=tmp).start()
    st, s, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test"], "health_check": {"enabled": False},
        "node_retry": {"fail_count": 2, "fail_window_ms": 10000, "skip_ms": 60000},
        "origins": [{"level": 1, "address": good.address, "port": good.port, "scheme": "http"},
                    {"level": 1, "address": bad.address, "port": bad.port, "scheme": "http"}]})
    assert st == 201, s
    bad_id = [o["id"] for o in s["origins"] if o["port"] == bad.port][0]
    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge"})
    assert st == 201, node
    n = Noded(c, node["token"], tmp, extra_args=["--metrics-max-origins", "10"]).start()
    wait_until(lambda: n.visit("GET", "/", "shop.test", timeout=5)[0] == 200, 20, "site served")

    def node_metrics():
        st, body, _ = n.admin("GET", "/metrics")
        assert st == 200, body
        return scrape(body)
    m = node_metrics()
    assert get(m, "cdnca_node_origins", state="healthy") == 2, m
    assert not names(m, "cdnca_node_origin_skipped")

    bad.set(status=503)
    for _ in range(10):  # retried on the good origin: visitors see 200
        st, body, _ = n.visit("GET", "/", "shop.test", timeout=10)
        assert st == 200, body
    m = node_metrics()
    assert get(m, "cdnca_node_origin_skipped", site=s["id"], origin=bad_id) == 1, m
    assert get(m, "cdnca_node_origins", state="skipped") == 1
    assert get(m, "cdnca_node_origins", state="healthy") == 1
    assert len(names(m, "cdnca_node_origin_skipped")) == 1


if __name__ == "__main__":
    harness.main()
