/* bench_store — the store's hot paths on both drivers, side by side in one run.

   bench_store [--sites N] [--runs R] [--pg CONNINFO]   (defaults 10000, 3, $CDNCA_BENCH_PG)

   Per run and per driver (SQLite first, then PostgreSQL, taking turns run after run), a fresh
   database (a SQLite file in a temp dir; a new PostgreSQL database on the server CONNINFO names,
   dropped afterwards) gets N sites with one hostname and 3 origins each, written in one
   transaction through the store's driver (db.h). Then, timed:
   - config: the full node config set (store_config_snapshot, since=0), best of 3;
   - list:   every site through store_site_list, pages of 100;
   - round 1 and round 2: two probe rounds (prober_run_once, every site due, probe_batch = N)
     against instant loopback origins (an in-process epoll responder); the store phase of a
     round is its load (the due sites read from the store) plus its store (the engine's
     transaction: origin health, verdicts, probe times, levels, events). Round 1 takes every
     origin from unknown to one success; round 2 makes every origin healthy (one event each).
   Prints one row per run and driver, the medians, and the PostgreSQL/SQLite ratios of the
   medians as speed (SQLite time / PostgreSQL time; goal >= 0.5 for the round's store phase).
   Without a PostgreSQL conninfo only SQLite runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctx.h"
#include "db.h"
#include "engine.h"
#include "log.h"
#include "metrics.h"
#include "prober.h"
#include "responder.h"
#include "store.h"
#include "store_node.h"
#include "store_sites.h"

#define MAX_RUNS 9

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* n sites with one hostname, 3 origins and a publication each, in one transaction on its own
   connection. The probe timeout is 20 s so that a loaded machine does not fail probes (which would
   end the run); it does not enter the store-phase figures. */
static int populate(const char *target, int n, const struct responder *r) {
  static const char q_site[] = "INSERT INTO sites (name, hc_enabled, hc_path, hc_timeout_ms, "
                               "created_at, updated_at) VALUES (?, 1, '/hc', 20000, ?, ?) "
                               "RETURNING id";
  static const char q_host[] =
      "INSERT INTO hostnames (hostname, site_id, position) VALUES (?, ?, 0)";
  static const char q_origin[] = "INSERT INTO origins (site_id, level, address, port, scheme, "
                                 "created_at) VALUES (?, ?, '127.0.0.1', ?, 'http', ?)";
  static const char q_pub[] = "INSERT INTO publications (site_id, config_version, deleted, "
                              "reason, created_at) VALUES (?, 1, 0, 'bench', ?)";
  struct db_conn *c = db_open(target);
  int64_t now = clock_wall_ms();
  int rc = -1;
  if (!c || db_begin_write(c) < 0) goto out;
  for (int i = 1; i <= n; i++) {
    char name[32], host[64];
    struct db_stmt *s = db_prep(c, q_site);
    int64_t id;
    if (!s) goto out;
    snprintf(name, sizeof name, "site%d", i);
    snprintf(host, sizeof host, "site%d.example.com", i);
    db_bind_text(s, 1, name);
    db_bind_i64(s, 2, now);
    db_bind_i64(s, 3, now);
    if (db_step(s) != DB_ROW) goto out;
    id = db_col_i64(s, 0);
    db_reset(s);
    if (!(s = db_prep(c, q_host))) goto out;
    db_bind_text(s, 1, host);
    db_bind_i64(s, 2, id);
    if (db_step(s) != DB_DONE) goto out;
    for (int k = 0; k < N_ORIGINS; k++) {
      if (!(s = db_prep(c, q_origin))) goto out;
      db_bind_i64(s, 1, id);
      db_bind_int(s, 2, k == 2 ? 2 : 1); /* two origins on level 1, one on level 2 */
      db_bind_int(s, 3, r->port[k]);
      db_bind_i64(s, 4, now);
      if (db_step(s) != DB_DONE) goto out;
    }
    if (!(s = db_prep(c, q_pub))) goto out; /* the site as a create publishes it */
    db_bind_i64(s, 1, id);
    db_bind_i64(s, 2, now);
    if (db_step(s) != DB_DONE) goto out;
  }
  if (db_commit(c) < 0) goto out;
  rc = 0;
out:
  if (rc < 0) fprintf(stderr, "populate: %s\n", c ? db_errmsg(c) : "cannot open");
  if (c) db_rollback(c);
  db_close(c);
  return rc;
}

enum { M_CONFIG, M_LIST, M_R1_LOAD, M_R1_STORE, M_R2_LOAD, M_R2_STORE, M_N };
static const char *m_name[M_N] = {"config set ms",    "site list ms",    "round 1 load ms",
                                  "round 1 store ms", "round 2 load ms", "round 2 store ms"};

/* One run on target: fills m[]; 0 or -1. */
static int run_one(const char *target, int n, const struct responder *resp, double *m) {
  struct ctx ctx;
  struct engine_env engine;
  struct prober *p = NULL;
  int rc = -1;
  memset(&ctx, 0, sizeof ctx);
  memset(&engine, 0, sizeof engine);
  ctx.store = store_open(target);
  ctx.metrics = metrics_new();
  if (!ctx.store || !ctx.metrics || populate(target, n, resp) < 0) goto out;

  m[M_CONFIG] = 1e18;
  for (int i = 0; i < 3; i++) {
    struct config_snapshot snap;
    double t0 = mono_ms(), dt;
    if (store_config_snapshot(ctx.store, 0, &snap) != STORE_OK || snap.n_sites != n) {
      fprintf(stderr, "config set: %d sites, expected %d\n", snap.n_sites, n);
      store_config_snapshot_free(&snap);
      goto out;
    }
    dt = mono_ms() - t0;
    store_config_snapshot_free(&snap);
    if (dt < m[M_CONFIG]) m[M_CONFIG] = dt;
  }

  {
    double t0 = mono_ms();
    int64_t after = 0;
    int total = 0, got;
    do {
      struct site_rec *arr = NULL;
      if (store_site_list(ctx.store, after, 100, &arr, &got) != STORE_OK) goto out;
      for (int i = 0; i < got; i++)
        site_rec_fini(&arr[i]);
      if (got) after = arr[got - 1].id;
      free(arr);
      total += got;
    } while (got == 100);
    m[M_LIST] = mono_ms() - t0;
    if (total != n) goto out;
  }

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
  for (int round = 0; round < 2; round++) {
    struct prober_stats st;
    if (prober_run_once(p, &st) < 0 || st.sites != n || st.failures) {
      fprintf(stderr, "round %d: %d sites probed (expected %d), %d failed\n", round + 1, st.sites,
              n, st.failures);
      goto out;
    }
    m[M_R1_LOAD + 2 * round] = (double)st.load_ms;
    m[M_R1_STORE + 2 * round] = (double)st.store_ms;
  }
  rc = 0;
out:
  prober_free(&p);
  store_close(&ctx.store);
  metrics_free(&ctx.metrics);
  return rc;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double t[MAX_RUNS];
  memcpy(t, v, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void row(const char *driver, const char *run, const double *m) {
  printf("| %s | %s |", driver, run);
  for (int k = 0; k < M_N; k++)
    printf(" %.0f |", m[k]);
  printf(" %.0f | %.0f |\n", m[M_R1_LOAD] + m[M_R1_STORE], m[M_R2_LOAD] + m[M_R2_STORE]);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int n = 10000, runs = 3, nd;
  const char *pg = getenv("CDNCA_BENCH_PG");
  static double res[2][MAX_RUNS][M_N];
  const char *drv[2] = {"SQLite", "PostgreSQL"};
  struct responder resp;
  struct rlimit rl;
  char dir[] = "/tmp/cdnca-bench-store-XXXXXX";
  struct db_conn *admin = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sites") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pg") && i + 1 < argc)
      pg = argv[++i];
    else {
      fprintf(stderr, "usage: bench_store [--sites N] [--runs R] [--pg CONNINFO]\n");
      return 2;
    }
  }
  if (n < 1 || runs < 1 || runs > MAX_RUNS) {
    fprintf(stderr, "bench_store: --sites >= 1, --runs 1..%d\n", MAX_RUNS);
    return 2;
  }
  nd = pg && *pg ? 2 : 1;
  log_init("bench_store", LOG_TEXT, LOG_WARN);
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (!mkdtemp(dir) || responder_start(&resp) < 0) {
    fprintf(stderr, "bench_store: %s\n", strerror(errno));
    return 1;
  }
  if (nd == 2 && !(admin = db_open(pg))) return 1;
  if (nd == 1) printf("(no PostgreSQL conninfo: SQLite only)\n");
  printf("%d sites x %d origins, %d runs\n\n", n, N_ORIGINS, runs);
  printf("| driver | run |");
  for (int k = 0; k < M_N; k++)
    printf(" %s |", m_name[k]);
  printf(" round 1 store phase ms | round 2 store phase ms |\n|---|---|");
  for (int k = 0; k < M_N + 2; k++)
    printf("---:|");
  printf("\n");
  for (int r = 0; r < runs; r++) {
    for (int d = 0; d < nd; d++) {
      char target[700], sql[128], runname[16];
      int rc;
      if (d == 0) {
        snprintf(target, sizeof target, "%s/run%d.db", dir, r);
      } else {
        snprintf(sql, sizeof sql, "CREATE DATABASE bench_store_%ld_%d", (long)getpid(), r);
        if (db_exec(admin, sql) < 0) {
          fprintf(stderr, "bench_store: %s\n", db_errmsg(admin));
          return 1;
        }
        /* a later keyword wins in a conninfo string */
        snprintf(target, sizeof target, "%s dbname=bench_store_%ld_%d", pg, (long)getpid(), r);
      }
      rc = run_one(target, n, &resp, res[d][r]);
      if (d == 0) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
          char f[760];
          snprintf(f, sizeof f, "%s%s", target, suffix[i]);
          unlink(f);
        }
      } else {
        snprintf(sql, sizeof sql, "DROP DATABASE bench_store_%ld_%d WITH (FORCE)", (long)getpid(),
                 r);
        db_exec(admin, sql);
      }
      if (rc < 0) {
        fprintf(stderr, "bench_store: run %d on %s failed\n", r + 1, drv[d]);
        return 1;
      }
      snprintf(runname, sizeof runname, "%d", r + 1);
      row(drv[d], runname, res[d][r]);
    }
  }
  double med[2][M_N];
  for (int d = 0; d < nd; d++) {
    for (int k = 0; k < M_N; k++) {
      double v[MAX_RUNS];
      for (int r = 0; r < runs; r++)
        v[r] = res[d][r][k];
      med[d][k] = median(v, runs);
    }
    row(drv[d], "median", med[d]);
  }
  if (nd == 2) {
    printf(
        "\nPostgreSQL speed relative to SQLite (SQLite median time / PostgreSQL median time):\n");
    for (int k = 0; k < M_N; k++)
      printf("  %-18s %.2f\n", m_name[k], med[1][k] > 0 ? med[0][k] / med[1][k] : 0);
    for (int r = 0; r < 2; r++) {
      double s = med[0][M_R1_LOAD + 2 * r] + med[0][M_R1_STORE + 2 * r];
      double p = med[1][M_R1_LOAD + 2 * r] + med[1][M_R1_STORE + 2 * r];
      printf("  round %d store phase %.2f (goal >= 0.5)\n", r + 1, p > 0 ? s / p : 0);
    }
  }
  responder_stop(&resp);
  db_close(admin);
  rmdir(dir);
  return 0;
}
