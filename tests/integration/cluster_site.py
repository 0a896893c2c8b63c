"""cluster_site — the setup the cluster-mode feature tests share (test_cluster_drill,
test_cluster_ramp): two origins (level 1 "a", level 2 "b"), two controld replicas on one
PostgreSQL database (test_cluster.Cluster), a site on the engine leader, and two nodes given both
replicas' addresses, each carrying the site."""

from harness import Noded, wait_until
from scenario_lib import NODE_ARGS, WAIT, enrol, make_site, node_site, origin_spec, start_origins
from test_backup_levels import HOST
from test_cluster import Cluster


class ClusterSite:
    """.a, .b (origins), .cl (the Cluster), .eng (the engine leader), .other (the other
    replica), .sid, .nodes ([edge1, edge2]). site_args go to make_site."""

    def __init__(self, tmp, host=HOST, **site_args):
        self.a, self.b = start_origins(tmp, "a", "b")
        self.cl = Cluster(tmp, n=2).start()
        self.eng = self.cl.wait_engine(self.cl.ttl_ms / 1000 * 2 + 5)
        self.other = next(r for r in self.cl.replicas if r is not self.eng)
        site = make_site(self.eng, [origin_spec(self.a, 1), origin_spec(self.b, 2)], hosts=[host],
                         **site_args)
        self.sid = site["id"]
        urls = ",".join(r.url for r in self.cl.replicas)
        self.nodes = []
        for name in ("edge1", "edge2"):
            _, tok = enrol(self.eng, name)
            self.nodes.append(Noded(urls, tok, tmp, name=name, extra_args=NODE_ARGS).start())
        for n in self.nodes:
            wait_until(lambda n=n: len((node_site(n, self.sid) or {}).get("origins", [])) == 2,
                       timeout=WAIT, what="%s has the site" % n.name)
