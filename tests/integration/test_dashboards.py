#!/usr/bin/env python3
"""test_dashboards — deploy/grafana/cdnca.json and deploy/prometheus/alerts.yml against the code.

The dashboard must be valid Grafana JSON (unique panel ids, a grid that fits and does not overlap,
every panel with queries, every $variable defined); every query must parse as PromQL (through
`promtool check rules`, with Grafana's variables filled in); and every metric a panel or an alert
names must be one that controld or noded actually serves on /metrics (the families they declare,
scraped from running daemons). Exits 77 (skipped) without promtool."""

import json
import os
import re
import shutil
import subprocess
import sys

import harness
from harness import Controld, Noded, Origin, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
DASHBOARD = os.path.join(TOP, "deploy", "grafana", "cdnca.json")
ALERTS = os.path.join(TOP, "deploy", "prometheus", "alerts.yml")
# cluster mode (docs/design.md#cluster-mode) metrics: served only by controld on PostgreSQL
CLUSTER_ONLY = {"cdnca_engine_leader", "cdnca_db_up", "cdnca_lease_epoch"}
METRIC_RE = re.compile(r"\bcdnca_[a-z0-9_]+\b")


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def queries(dash):
    """(panel title, expr) for every query of every panel."""
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return out


def families(text):
    """{name: type} from the # TYPE lines of a Prometheus text exposition."""
    fam = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            fam[name] = kind.strip()
    return fam


def served_name(name, fam):
    """The family a sample name belongs to (histogram _bucket/_sum/_count), or None."""
    if name in fam:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and fam.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return None


def test_dashboard_is_valid_grafana_json():
    dash = load_dashboard()
    for key in ("uid", "title", "panels", "schemaVersion", "templating"):
        assert key in dash, "dashboard has no %s" % key
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    variables = {v["name"] for v in dash["templating"]["list"]}
    cells = set()
    titles = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for cx in range(g["x"], g["x"] + g["w"]):
            for cy in range(g["y"], g["y"] + g["h"]):
                assert (cx, cy) not in cells, "panel %r overlaps another" % p["title"]
                cells.add((cx, cy))
        if p["type"] == "row":
            continue
        assert p["title"] not in titles, "two panels titled %r" % p["title"]
        titles.add(p["title"])
        assert p.get("targets"), "panel %r has no query" % p["title"]
        for t in p["targets"]:
            for var in re.findall(r"\$\{?([A-Za-z_]+)", t["expr"]):
                assert var.startswith("__") or var in variables, \
                    "panel %r uses undefined $%s" % (p["title"], var)
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
    # what the issue asks the dashboard to show
    text = json.dumps(dash)
    for needed in ("cdnca_sites", "cdnca_level_switches_total", "cdnca_probe_rounds_total",
                   "cdnca_probe_round_seconds_bucket", "cdnca_nodes_lagging",
                   "cdnca_webhook_backlog", "cdnca_node_requests_total",
                   "cdnca_node_retries_total", "cdnca_node_backup_picks_total",
                   "cdnca_node_fail_open_total"):
        assert needed in text, "the dashboard does not show %s" % needed


def test_queries_parse_as_promql(tmp):
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIP: promtool is not installed (apt-get install prometheus)")
        sys.exit(77)
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, (title, expr) in enumerate(queries(load_dashboard())):
        e = (expr.replace("$__rate_interval", "5m").replace("$controld", ".*")
             .replace("$node", ".*"))
        rules.append("      - record: dashboard_query_%d  # %s" % (i, title.replace("#", "")))
        rules.append("        expr: %s" % json.dumps(e))
    path = os.path.join(tmp, "dashboard_rules.yml")
    with open(path, "w") as f:
        f.write("\n".join(rules) + "\n")
    p = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_metric_named_is_served(tmp):
    c = Controld(tmp).start()
    o = Origin("a", tmpdir=tmp).start()
    st, body, _ = c.api("POST", "/v1/sites", {
        "name": "shop", "hostnames": ["shop.test"],
        "origins": [{"level": 1, "address": o.address, "port": o.port, "scheme": "http"}]})
    assert st == 201, body
    st, node, _ = c.api("POST", "/v1/nodes", {"name": "edge"})
    assert st == 201, node
    n = Noded(c, node["token"], tmp).start()
    wait_until(lambda: n.visit("GET", "/", "shop.test", timeout=5)[0] == 200, 20, "site served")
    st, ctext, _ = c.api("GET", "/metrics", token=None)
    assert st == 200
    st, ntext, _ = n.admin("GET", "/metrics")
    assert st == 200
    fam = families(ctext)
    fam.update(families(ntext))

    missing = []
    for title, expr in queries(load_dashboard()):
        for name in METRIC_RE.findall(expr):
            if not served_name(name, fam):
                missing.append("panel %r: %s" % (title, name))
    with open(ALERTS) as f:
        for line in f:
            if line.strip().startswith("#"):
                continue
            for name in METRIC_RE.findall(line):
                if not served_name(name, fam) and name not in CLUSTER_ONLY:
                    missing.append("alerts.yml: %s" % name)
    assert not missing, "metrics not served by controld or noded:\n  " + "\n  ".join(missing)


if __name__ == "__main__":
    harness.main()
