/* bench_incidents — what incident records cost a probe round's store phase, on both drivers.

   bench_incidents [--sites N] [--rounds R] [--runs K] [--flap P] [--pg CONNINFO]
   (defaults 10000 sites, 60 rounds = 30 minutes of 30 s rounds, 3 runs, 1 % flapping,
   $CDNCA_BENCH_PG)

   Each site has a level-1 and a level-2 origin, health checks on, unhealthy_after and
   healthy_after 1, automatic failback. The rounds are fed to the engine directly
   (engine_apply_round, the store transaction a probe round ends with) with every origin's verdict
   written out and the clock frozen at each round's time (30 s apart): every origin succeeds,
   except the primaries of P % of the sites, which fail every other round (a flap: each one
   switches to level 2 and back, so its incident opens, is mitigated, is cleared and never
   resolved within the 300 s quiet time, and its timeline grows every round). The first two
   rounds (every origin turning healthy) are not timed.

   Per run and driver, the same rounds twice on fresh databases: with incident records off (the
   engine's benchmark seam) and on. Prints the median store ms per round of each, their ratio
   (goal: on / off <= 1.10), the incidents and timeline entries written, and the incident tables'
   size per 1,000 incidents (SQLite: dbstat; PostgreSQL: pg_total_relation_size). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "clock.h"
#include "db.h"
#include "engine.h"
#include "log.h"
#include "metrics.h"
#include "store.h"

#define MAX_RUNS 9
#define ROUND_MS 30000

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* n sites with two origins (levels 1 and 2), origin ids into ids[2i], ids[2i+1]; 0 or -1. */
static int populate(const char *target, int n, int64_t now, int64_t *site_ids, int64_t *ids) {
  static const char q_site[] =
      "INSERT INTO sites (name, hc_enabled, hc_path, hc_timeout_ms, hc_unhealthy_after, "
      "hc_healthy_after, created_at, updated_at) VALUES (?, 1, '/hc', 1000, 1, 1, ?, ?) "
      "RETURNING id";
  static const char q_host[] =
      "INSERT INTO hostnames (hostname, site_id, position) VALUES (?, ?, 0)";
  static const char q_origin[] =
      "INSERT INTO origins (site_id, level, address, port, scheme, "
      "created_at) VALUES (?, ?, '127.0.0.1', ?, 'http', ?) RETURNING id";
  static const char q_pub[] = "INSERT INTO publications (site_id, config_version, deleted, "
                              "reason, created_at) VALUES (?, 1, 0, 'bench', ?)";
  struct db_conn *c = db_open(target);
  int rc = -1;
  if (!c || db_begin_write(c) < 0) goto out;
  for (int i = 0; i < n; i++) {
    char name[32], host[64];
    struct db_stmt *s = db_prep(c, q_site);
    if (!s) goto out;
    snprintf(name, sizeof name, "site%d", i + 1);
    snprintf(host, sizeof host, "site%d.example.com", i + 1);
    db_bind_text(s, 1, name);
    db_bind_i64(s, 2, now);
    db_bind_i64(s, 3, now);
    if (db_step(s) != DB_ROW) goto out;
    site_ids[i] = db_col_i64(s, 0);
    db_reset(s);
    if (!(s = db_prep(c, q_host))) goto out;
    db_bind_text(s, 1, host);
    db_bind_i64(s, 2, site_ids[i]);
    if (db_step(s) != DB_DONE) goto out;
    for (int k = 0; k < 2; k++) {
      if (!(s = db_prep(c, q_origin))) goto out;
      db_bind_i64(s, 1, site_ids[i]);
      db_bind_int(s, 2, k + 1);
      db_bind_int(s, 3, 8000 + k);
      db_bind_i64(s, 4, now);
      if (db_step(s) != DB_ROW) goto out;
      ids[2 * i + k] = db_col_i64(s, 0);
      db_reset(s);
    }
    if (!(s = db_prep(c, q_pub))) goto out;
    db_bind_i64(s, 1, site_ids[i]);
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

/* One integer from a query on its own connection (-1 on error). */
static int64_t query_i64(const char *target, const char *sql) {
  struct db_conn *c = db_open(target);
  struct db_stmt *s = c ? db_prep(c, sql) : NULL;
  int64_t v = -1;
  if (s && db_step(s) == DB_ROW) v = db_col_i64(s, 0);
  if (s) db_reset(s);
  db_close(c);
  return v;
}

struct result {
  double store_ms; /* median per timed round */
  int64_t incidents, entries, bytes;
};

/* One run: n sites, rounds rounds, every flap-th site flapping; incidents on or off. */
static int run_one(const char *target, int pg, int n, int rounds, int flap, int on,
                   struct result *out) {
  struct engine_env env;
  struct store *st = NULL;
  struct metrics *m = metrics_new();
  int64_t *site_ids = calloc((size_t)n, sizeof *site_ids);
  int64_t *ids = calloc((size_t)n * 2, sizeof *ids);
  struct engine_verdict *v = calloc((size_t)n * 2, sizeof *v);
  struct engine_vote *votes = calloc((size_t)n * 2, sizeof *votes);
  struct engine_site_round *sr = calloc((size_t)n, sizeof *sr);
  double *times = calloc((size_t)rounds, sizeof *times);
  int64_t t0 = 1767225600000LL; /* 2026-01-01, frozen and advanced by hand */
  int rc = -1, timed = 0;
  memset(out, 0, sizeof *out);
  clock_set_fake_ms(t0);
  if (!m || !site_ids || !ids || !v || !votes || !sr || !times) goto done;
  if (!(st = store_open(target)) || populate(target, n, t0, site_ids, ids) < 0) goto done;
  memset(&env, 0, sizeof env);
  env.store = st;
  env.metrics = m;
  env.probe_interval_ms = ROUND_MS;
  env.incident_quiet_ms = 300000;
  env.no_incidents = !on;
  for (int r = 0; r < rounds; r++) {
    int64_t now = t0 + (int64_t)(r + 1) * ROUND_MS;
    double a;
    clock_set_fake_ms(now);
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < 2; k++) {
        struct engine_vote *vo = &votes[2 * i + k];
        struct engine_verdict *ve = &v[2 * i + k];
        int fail = k == 0 && flap > 0 && i % flap == 0 && r >= 2 && r % 2 == 0;
        memset(vo, 0, sizeof *vo);
        vo->source = SOURCE_CONTROL;
        vo->ok = !fail;
        vo->status = fail ? 503 : 200;
        vo->latency_ms = 1;
        if (fail) snprintf(vo->error, sizeof vo->error, "status 503");
        memset(ve, 0, sizeof *ve);
        ve->origin_id = ids[2 * i + k];
        engine_tally(vo, 1, ve);
        ve->n_votes = 1;
        ve->votes = vo;
      }
      sr[i].site_id = site_ids[i];
      sr[i].n = 2;
      sr[i].v = &v[2 * i];
    }
    a = mono_ms();
    if (engine_apply_round(&env, r + 1, now, now, sr, n) < 0) {
      fprintf(stderr, "round %d failed\n", r + 1);
      goto done;
    }
    if (r >= 2) times[timed++] = mono_ms() - a;
  }
  out->store_ms = timed ? bench_median(times, timed) : 0;
  out->incidents = query_i64(target, "SELECT COUNT(*) FROM incidents");
  out->entries = query_i64(target, "SELECT COUNT(*) FROM incident_entries");
  out->bytes = query_i64(
      target, pg ? "SELECT SUM(pg_total_relation_size(c.oid))::bigint FROM pg_class c WHERE "
                   "c.relkind = 'r' AND c.relname LIKE 'incident%'"
                 : "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'incident%'");
  rc = 0;
done:
  clock_set_fake_ms(-1);
  store_close(&st);
  metrics_free(&m);
  free(site_ids);
  free(ids);
  free(v);
  free(votes);
  free(sr);
  free(times);
  return rc;
}

int main(int argc, char **argv) {
  int n = 10000, rounds = 60, runs = 3, nd;
  double flap_pct = 1.0;
  const char *pg = getenv("CDNCA_BENCH_PG");
  static struct result res[2][2][MAX_RUNS]; /* driver, off/on, run */
  const char *drv[2] = {"SQLite", "PostgreSQL"};
  char dir[] = "/tmp/cdnca-bench-incidents-XXXXXX";
  struct db_conn *admin = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sites") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--flap") && i + 1 < argc)
      flap_pct = atof(argv[++i]);
    else if (!strcmp(argv[i], "--pg") && i + 1 < argc)
      pg = argv[++i];
    else {
      fprintf(stderr, "usage: bench_incidents [--sites N] [--rounds R] [--runs K] [--flap P] "
                      "[--pg CONNINFO]\n");
      return 2;
    }
  }
  if (n < 1 || rounds < 3 || runs < 1 || runs > MAX_RUNS || flap_pct <= 0 || flap_pct > 100) {
    fprintf(stderr, "bench_incidents: --sites >= 1, --rounds >= 3, --runs 1..%d, --flap (0, 100]\n",
            MAX_RUNS);
    return 2;
  }
  int flap = (int)(100.0 / flap_pct + 0.5);
  nd = pg && *pg ? 2 : 1;
  log_init("bench_incidents", LOG_TEXT, LOG_ERROR);
  if (!mkdtemp(dir)) {
    fprintf(stderr, "bench_incidents: %s\n", strerror(errno));
    return 1;
  }
  if (nd == 2 && !(admin = db_open(pg))) return 1;
  if (nd == 1) printf("(no PostgreSQL conninfo: SQLite only)\n");
  printf("%d sites x 2 origins, every %d-th flapping, %d rounds of %d s (%d timed), %d runs\n\n", n,
         flap, rounds, ROUND_MS / 1000, rounds - 2, runs);
  printf("| driver | run | store ms/round, off | store ms/round, on | on/off | incidents | "
         "timeline entries | incident tables MB |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (int r = 0; r < runs; r++)
    for (int d = 0; d < nd; d++)
      for (int on = 0; on < 2; on++) {
        char target[700], sql[160];
        struct result *x = &res[d][on][r];
        int rc;
        if (d == 0) {
          snprintf(target, sizeof target, "%s/run%d-%d.db", dir, r, on);
        } else {
          snprintf(sql, sizeof sql, "CREATE DATABASE bench_inc_%ld_%d_%d", (long)getpid(), r, on);
          if (db_exec(admin, sql) < 0) {
            fprintf(stderr, "bench_incidents: %s\n", db_errmsg(admin));
            return 1;
          }
          snprintf(target, sizeof target, "%s dbname=bench_inc_%ld_%d_%d", pg, (long)getpid(), r,
                   on);
        }
        rc = run_one(target, d, n, rounds, flap, on, x);
        if (d == 0) {
          const char *suffix[] = {"", "-wal", "-shm"};
          for (int i = 0; i < 3; i++) {
            char f[760];
            snprintf(f, sizeof f, "%s%s", target, suffix[i]);
            unlink(f);
          }
        } else {
          snprintf(sql, sizeof sql, "DROP DATABASE bench_inc_%ld_%d_%d WITH (FORCE)",
                   (long)getpid(), r, on);
          db_exec(admin, sql);
        }
        if (rc < 0) {
          fprintf(stderr, "bench_incidents: run %d on %s failed\n", r + 1, drv[d]);
          return 1;
        }
        if (on) {
          const struct result *off = &res[d][0][r];
          printf("| %s | %d | %.1f | %.1f | %.3f | %lld | %lld | %.2f |\n", drv[d], r + 1,
                 off->store_ms, x->store_ms, off->store_ms > 0 ? x->store_ms / off->store_ms : 0,
                 (long long)x->incidents, (long long)x->entries, x->bytes / 1e6);
          fflush(stdout);
        }
      }
  printf("\n");
  for (int d = 0; d < nd; d++) {
    double off[MAX_RUNS], on[MAX_RUNS], mb[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
      off[r] = res[d][0][r].store_ms;
      on[r] = res[d][1][r].store_ms;
      mb[r] = res[d][1][r].incidents > 0
                  ? res[d][1][r].bytes / 1e6 / (double)res[d][1][r].incidents * 1000.0
                  : 0;
    }
    double mo = bench_median(off, runs), mn = bench_median(on, runs), mm = bench_median(mb, runs);
    printf("%s: median store ms per round off %.1f, on %.1f: on/off %.3f (goal <= 1.10); "
           "incident tables %.1f MB per 1,000 incidents of %d rounds each\n",
           drv[d], mo, mn, mo > 0 ? mn / mo : 0, mm, rounds - 2);
  }
  db_close(admin);
  rmdir(dir);
  return 0;
}
