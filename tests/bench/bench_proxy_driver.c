/* bench_proxy_driver — runs the proxy engine with a one-site snapshot for benchmarks.
 * usage: bench_proxy_driver --listen HOST:PORT --origin-port N [--threads 2] [--host bench.test]
 *                           [--ramp-share S [--origin2-port M]]
 * --ramp-share S (bench_ramp.sh): the site has two levels (level 1 on the origin port, level 2 on
 * M, by default the same) and is on level 2; S = 0: no ramp; 1 to 99: a failback ramp to level 1
 * started now whose first step (S % of new requests) lasts an hour (docs/design.md, Failback ramp).
 * Without it: one level, one origin. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "proxy.h"
#include "sitecfg.h"

int main(int argc, char **argv) {
  const char *listen = "127.0.0.1:0", *host = "bench.test";
  int origin_port = 0, origin2_port = 0, threads = 2, ramp_share = -1, sig, rc = 1;
  char doc[2048], err[256];
  struct proxy_opts o;
  struct proxy *p = NULL;
  struct sitecfg_set *s = NULL;
  sigset_t set;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--listen") == 0)
      listen = argv[i + 1];
    else if (strcmp(argv[i], "--origin-port") == 0)
      origin_port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--threads") == 0)
      threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--host") == 0)
      host = argv[i + 1];
    else if (strcmp(argv[i], "--ramp-share") == 0)
      ramp_share = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--origin2-port") == 0)
      origin2_port = atoi(argv[i + 1]);
  }
  if (origin_port <= 0 || ramp_share > 99) {
    fprintf(stderr,
            "usage: %s --listen HOST:PORT --origin-port N [--threads N] [--ramp-share 0-99]\n",
            argv[0]);
    return 2;
  }
  log_init("bench_proxy_driver", LOG_TEXT, LOG_WARN);
  if (ramp_share < 0) {
    snprintf(doc, sizeof doc,
             "{\"seq\": 1, \"full\": true, \"sites\": [{\"id\": 1, \"name\": \"bench\", "
             "\"hostnames\": [\"%s\"], \"config_version\": 1, \"current_level\": 1, "
             "\"origins\": [{\"id\": 1, \"level\": 1, \"address\": \"127.0.0.1\", \"port\": %d, "
             "\"scheme\": \"http\", \"host_header\": null, \"weight\": 1}]}]}",
             host, origin_port);
  } else {
    char ramp[256] = "null";
    if (ramp_share > 0)
      snprintf(ramp, sizeof ramp,
               "{\"from_level\": 2, \"to_level\": 1, \"started_at\": %lld, \"steps\": [%d, 100], "
               "\"step_ms\": 3600000}",
               (long long)clock_wall_ms(), ramp_share);
    snprintf(
        doc, sizeof doc,
        "{\"seq\": 1, \"full\": true, \"sites\": [{\"id\": 1, \"name\": \"bench\", "
        "\"hostnames\": [\"%s\"], \"config_version\": 1, \"current_level\": 2, "
        "\"ramp\": %s, \"origins\": [{\"id\": 1, \"level\": 1, \"address\": \"127.0.0.1\", "
        "\"port\": %d, \"scheme\": \"http\", \"host_header\": null, \"weight\": 1}, {\"id\": 2, "
        "\"level\": 2, \"address\": \"127.0.0.1\", \"port\": %d, \"scheme\": \"http\", "
        "\"host_header\": null, \"weight\": 1}]}]}",
        host, ramp, origin_port, origin2_port > 0 ? origin2_port : origin_port);
  }
  if (!(s = sitecfg_load(doc, strlen(doc), err, sizeof err))) {
    fprintf(stderr, "config: %s\n", err);
    goto out;
  }
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  proxy_opts_default(&o);
  o.listen = listen;
  o.threads = threads;
  o.max_idle_per_origin = 256;
  if (!(p = proxy_new(&o)) || proxy_set_config(p, s) < 0 || proxy_start(p) < 0) goto out;
  printf("listening on port %d\n", proxy_port(p));
  fflush(stdout);
  sigwait(&set, &sig);
  rc = 0;
out:
  proxy_free(&p);
  sitecfg_set_unref(s);
  return rc;
}
