/* bench_rounds — full probe rounds (due sites, direct probes, one engine transaction) against
   instant loopback origins: how many sites fit in a 30 s round, and at what CPU cost.

   bench_rounds [max_sites [budget_s]]   (defaults 40000 and 30)

   Batches of 1000, 3000, 10000, 20000, 40000, ... sites (3 origins each, up to max_sites) are
   each put in a fresh temporary database; two rounds run per batch on this thread: round 1
   (every origin unknown -> one success) and round 2 (every origin -> healthy: one
   origin.health_changed event each). The origins are an in-process epoll responder on 3
   loopback ports answering every request at once with 200 and closing. Stops after the first
   batch whose round takes longer than budget_s. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctx.h"
#include "engine.h"
#include "log.h"
#include "metrics.h"
#include "prober.h"
#include "responder.h"
#include "store.h"

/* Insert n sites with 3 origins each straight into the database file (one transaction). */
static int populate(const char *path, int n, const struct responder *r) {
  sqlite3 *db = NULL;
  sqlite3_stmt *s1 = NULL, *s2 = NULL, *s3 = NULL;
  int rc = -1;
  int64_t now = clock_wall_ms();
  if (sqlite3_open(path, &db) != SQLITE_OK) goto out;
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO sites (id, name, hc_enabled, hc_path, hc_timeout_ms, "
                         "created_at, updated_at) VALUES (?, ?, 1, '/hc', 5000, ?, ?)",
                         -1, &s1, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "INSERT INTO hostnames (hostname, site_id, position) VALUES (?, ?, 0)",
                         -1, &s2, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "INSERT INTO origins (site_id, level, address, port, scheme, created_at) "
                         "VALUES (?, ?, '127.0.0.1', ?, 'http', ?)",
                         -1, &s3, NULL) != SQLITE_OK)
    goto out;
  for (int i = 1; i <= n; i++) {
    char name[32], host[64];
    snprintf(name, sizeof name, "site%d", i);
    snprintf(host, sizeof host, "site%d.example.com", i);
    sqlite3_bind_int(s1, 1, i);
    sqlite3_bind_text(s1, 2, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s1, 3, now);
    sqlite3_bind_int64(s1, 4, now);
    if (sqlite3_step(s1) != SQLITE_DONE) goto out;
    sqlite3_reset(s1);
    sqlite3_bind_text(s2, 1, host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s2, 2, i);
    if (sqlite3_step(s2) != SQLITE_DONE) goto out;
    sqlite3_reset(s2);
    for (int k = 0; k < N_ORIGINS; k++) {
      sqlite3_bind_int(s3, 1, i);
      sqlite3_bind_int(s3, 2, k == 2 ? 2 : 1); /* two origins on level 1, one on level 2 */
      sqlite3_bind_int(s3, 3, r->port[k]);
      sqlite3_bind_int64(s3, 4, now);
      if (sqlite3_step(s3) != SQLITE_DONE) goto out;
      sqlite3_reset(s3);
    }
  }
  if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) goto out;
  rc = 0;
out:
  if (rc < 0) fprintf(stderr, "populate: %s\n", db ? sqlite3_errmsg(db) : "cannot open");
  sqlite3_finalize(s1);
  sqlite3_finalize(s2);
  sqlite3_finalize(s3);
  sqlite3_close(db);
  return rc;
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One batch; returns the slower round's wall time, or -1. */
static double run_batch(int n, const struct responder *resp) {
  char dir[64], path[128], p2[160];
  struct ctx ctx;
  struct engine_env engine;
  struct prober *p = NULL;
  double worst = -1;
  memset(&ctx, 0, sizeof ctx);
  memset(&engine, 0, sizeof engine);
  snprintf(dir, sizeof dir, "/tmp/cdnca-bench-rounds-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(path, sizeof path, "%s/bench.db", dir);
  ctx.store = store_open(path);
  ctx.metrics = metrics_new();
  if (!ctx.store || !ctx.metrics || populate(path, n, resp) < 0) goto out;
  ctx.cfg.probe_interval_ms = 1; /* every site is due again for the second round */
  ctx.cfg.probe_batch = n;
  ctx.cfg.node_online_ms = 60000;
  engine.store = ctx.store;
  engine.metrics = ctx.metrics;
  engine.probe_interval_ms = ctx.cfg.probe_interval_ms;
  ctx.engine = &engine;
  {
    struct prober_env pe = {.store = ctx.store,
                            .metrics = ctx.metrics,
                            .engine = ctx.engine,
                            .deny = &ctx.targets,
                            .probe_interval_ms = ctx.cfg.probe_interval_ms,
                            .probe_batch = ctx.cfg.probe_batch,
                            .node_online_ms = ctx.cfg.node_online_ms};
    p = prober_new(&pe);
  }
  if (!p) goto out;
  for (int round = 1; round <= 2; round++) {
    struct prober_stats st;
    double t0 = mono_s(), c0 = cpu_s(RUSAGE_THREAD), s0 = cpu_s(RUSAGE_SELF), wall;
    if (prober_run_once(p, &st) < 0) goto out;
    wall = mono_s() - t0;
    printf("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | %d |\n", n, round,
           st.origins, wall, st.load_ms / 1000.0, st.control_ms / 1000.0, st.store_ms / 1000.0,
           st.origins / wall, cpu_s(RUSAGE_THREAD) - c0, cpu_s(RUSAGE_SELF) - s0, st.failures);
    fflush(stdout);
    if (st.sites != n) {
      fprintf(stderr, "round %d probed %d sites, expected %d\n", round, st.sites, n);
      goto out;
    }
    if (wall > worst) worst = wall;
  }
out:
  prober_free(&p);
  store_close(&ctx.store);
  metrics_free(&ctx.metrics);
  unlink(path);
  snprintf(p2, sizeof p2, "%s-wal", path);
  unlink(p2);
  snprintf(p2, sizeof p2, "%s-shm", path);
  unlink(p2);
  rmdir(dir);
  return worst;
}

int main(int argc, char **argv) {
  static const int sizes[] = {1000, 3000, 10000, 20000, 40000, 80000, 160000};
  int max_sites = argc > 1 ? atoi(argv[1]) : 40000;
  double budget = argc > 2 ? atof(argv[2]) : 30.0;
  struct responder resp;
  struct rlimit rl;
  int best = 0;
  log_init("bench_rounds", LOG_TEXT, LOG_WARN);
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (responder_start(&resp) < 0) {
    fprintf(stderr, "cannot start the responder: %s\n", strerror(errno));
    return 1;
  }
  printf("| sites | round | probes | wall s | load s | probe s | store s | probes/s | prober CPU s "
         "| process CPU s | failed |\n");
  printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && sizes[i] <= max_sites; i++) {
    double w = run_batch(sizes[i], &resp);
    if (w < 0) {
      fprintf(stderr, "batch of %d sites failed\n", sizes[i]);
      break;
    }
    if (w <= budget)
      best = sizes[i];
    else
      break;
  }
  responder_stop(&resp);
  printf("\nlargest batch fully probed within a %.0f s round: %d sites (%d probes)\n", budget, best,
         best * N_ORIGINS);
  return best > 0 ? 0 : 1;
}
