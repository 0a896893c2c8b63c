"""ramp_share — what the failback ramp's share tests need (test_ramp_share, test_cluster_ramp):
a flood of visitors through several nodes, and the primary's share of the requests each step of
a ramp, counted where they arrive (at the origins)."""

import http.client
import threading
import time

from harness import HOST as LOOPBACK
from scenario_lib import node_site
from test_backup_levels import HOST


def node_ramp(n, sid):
    return (node_site(n, sid) or {}).get("ramp")


class Flood:
    """Visitors without a pause: `per_node` threads per node, each on its own keep-alive
    connection, sending GET /load/<node name>/<i> back to back until stopped (bounded by
    FLOOD_MAX requests a thread). The origins stamp each arrival (origin.py, /__times), so the
    node a request came through is in its path. .count, .errors = [(node, status or error)]."""

    def __init__(self, nodes, per_node=2):
        self.nodes, self.per_node = nodes, per_node
        self.count, self.errors = 0, []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thr = [threading.Thread(target=self._run, args=(n,), daemon=True)
                    for n in nodes for _ in range(per_node)]

    def _run(self, node):
        conn, done, errs = None, 0, []
        for i in range(FLOOD_MAX):
            if self.stop_flag.is_set():
                break
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(LOOPBACK, node.port, timeout=20)
                conn.request("GET", "/load/%s/%d" % (node.name, i), headers={"Host": HOST})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errs.append((node.name, r.status))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                errs.append((node.name, "error %r" % e))
                if conn is not None:
                    conn.close()
                conn = None
            done += 1
        if conn is not None:
            conn.close()
        with self.lock:
            self.count += done
            self.errors += errs

    def start(self):
        for t in self.thr:
            t.start()
        return self

    def finish(self):
        self.stop_flag.set()
        for t in self.thr:
            t.join(timeout=60)
            assert not t.is_alive(), "the flood did not stop"
        return self


# the share test: each step's requests counted at the origins, edges of SHARE_MARGIN_MS left out
SHARE_STEP_MS = 2000
SHARE_MARGIN_MS = 250
SHARE_SIGMAS = 3.9       # 5 points is at least this many standard deviations of a step's share
SHARE_MIN_ANY = 100      # and no step is judged on fewer requests


def share_min(pct):
    """The requests a step of pct % needs so that 5 points is SHARE_SIGMAS standard deviations
    of its share (100 sqrt(p (1 - p) / n) points): 1,521 at 50 %, 548 at 10 %, and
    SHARE_MIN_ANY at 0 or 100 %, where every request must go one way."""
    p = pct / 100.0
    return max(SHARE_MIN_ANY, int((SHARE_SIGMAS / 5.0) ** 2 * 10000 * p * (1 - p) + 0.999))
FLOOD_MAX = 200000


def watch_ramps(nodes, sid, seen):
    """For wait_until: note in seen[node name] = (wall ms, ramp) when each node is first seen
    carrying the site's ramp; true once every node has."""
    for n in nodes:
        if n.name not in seen:
            r = node_ramp(n, sid)
            if r:
                seen[n.name] = (time.time() * 1000.0, r)
    return len(seen) == len(nodes)


def check_step_shares(seen, nodes, a, b, flood):
    """The primary a's share of the flood's requests (a's and b's arrivals, per node) in each step
    of the ramp the nodes carried, as test_two_nodes_share_follows_steps explains: within 5
    points of the step's percentage, on at least share_min(step's percentage) requests."""
    r0 = seen[nodes[0].name][1]
    assert all(r["started_at"] == r0["started_at"] for _, r in seen.values()), seen
    start, step = r0["started_at"], r0["step_ms"]
    counts = [[0, 0] for _ in r0["steps"]]  # per step: [requests at a, requests at both]
    for n in nodes:
        saw, r = seen[n.name]
        ofs = r["clock_offset_ms"]
        for idx, o in ((0, a), (1, b)):
            for t in o.times("/load/%s/" % n.name):
                ct = t + ofs
                k = int((ct - start) // step)
                if k < 0 or k >= len(counts):
                    continue
                lo = start + k * step + SHARE_MARGIN_MS
                if k == 0:
                    lo = max(lo, saw + ofs + SHARE_MARGIN_MS)
                if ct < lo or ct > start + (k + 1) * step - SHARE_MARGIN_MS:
                    continue
                if idx == 0:
                    counts[k][0] += 1
                counts[k][1] += 1
    report = ["step %d (%d %%): %d of %d at the primary = %.1f %%"
              % (k, r0["steps"][k], ca, cn, 100.0 * ca / cn if cn else float("nan"))
              for k, (ca, cn) in enumerate(counts)]
    print("  %d requests in the flood; %s" % (flood.count, "; ".join(report)))
    for k, (ca, cn) in enumerate(counts):
        assert cn >= share_min(r0["steps"][k]), "too few requests to judge: %s" % report
        assert abs(100.0 * ca / cn - r0["steps"][k]) <= 5.0, report
