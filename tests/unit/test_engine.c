/* Unit tests for controld/engine: vote tally, verdicts to states, level switches and events on a
   temporary store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "metrics.h"
#include "probe.h"
#include "prober.h"
#include "store.h"
#include "store_drills.h"
#include "store_events.h"
#include "store_fleet.h"
#include "store_health.h"
#include "store_sites.h"

#define T0 1800000000000LL /* a fixed wall time for the tests */

struct fx {
  char dir[64];
  char path[128];
  struct engine_env env;
  int64_t site_id;
  int64_t o1, o2, o3; /* o1, o2 on level 1 and 2; o3 (optional) on level 3 */
  int64_t round;
  int64_t now;
};

static int open_store(struct fx *f) {
  f->env.store = store_open(f->path);
  return f->env.store ? 0 : -1;
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  log_init("test_engine", LOG_TEXT, LOG_ERROR);
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-engine-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  if (open_store(f) < 0) return -1;
  f->env.metrics = metrics_new();
  f->env.probe_interval_ms = 30000;
  f->now = T0;
  clock_set_fake_ms(T0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  clock_set_fake_ms(-1);
  store_close(&f->env.store);
  metrics_free(&f->env.metrics);
  snprintf(p, sizeof p, "%s-wal", f->path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", f->path);
  unlink(p);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

/* A site with one origin per level 1..levels, health checks on, the given failback mode. */
static void make_site(struct fx *f, const char *failback, int levels) {
  struct site_rec s;
  char conflict[64];
  site_rec_defaults(&s);
  snprintf(s.name, sizeof s.name, "shop");
  s.n_hostnames = 1;
  snprintf(s.hostnames[0], sizeof s.hostnames[0], "shop.example.com");
  assert_int_equal(health_failback_from_string(failback, &s.failback), 0);
  s.hc_enabled = 1;
  s.n_origins = levels;
  s.origins = calloc((size_t)levels, sizeof *s.origins);
  assert_non_null(s.origins);
  for (int i = 0; i < levels; i++) {
    struct origin_rec *o = &s.origins[i];
    o->level = i + 1;
    o->port = 8000 + i;
    o->weight = 1;
    o->enabled = 1;
    snprintf(o->address, sizeof o->address, "10.0.0.%d", i + 1);
    o->scheme = SCHEME_HTTP;
  }
  assert_int_equal(store_site_create(f->env.store, &s, conflict, sizeof conflict), STORE_OK);
  f->site_id = s.id;
  f->o1 = s.origins[0].id;
  f->o2 = s.origins[1].id;
  f->o3 = levels > 2 ? s.origins[2].id : 0;
  site_rec_fini(&s);
  assert_int_equal(engine_site_changed(&f->env, f->site_id), 0);
}

/* One round with a control verdict per origin: ok1/ok2/ok3 (1 success, 0 failure, -1 none). */
static void round3(struct fx *f, int ok1, int ok2, int ok3) {
  struct engine_vote votes[3];
  struct engine_verdict v[3];
  struct engine_site_round sr;
  int oks[3] = {ok1, ok2, ok3}, n = 0;
  int64_t ids[3] = {f->o1, f->o2, f->o3};
  for (int i = 0; i < 3; i++) {
    if (oks[i] < 0 || !ids[i]) continue;
    memset(&votes[n], 0, sizeof votes[n]);
    votes[n].source = SOURCE_CONTROL;
    votes[n].ok = oks[i];
    votes[n].status = oks[i] ? 200 : 503;
    votes[n].latency_ms = 3;
    if (!oks[i]) snprintf(votes[n].error, sizeof votes[n].error, "status 503");
    memset(&v[n], 0, sizeof v[n]);
    v[n].origin_id = ids[i];
    v[n].votes = &votes[n];
    v[n].n_votes = 1;
    engine_tally(&votes[n], 1, &v[n]);
    n++;
  }
  sr.site_id = f->site_id;
  sr.n = n;
  sr.v = v;
  f->round++;
  f->now += 30000;
  clock_set_fake_ms(f->now);
  assert_int_equal(engine_apply_round(&f->env, f->round, f->now - 10, f->now, &sr, 1), 0);
}

static void round2(struct fx *f, int ok1, int ok2) {
  round3(f, ok1, ok2, -1);
}

static struct site_rec load(struct fx *f) {
  struct site_rec s;
  assert_int_equal(store_site_get(f->env.store, f->site_id, &s), STORE_OK);
  return s;
}

static int current_level(struct fx *f) {
  struct site_rec s = load(f);
  int l = s.current_level;
  site_rec_fini(&s);
  return l;
}

static const struct origin_rec *find(const struct site_rec *s, int64_t id) {
  for (int i = 0; i < s->n_origins; i++)
    if (s->origins[i].id == id) return &s->origins[i];
  return NULL;
}

/* Events of the site of a type; when data_sub is set, only those whose data contains it. */
static int count_events(struct fx *f, const char *type, const char *data_sub) {
  struct event_rec *ev = NULL;
  int n = 0, hits = 0;
  assert_int_equal(store_event_list(f->env.store, f->site_id, 0, 1000, &ev, &n), STORE_OK);
  for (int i = 0; i < n; i++)
    if (strcmp(ev[i].type, type) == 0 && (!data_sub || strstr(ev[i].data, data_sub))) hits++;
  store_events_free(ev, n);
  return hits;
}

static const char *last_title(struct fx *f, const char *type, char *out, size_t cap) {
  struct event_rec *ev = NULL;
  int n = 0;
  out[0] = '\0';
  assert_int_equal(store_event_list(f->env.store, f->site_id, 0, 1000, &ev, &n), STORE_OK);
  for (int i = 0; i < n; i++)
    if (strcmp(ev[i].type, type) == 0) snprintf(out, cap, "%s", ev[i].title);
  store_events_free(ev, n);
  return out;
}

/* ---- tally ---- */

static struct engine_vote vote(enum health_source src, int ok) {
  struct engine_vote v;
  memset(&v, 0, sizeof v);
  v.source = src;
  v.ok = ok;
  v.node_id = src == SOURCE_NODES ? 7 : 0;
  if (src == SOURCE_CHECKPOINTS) snprintf(v.checkpoint, sizeof v.checkpoint, "fra1");
  if (!ok) snprintf(v.error, sizeof v.error, "timeout");
  return v;
}

static void test_tally_nodes(void **state) {
  struct engine_vote v[3];
  struct engine_verdict out;
  (void)state;
  memset(&out, 0, sizeof out);
  v[0] = vote(SOURCE_NODES, 1);
  v[1] = vote(SOURCE_NODES, 0);
  v[2] = vote(SOURCE_NODES, 1);
  engine_tally(v, 3, &out);
  assert_int_equal(out.verdict, VERDICT_SUCCESS);
  assert_int_equal(out.source, SOURCE_NODES);
  assert_int_equal(out.votes_success, 2);
  assert_int_equal(out.votes_failure, 1);
  /* 2 of 2 failures decide, with the first failing node's error */
  v[0] = vote(SOURCE_NODES, 0);
  v[1] = vote(SOURCE_NODES, 0);
  engine_tally(v, 2, &out);
  assert_int_equal(out.verdict, VERDICT_FAILURE);
  assert_int_equal(out.source, SOURCE_NODES);
  assert_string_equal(out.error, "node 7: timeout");
  /* 1-1 and a single vote decide nothing */
  v[0] = vote(SOURCE_NODES, 1);
  v[1] = vote(SOURCE_NODES, 0);
  engine_tally(v, 2, &out);
  assert_int_equal(out.verdict, VERDICT_NONE);
  engine_tally(v, 1, &out);
  assert_int_equal(out.verdict, VERDICT_NONE);
  engine_tally(v, 0, &out);
  assert_int_equal(out.verdict, VERDICT_NONE);
}

static void test_tally_checkpoints_and_control(void **state) {
  struct engine_vote v[5];
  struct engine_verdict out;
  (void)state;
  memset(&out, 0, sizeof out);
  /* nodes 1-1, checkpoints add 0-1: 1-2 is a failure by checkpoints */
  v[0] = vote(SOURCE_NODES, 1);
  v[1] = vote(SOURCE_NODES, 0);
  v[2] = vote(SOURCE_CHECKPOINTS, 0);
  engine_tally(v, 3, &out);
  assert_int_equal(out.verdict, VERDICT_FAILURE);
  assert_int_equal(out.source, SOURCE_CHECKPOINTS);
  assert_int_equal(out.votes_success, 1);
  assert_int_equal(out.votes_failure, 2);
  /* checkpoints alone (no node votes): 2 of 2 */
  v[0] = vote(SOURCE_CHECKPOINTS, 1);
  v[1] = vote(SOURCE_CHECKPOINTS, 1);
  engine_tally(v, 2, &out);
  assert_int_equal(out.verdict, VERDICT_SUCCESS);
  assert_int_equal(out.source, SOURCE_CHECKPOINTS);
  /* a tie of everything leaves it to controld's probe */
  v[0] = vote(SOURCE_NODES, 1);
  v[1] = vote(SOURCE_CHECKPOINTS, 0);
  v[2] = vote(SOURCE_CONTROL, 0);
  snprintf(v[2].error, sizeof v[2].error, "status 502");
  engine_tally(v, 3, &out);
  assert_int_equal(out.verdict, VERDICT_FAILURE);
  assert_int_equal(out.source, SOURCE_CONTROL);
  assert_int_equal(out.votes_failure, 1);
  assert_int_equal(out.votes_success, 0);
  assert_string_equal(out.error, "status 502");
  /* nodes that decide win over a control vote */
  v[0] = vote(SOURCE_NODES, 1);
  v[1] = vote(SOURCE_NODES, 1);
  v[2] = vote(SOURCE_CONTROL, 0);
  engine_tally(v, 3, &out);
  assert_int_equal(out.verdict, VERDICT_SUCCESS);
  assert_int_equal(out.source, SOURCE_NODES);
}

static void test_node_deadline(void **state) {
  (void)state;
  assert_int_equal(prober_node_deadline_ms(5000, 30000), 7000);
  assert_int_equal(prober_node_deadline_ms(5000, 300), 150);
  assert_int_equal(prober_node_deadline_ms(5000, 1), 1);
  /* the checkpoint phase: one query's time, however many queries */
  assert_int_equal(checkpoint_phase_ms(2000), 3000);
  assert_int_equal(checkpoint_phase_ms(0), PROBE_DEFAULT_TIMEOUT_MS + 1000);
}

/* Votes from nodes through a round: the verdict, its source and the evidence are stored. */
static void test_round_with_node_votes(void **state) {
  struct fx *f = *state;
  struct engine_vote votes[3];
  struct engine_verdict v;
  struct engine_site_round sr;
  struct verdict_rec *vr = NULL;
  int n = 0;
  struct site_rec s;
  make_site(f, "auto", 2);
  votes[0] = vote(SOURCE_NODES, 0);
  votes[1] = vote(SOURCE_NODES, 0);
  votes[1].node_id = 8;
  votes[2] = vote(SOURCE_NODES, 1);
  votes[2].node_id = 9;
  memset(&v, 0, sizeof v);
  v.origin_id = f->o1;
  v.votes = votes;
  v.n_votes = 3;
  engine_tally(votes, 3, &v);
  sr.site_id = f->site_id;
  sr.n = 1;
  sr.v = &v;
  assert_int_equal(engine_apply_round(&f->env, 1, f->now, f->now + 5, &sr, 1), 0);
  s = load(f);
  assert_int_equal(find(&s, f->o1)->last_verdict, VERDICT_FAILURE);
  assert_int_equal(find(&s, f->o1)->last_source, SOURCE_NODES);
  assert_int_equal(find(&s, f->o1)->votes_failure, 2);
  assert_int_equal(find(&s, f->o1)->votes_success, 1);
  assert_int_equal(find(&s, f->o1)->failure_streak, 1);
  assert_int_equal(find(&s, f->o1)->health, HEALTH_UNKNOWN);
  assert_string_equal(find(&s, f->o1)->last_error, "node 7: timeout");
  site_rec_fini(&s);
  assert_int_equal(store_health_verdicts(f->env.store, f->o1, 10, &vr, &n), STORE_OK);
  assert_int_equal(n, 1);
  assert_string_equal(vr[0].source, "nodes");
  assert_string_equal(vr[0].verdict, "failure");
  assert_non_null(strstr(vr[0].votes, "\"node_id\":8"));
  assert_non_null(strstr(vr[0].votes, "\"node_id\":9"));
  store_health_verdicts_free(vr, n);
}

/* ---- checkpoint plugin answers ---- */

static int parse(const char *body, struct checkpoint_answer *a) {
  return checkpoint_parse(body, strlen(body), a);
}

static void test_checkpoint_parse(void **state) {
  struct checkpoint_answer a;
  static const char *const garbage[] = {
      "",
      "not json",
      "[]",
      "{}",
      "{\"votes\":{}}",
      "{\"votes\":[1]}",
      "{\"votes\":[{\"ok\":true}]}",
      "{\"votes\":[{\"checkpoint\":\"\",\"ok\":true}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":1}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":true,\"status\":\"200\"}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":true,\"status\":1000}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":true,\"error\":5}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":true,\"extra\":5}]}",
      "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":true},{\"checkpoint\":\"a\",\"ok\":false}]}",
      "{\"votes\":[]} trailing",
      /* a name is text only: no control character */
      "{\"votes\":[{\"checkpoint\":\"cp\\n1\",\"ok\":true}]}",
      "{\"votes\":[{\"checkpoint\":\"cp\\u0007\",\"ok\":true}]}",
      "{\"votes\":[{\"checkpoint\":\"cp\\u0085\",\"ok\":true}]}",
  };
  (void)state;
  assert_int_equal(parse("{\"votes\":[{\"checkpoint\":\"fra1\",\"ok\":true,\"status\":200,"
                         "\"error\":null},{\"checkpoint\":\"ams1\",\"ok\":false,\"status\":null,"
                         "\"error\":\"timeout\",\"latency_ms\":5000}],\"plugin\":\"x\"}",
                         &a),
                   0);
  assert_int_equal(a.valid, 1);
  assert_int_equal(a.n, 2);
  assert_string_equal(a.votes[0].name, "fra1");
  assert_int_equal(a.votes[0].ok, 1);
  assert_int_equal(a.votes[0].status, 200);
  assert_int_equal(a.votes[0].latency_ms, -1);
  assert_string_equal(a.votes[1].error, "timeout");
  assert_int_equal(a.votes[1].status, 0);
  assert_int_equal(a.votes[1].latency_ms, 5000);
  checkpoint_answers_free(&a, 1);
  /* an error's control bytes become '?' and the vote counts; text still not clean is named */
  assert_int_equal(parse("{\"votes\":[{\"checkpoint\":\"a\",\"ok\":false,\"error\":"
                         "\"body:\\n\\u001b[31mred\\t\"},{\"checkpoint\":\"b\",\"ok\":false,"
                         "\"error\":\"x\\u0085y\"}]}",
                         &a),
                   0);
  assert_int_equal(a.n, 2);
  assert_string_equal(a.votes[0].error, "body:??[31mred?");
  assert_string_equal(a.votes[1].error, "checkpoint error (not printable)");
  checkpoint_answers_free(&a, 1);
  /* a long error is cut at a character's start (here a 2-byte one across the field's end) */
  {
    char body[512];
    int at =
        snprintf(body, sizeof body, "{\"votes\":[{\"checkpoint\":\"a\",\"ok\":false,\"error\":\"");
    for (int i = 0; i < 126; i++)
      body[at++] = 'e';
    at += snprintf(body + at, sizeof body - (size_t)at, "\xc3\xa9tail\"}]}");
    assert_int_equal(parse(body, &a), 0);
    assert_int_equal(strlen(a.votes[0].error), 126);
    checkpoint_answers_free(&a, 1);
  }
  assert_int_equal(parse("{\"votes\":[]}", &a), 0);
  assert_int_equal(a.valid, 1);
  assert_int_equal(a.n, 0);
  checkpoint_answers_free(&a, 1);
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
    assert_int_equal(parse(garbage[i], &a), -1);
    assert_int_equal(a.valid, 0);
    assert_int_equal(a.n, 0);
    assert_true(a.error[0] != '\0');
    checkpoint_answers_free(&a, 1);
  }
}

/* ---- levels ---- */

static void test_failover_and_auto_failback(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  char title[128];
  int64_t v0;
  make_site(f, "auto", 2);
  round2(f, 1, 1);
  round2(f, 1, 1);
  s = load(f);
  assert_int_equal(find(&s, f->o1)->health, HEALTH_HEALTHY);
  assert_int_equal(find(&s, f->o2)->health, HEALTH_HEALTHY);
  v0 = s.config_version;
  site_rec_fini(&s);
  round2(f, 0, 1);
  round2(f, 0, 1);
  assert_int_equal(current_level(f), 1);
  round2(f, 0, 1); /* the third failure */
  assert_int_equal(current_level(f), 2);
  s = load(f);
  assert_int_equal(find(&s, f->o1)->health, HEALTH_UNHEALTHY);
  assert_true(s.config_version > v0); /* a switch is a republication */
  site_rec_fini(&s);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"auto_failover\""), 1);
  assert_string_equal(last_title(f, "level.switched", title, sizeof title),
                      "Origin level switched automatically");
  assert_int_equal(count_events(f, "origin.health_changed", "\"to\":\"unhealthy\""), 1);
  /* a success resets the failure streak; two make it healthy: back to level 1 at once */
  round2(f, 1, 1);
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"auto_failback\""), 1);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 0);
}

static void test_failback_hold(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  make_site(f, "auto", 2);
  assert_int_equal(store_site_get(f->env.store, f->site_id, &s), STORE_OK);
  s.failback_hold_ms = 70000; /* a bit more than two rounds of 30 s */
  assert_int_equal(store_site_update(f->env.store, &s, NULL, 0), STORE_OK);
  site_rec_fini(&s);
  for (int i = 0; i < 3; i++)
    round2(f, 0, 1);
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1);
  round2(f, 1, 1); /* healthy since now */
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1); /* 30 s */
  round2(f, 1, 1); /* 60 s */
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1); /* 90 s >= 70 s */
  assert_int_equal(current_level(f), 1);
}

static void test_manual_failback(void **state) {
  struct fx *f = *state;
  char title[128];
  struct outlook ol;
  struct site_rec s;
  make_site(f, "manual", 2);
  for (int i = 0; i < 3; i++)
    round2(f, 0, 1);
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1);
  round2(f, 1, 1);
  round2(f, 1, 1);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 1);
  assert_string_equal(last_title(f, "origin.failback_available", title, sizeof title),
                      "Origin recovered (manual failback available)");
  assert_int_equal(count_events(f, "origin.failback_available", "\"level\":1"), 1);
  s = load(f);
  engine_outlook(&s, f->now, &ol);
  assert_int_equal(ol.decision.failback_available, 1);
  assert_int_equal(ol.decision.action, HEALTH_STAY);
  site_rec_fini(&s);
  /* the operator switches back */
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 1), ENGINE_SWITCH_OK);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"manual\""), 1);
  assert_string_equal(last_title(f, "level.switched", title, sizeof title),
                      "Origin level switched manually");
  s = load(f);
  assert_int_equal(s.failback_notified, 0);
  site_rec_fini(&s);
  round2(f, 1, 1);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 1);
  /* a second outage and recovery notifies again */
  for (int i = 0; i < 3; i++)
    round2(f, 0, 1);
  assert_int_equal(current_level(f), 2);
  round2(f, 1, 1);
  round2(f, 1, 1);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 2);
}

static void test_all_levels_unhealthy(void **state) {
  struct fx *f = *state;
  make_site(f, "auto", 2);
  round2(f, 1, 1);
  round2(f, 1, 1);
  for (int i = 0; i < 5; i++)
    round2(f, 0, 0);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(count_events(f, "site.all_levels_unhealthy", NULL), 1);
  assert_int_equal(count_events(f, "level.switched", NULL), 0);
  round2(f, 0, 1);
  assert_int_equal(count_events(f, "site.recovered", NULL), 0);
  round2(f, 0, 1); /* level 2 healthy: recovered and failover */
  assert_int_equal(count_events(f, "site.recovered", NULL), 1);
  assert_int_equal(current_level(f), 2);
  round2(f, 0, 1);
  assert_int_equal(count_events(f, "site.recovered", NULL), 1);
  assert_int_equal(count_events(f, "site.all_levels_unhealthy", NULL), 1);
}

static void test_failover_prefers_healthy_then_unknown(void **state) {
  struct fx *f = *state;
  make_site(f, "auto", 3);
  /* level 2 stays unknown (no verdicts), level 3 becomes healthy */
  round3(f, 1, -1, 1);
  round3(f, 1, -1, 1);
  for (int i = 0; i < 3; i++)
    round3(f, 0, -1, 1);
  assert_int_equal(current_level(f), 3);
}

static void test_no_enabled_origins_switches_at_once(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  struct origin_rec o;
  make_site(f, "auto", 3);
  s = load(f);
  o = *find(&s, f->o1);
  site_rec_fini(&s);
  o.enabled = 0;
  assert_int_equal(store_origin_update(f->env.store, &o), STORE_OK);
  assert_int_equal(engine_site_changed(&f->env, f->site_id), 0);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"no_enabled_origins\""), 1);
  /* evaluating again changes nothing */
  assert_int_equal(engine_site_changed(&f->env, f->site_id), 0);
  assert_int_equal(count_events(f, "level.switched", NULL), 1);
}

/* The change and its re-evaluation in one store_op: a failure after both leaves neither. */
struct change_arg {
  struct fx *f;
  enum store_rc result;
};

static enum store_rc disable_o1_and_evaluate(struct store_tx *tx, void *arg) {
  struct change_arg *a = arg;
  struct site_rec s;
  enum store_rc rc = store_site_get_locked(tx, a->f->site_id, &s);
  struct origin_rec o;
  if (rc != STORE_OK) return rc;
  o = *find(&s, a->f->o1);
  site_rec_fini(&s);
  o.enabled = 0;
  rc = store_origin_update_locked(tx, &o, 1);
  if (rc != STORE_OK) return rc;
  if (engine_site_changed_locked(&a->f->env, tx, a->f->site_id) < 0) return STORE_ERROR;
  return a->result;
}

static void test_change_and_reevaluation_are_one_transaction(void **state) {
  struct fx *f = *state;
  struct change_arg a = {f, STORE_ERROR};
  struct site_rec s;
  make_site(f, "auto", 3);
  assert_int_equal(store_op(f->env.store, disable_o1_and_evaluate, &a), STORE_ERROR);
  assert_int_equal(current_level(f), 1);
  s = load(f);
  assert_int_equal(find(&s, f->o1)->enabled, 1);
  site_rec_fini(&s);
  assert_int_equal(count_events(f, "level.switched", NULL), 0);
  a.result = STORE_OK;
  assert_int_equal(store_op(f->env.store, disable_o1_and_evaluate, &a), STORE_OK);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"no_enabled_origins\""), 1);
}

/* engine_site_changed_keep_locked hands back the record it evaluated when nothing made it stale
   (it equals a fresh read in the same transaction), and nothing when it switched the level. */
static enum store_rc keep_and_compare(struct store_tx *tx, void *arg) {
  struct change_arg *a = arg;
  struct site_rec kept, fresh;
  int k = engine_site_changed_keep_locked(&a->f->env, tx, a->f->site_id, &kept);
  if (k < 0) return STORE_ERROR;
  a->result = k ? STORE_OK : STORE_NOT_FOUND;
  if (!k) return STORE_OK;
  assert_int_equal(store_site_get_locked(tx, a->f->site_id, &fresh), STORE_OK);
  assert_int_equal(kept.n_origins, fresh.n_origins);
  for (int i = 0; i < kept.n_origins; i++)
    assert_memory_equal(&kept.origins[i], &fresh.origins[i], sizeof kept.origins[i]);
  struct origin_rec *ko = kept.origins, *fo = fresh.origins;
  kept.origins = fresh.origins = NULL;
  assert_memory_equal(&kept, &fresh, sizeof kept);
  kept.origins = ko;
  fresh.origins = fo;
  site_rec_fini(&kept);
  site_rec_fini(&fresh);
  return STORE_OK;
}

static void test_reevaluation_keeps_the_record(void **state) {
  struct fx *f = *state;
  struct change_arg a = {f, STORE_ERROR};
  struct site_rec s;
  struct origin_rec o;
  make_site(f, "auto", 3);
  assert_int_equal(store_op(f->env.store, keep_and_compare, &a), STORE_OK);
  assert_int_equal(a.result, STORE_OK); /* kept, and equal to a fresh read */
  s = load(f);
  o = *find(&s, f->o1);
  site_rec_fini(&s);
  o.enabled = 0;
  assert_int_equal(store_origin_update(f->env.store, &o), STORE_OK); /* no re-evaluation */
  assert_int_equal(store_op(f->env.store, keep_and_compare, &a), STORE_OK);
  assert_int_equal(a.result, STORE_NOT_FOUND); /* it switched: not kept */
  assert_int_equal(current_level(f), 2);
  assert_int_equal(store_op(f->env.store, keep_and_compare, &a), STORE_OK);
  assert_int_equal(a.result, STORE_OK); /* nothing to switch any more: kept again */
}

/* A site stranded on a level with no enabled origin (an older controld's crash) is switched by
   the start-up re-evaluation; a second pass changes nothing. */
static void test_reevaluate_all_repairs(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  struct origin_rec o;
  make_site(f, "auto", 3);
  s = load(f);
  o = *find(&s, f->o1);
  site_rec_fini(&s);
  o.enabled = 0;
  assert_int_equal(store_origin_update(f->env.store, &o), STORE_OK); /* no re-evaluation */
  assert_int_equal(current_level(f), 1);
  assert_int_equal(engine_reevaluate_all(&f->env), 0);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"no_enabled_origins\""), 1);
  assert_int_equal(engine_reevaluate_all(&f->env), 0);
  assert_int_equal(count_events(f, "level.switched", NULL), 1);
}

static void test_manual_switch_validation(void **state) {
  struct fx *f = *state;
  int64_t v0;
  struct site_rec s;
  make_site(f, "auto", 2);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 3), ENGINE_SWITCH_NO_ORIGIN);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id + 100, 1), ENGINE_SWITCH_NOT_FOUND);
  s = load(f);
  v0 = s.config_version;
  site_rec_fini(&s);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 1), ENGINE_SWITCH_OK);
  s = load(f);
  assert_int_equal(s.config_version, v0); /* already there: nothing published */
  site_rec_fini(&s);
  assert_int_equal(count_events(f, "level.switched", NULL), 0);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 2), ENGINE_SWITCH_OK);
  s = load(f);
  assert_int_equal(s.current_level, 2);
  assert_int_equal(s.config_version, v0 + 1);
  site_rec_fini(&s);
}

/* Maintenance by hand with auto failback: the operator's level is kept until they switch back;
   an automatic failover away from it ends the pin. */
/* The lines "event=level.switched" in the log file at path. */
static int logged_switches(const char *path) {
  FILE *fp = fopen(path, "r");
  char line[2048];
  int n = 0;
  if (!fp) return -1;
  while (fgets(line, sizeof line, fp))
    if (strstr(line, "event=level.switched ")) {
      /* store_site_event_locked's line: the type's level, the site, then the event's data */
      assert_non_null(strstr(line, "info"));
      assert_non_null(strstr(line, " site_id="));
      assert_non_null(strstr(line, " to_level=2"));
      n++;
    }
  fclose(fp);
  return n;
}

/* docs/design.md#events: a state change is logged when its transaction commits: a switch in a
   transaction that is rolled back logs nothing, the same switch committed logs once. */
static void test_state_changes_logged_after_commit(void **state) {
  struct fx *f = *state;
  char path[200], err[128];
  struct store_tx *tx;
  int saved = dup(2); /* stderr comes back at the end */
  assert_true(saved >= 0);
  make_site(f, "manual", 2);
  snprintf(path, sizeof path, "%s/log", f->dir);
  assert_int_equal(log_open_file(path, err, sizeof err), 0);
  log_set(LOG_TEXT, LOG_INFO);
  for (int i = 0; i < 3; i++) { /* three attempts that do not commit */
    assert_non_null(tx = store_health_begin(f->env.store));
    assert_int_equal(engine_switch_manual_locked(&f->env, tx, f->site_id, 2), ENGINE_SWITCH_OK);
    store_health_rollback(tx);
  }
  assert_int_equal(logged_switches(path), 0);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 2), ENGINE_SWITCH_OK);
  assert_int_equal(logged_switches(path), 1);
  assert_int_equal(count_events(f, "level.switched", NULL), 1);
  log_set(LOG_TEXT, LOG_WARN);
  dup2(saved, 2);
  close(saved);
  unlink(path);
}

static void test_manual_switch_pins_level(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  make_site(f, "auto", 3);
  round3(f, 1, 1, 1);
  round3(f, 1, 1, 1);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 2), ENGINE_SWITCH_OK);
  s = load(f);
  assert_int_equal(s.manual_pin, 1);
  site_rec_fini(&s);
  for (int i = 0; i < 4; i++)
    round3(f, 1, 1, 1);
  assert_int_equal(current_level(f), 2); /* level 1 healthy, yet no automatic failback */
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"auto_failback\""), 0);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 0); /* the operator knows */
  /* the pinned level dies: failover as usual, and the pin ends with it */
  for (int i = 0; i < 3; i++)
    round3(f, 1, 0, 1);
  assert_int_not_equal(current_level(f), 2);
  s = load(f);
  assert_int_equal(s.manual_pin, 0);
  site_rec_fini(&s);
  /* switching by hand to the first level never pins */
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 3), ENGINE_SWITCH_OK);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 1), ENGINE_SWITCH_OK);
  s = load(f);
  assert_int_equal(s.manual_pin, 0);
  assert_int_equal(s.current_level, 1);
  site_rec_fini(&s);
}

static int take_flags(void *arg, const struct fleet_site_row *row) {
  *(unsigned *)arg = row->state;
  return 0;
}

/* The fixture's site's stored FLEET_* flags. */
static unsigned fleet_flags(struct fx *f) {
  unsigned flags = ~0u;
  assert_int_equal(store_fleet_each_site(f->env.store, 1, take_flags, &flags), 0);
  return flags;
}

/* The stored fleet flags describe the site as it is after the evaluation acted: a pinned level
   with an earlier one healthy offers a failback; the automatic failover that ends the pin leaves
   an auto-failback site that no longer does. */
static void test_fleet_flags_follow_the_switch(void **state) {
  struct fx *f = *state;
  make_site(f, "auto", 3);
  round3(f, 1, 1, 1);
  round3(f, 1, 1, 1);
  assert_int_equal(fleet_flags(f), 0);
  assert_int_equal(engine_switch_manual(&f->env, f->site_id, 2), ENGINE_SWITCH_OK);
  assert_int_equal(fleet_flags(f), FLEET_ON_BACKUP | FLEET_FAILBACK_AVAILABLE);
  round3(f, 1, 1, 1);
  assert_int_equal(fleet_flags(f), FLEET_ON_BACKUP | FLEET_FAILBACK_AVAILABLE);
  for (int i = 0; i < 3; i++)
    round3(f, 1, 0, 1);
  assert_int_equal(current_level(f), 3);
  assert_int_equal(fleet_flags(f), FLEET_ON_BACKUP);
  round3(f, 1, 0, 1); /* unpinned, auto failback takes level 1 back */
  assert_int_equal(current_level(f), 1);
  assert_int_equal(fleet_flags(f), 0);
}

static void test_restart_keeps_state(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  int64_t v0;
  make_site(f, "manual", 2);
  for (int i = 0; i < 3; i++)
    round2(f, 0, 1);
  round2(f, 1, 1); /* o1 has one success pending */
  s = load(f);
  v0 = s.config_version;
  site_rec_fini(&s);
  store_close(&f->env.store);
  assert_int_equal(open_store(f), 0);
  assert_int_equal(engine_site_changed(&f->env, f->site_id), 0);
  s = load(f);
  assert_int_equal(s.current_level, 2);
  assert_int_equal(s.config_version, v0);
  assert_int_equal(find(&s, f->o1)->health, HEALTH_UNHEALTHY);
  assert_int_equal(find(&s, f->o1)->success_streak, 1);
  site_rec_fini(&s);
  round2(f, 1, 1); /* the streak carried over: healthy now, notice once */
  s = load(f);
  assert_int_equal(find(&s, f->o1)->health, HEALTH_HEALTHY);
  site_rec_fini(&s);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 1);
}

static void test_verdicts_pruned_and_next_probe(void **state) {
  struct fx *f = *state;
  struct verdict_rec *vr = NULL;
  struct site_rec s;
  int n = 0;
  f->env.suspect_interval_ms = 5000;
  make_site(f, "auto", 2);
  for (int i = 0; i < STORE_HEALTH_VERDICTS_KEEP + 5; i++)
    round2(f, 1, 1);
  assert_int_equal(store_health_verdicts(f->env.store, f->o1, 100, &vr, &n), STORE_OK);
  assert_int_equal(n, STORE_HEALTH_VERDICTS_KEEP);
  assert_true(vr[0].round_id > vr[1].round_id); /* newest first */
  assert_int_equal(vr[0].round_id, f->round);
  store_health_verdicts_free(vr, n);
  s = load(f);
  assert_int_equal(s.next_probe_at, s.last_probed_at + 30000); /* steady: the full interval */
  site_rec_fini(&s);
  round2(f, 0, 1); /* a failure pending on a healthy origin: due again sooner */
  s = load(f);
  assert_int_equal(s.next_probe_at, s.last_probed_at + 5000);
  site_rec_fini(&s);
}

static void test_next_probe_ms(void **state) {
  (void)state;
  assert_int_equal(engine_next_probe_ms(0, 30000, 0, 0), 30000);     /* the seed */
  assert_int_equal(engine_next_probe_ms(0, 30000, 0, 1), 30000);     /* fast re-probe off */
  assert_int_equal(engine_next_probe_ms(0, 30000, 5000, 1), 5000);   /* suspect */
  assert_int_equal(engine_next_probe_ms(0, 30000, 5000, 0), 30000);  /* steady */
  assert_int_equal(engine_next_probe_ms(1000, 5000, 0, 0), 1000);    /* own interval */
  assert_int_equal(engine_next_probe_ms(60000, 5000, 0, 0), 60000);  /* longer than the global */
  assert_int_equal(engine_next_probe_ms(1000, 5000, 3000, 1), 1000); /* suspect never slower */
  assert_int_equal(engine_next_probe_ms(60000, 5000, 3000, 1), 3000);
  assert_int_equal(engine_next_probe_ms(0, 0, 0, 0), 1);
}

/* The voters of a round: distinct, from the online set, all of them when there are few, the same
   for the same seed, and each node equally often over many rounds (no place in the list, such
   as being seen last, is favoured). */
static void test_pick_voters(void **state) {
  enum { N = 10, ROUNDS = 30000 };
  int64_t online[N], out[3];
  int chosen[N] = {0}, first[3];
  (void)state;
  for (int i = 0; i < 2; i++)
    online[i] = 100 + i;
  assert_int_equal(prober_pick_voters(online, 2, 7, out, 3), 2);
  assert_true((out[0] == 100 && out[1] == 101) || (out[0] == 101 && out[1] == 100));
  assert_int_equal(prober_pick_voters(online, 0, 7, out, 3), 0);
  for (uint64_t seed = 1; seed <= ROUNDS; seed++) {
    for (int i = 0; i < N; i++)
      online[i] = 100 + i;
    assert_int_equal(prober_pick_voters(online, N, seed, out, 3), 3);
    for (int a = 0; a < 3; a++) {
      assert_true(out[a] >= 100 && out[a] < 100 + N);
      for (int b = 0; b < a; b++)
        assert_true(out[a] != out[b]);
      chosen[out[a] - 100]++;
    }
    if (seed == 1)
      for (int a = 0; a < 3; a++)
        first[a] = (int)out[a];
  }
  for (int i = 0; i < N; i++) /* 9,000 expected each; 4.3 standard deviations is 360 */
    assert_true(chosen[i] > 9000 - 400 && chosen[i] < 9000 + 400);
  for (int i = 0; i < N; i++)
    online[i] = 100 + i;
  assert_int_equal(prober_pick_voters(online, N, 1, out, 3), 3);
  for (int a = 0; a < 3; a++)
    assert_int_equal(out[a], first[a]);
}

static void test_prober_wake(void **state) {
  (void)state;
  /* no site with its own interval: the global tick, rechecked every second */
  assert_false(prober_round_due(100, 5000, 0, 0, 0, 1000000));
  assert_true(prober_round_due(5000, 5000, 0, 0, 0, 1000000));
  assert_int_equal(prober_next_wake(100, 5000, 0, 0, 0, 1000000, 1000), 1100);
  assert_int_equal(prober_next_wake(4500, 5000, 0, 0, 0, 1000000, 1000), 5000);
  /* an own-interval site due in 300 ms wakes the thread then, and is due at its time */
  assert_int_equal(prober_next_wake(100, 5000, 0, 1, 1000300, 1000000, 1000), 400);
  assert_false(prober_round_due(100, 5000, 0, 1, 1000300, 1000000));
  assert_true(prober_round_due(400, 5000, 0, 1, 1000300, 1000300));
  /* overdue (never probed: 0) wakes at once, but never before not_before (no spinning) */
  assert_int_equal(prober_next_wake(100, 5000, 0, 1, 0, 1000000, 1000), 100);
  assert_int_equal(prober_next_wake(100, 5000, 150, 1, 0, 1000000, 1000), 150);
  assert_false(prober_round_due(100, 5000, 150, 1, 0, 1000000));
  assert_false(prober_round_due(5000, 5000, 5050, 0, 0, 1000000));
}

/* Options are stored and read back; a site's own interval sets its next probe. */
static void test_own_interval_and_options_stored(void **state) {
  struct fx *f = *state;
  struct site_rec s;
  char conflict[64];
  int64_t due = -1, min_int = -1;
  f->env.probe_interval_ms = 30000;
  make_site(f, "auto", 2);
  assert_int_equal(store_health_own_interval_due(f->env.store, &due, &min_int), 0);
  s = load(f);
  assert_true(hcheck_is_default(&s.hc));
  s.hc.interval_ms = 1000;
  s.hc.n_codes = 1;
  s.hc.codes[0].lo = 200;
  s.hc.codes[0].hi = 299;
  s.hc.level_min_healthy = 2;
  assert_int_equal(store_site_update(f->env.store, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  s = load(f);
  assert_int_equal(s.hc.interval_ms, 1000);
  assert_int_equal(s.hc.n_codes, 1);
  assert_int_equal(s.hc.codes[0].hi, 299);
  assert_int_equal(s.hc.level_min_healthy, 2);
  site_rec_fini(&s);
  assert_int_equal(store_health_own_interval_due(f->env.store, &due, &min_int), 1);
  assert_int_equal(due, 0); /* never probed: due now */
  assert_int_equal(min_int, 1000);
  round2(f, 1, 1);
  s = load(f);
  assert_int_equal(s.next_probe_at, s.last_probed_at + 1000);
  assert_int_equal(store_health_own_interval_due(f->env.store, &due, &min_int), 1);
  assert_int_equal(due, s.next_probe_at);
  /* back to the global interval: no longer an own-interval site */
  s.hc.interval_ms = 0;
  assert_int_equal(store_site_update(f->env.store, &s, conflict, sizeof conflict), STORE_OK);
  site_rec_fini(&s);
  assert_int_equal(store_health_own_interval_due(f->env.store, &due, &min_int), 0);
}

/* Verdicts older than a day go, whatever their count. */
static void test_verdicts_pruned_by_age(void **state) {
  struct fx *f = *state;
  struct verdict_rec *vr = NULL;
  int n = 0;
  make_site(f, "auto", 2);
  for (int i = 0; i < 3; i++)
    round2(f, 1, 1);
  f->now += STORE_HEALTH_VERDICTS_MAX_AGE_MS;
  round2(f, 1, 1);
  assert_int_equal(store_health_verdicts(f->env.store, f->o1, 100, &vr, &n), STORE_OK);
  assert_int_equal(n, 1);
  assert_int_equal(vr[0].round_id, f->round);
  store_health_verdicts_free(vr, n);
}

static void test_due_sites_order(void **state) {
  struct fx *f = *state;
  int64_t *ids = NULL;
  int n = 0;
  make_site(f, "auto", 2);
  assert_int_equal(store_health_due_sites(f->env.store, f->now, 10, &ids, &n), STORE_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], f->site_id);
  free(ids);
  round2(f, 1, 1);
  /* probed at now - 10: due again only after the interval */
  assert_int_equal(store_health_due_sites(f->env.store, f->now, 10, &ids, &n), STORE_OK);
  assert_int_equal(n, 0);
  free(ids);
  assert_int_equal(store_health_due_sites(f->env.store, f->now + 30000, 10, &ids, &n), STORE_OK);
  assert_int_equal(n, 1);
  free(ids);
}

/* ---- failover drills (docs/design.md, Drills) on the fake clock ---- */

/* Create a drill to level 2 starting at start_at; the engine's answer, the reason of a 409 in
 *reason, the record in *d. */
static enum engine_drill_rc drill_create_at(struct fx *f, int64_t duration_ms, int64_t start_at,
                                            const char **reason, struct drill_rec *d) {
  struct field_err fe;
  struct store_tx *tx;
  enum engine_drill_rc rc;
  memset(d, 0, sizeof *d);
  d->to_level = 2;
  d->duration_ms = duration_ms;
  d->max_failure_ratio = 0.05;
  d->min_requests = 20;
  d->start_at = start_at;
  d->created_at = f->now;
  *reason = NULL;
  tx = store_health_begin(f->env.store);
  assert_non_null(tx);
  rc = engine_drill_create_locked(&f->env, tx, f->site_id, d, "ops", &fe, reason);
  if (rc == ENGINE_DRILL_OK)
    assert_int_equal(store_health_commit(tx), 0);
  else
    store_health_rollback(tx);
  return rc;
}

/* The same, starting now. */
static enum engine_drill_rc drill_create(struct fx *f, int64_t duration_ms, const char **reason,
                                         struct drill_rec *d) {
  return drill_create_at(f, duration_ms, f->now, reason, d);
}

static struct drill_rec drill_get(struct fx *f, int64_t id) {
  struct drill_rec d;
  assert_int_equal(store_drill_get(f->env.store, id, &d), STORE_OK);
  return d;
}

/* The nodes report requests and failures of origin o2 (level 2) to the running drill. */
static void drill_report(struct fx *f, int64_t requests, int64_t failures) {
  struct store_tx *tx = store_health_begin(f->env.store);
  assert_non_null(tx);
  assert_int_equal(
      store_drill_observe_locked(tx, f->site_id, f->o2, requests, failures, requests * 7, requests),
      0);
  assert_int_equal(store_health_commit(tx), 0);
}

static void drill_tick(struct fx *f, int64_t step_ms) {
  f->now += step_ms;
  clock_set_fake_ms(f->now);
  assert_int_equal(engine_drill_tick(&f->env, f->now), 0);
}

static void test_drill_pass_abort_cancel(void **state) {
  struct fx *f = *state;
  struct drill_rec d, other;
  const char *reason;
  make_site(f, "auto", 2);
  /* levels not healthy yet: 409 level_unhealthy */
  assert_int_equal(drill_create(f, 60000, &reason, &d), ENGINE_DRILL_CONFLICT);
  assert_string_equal(reason, "level_unhealthy");
  round2(f, 1, 1);
  round2(f, 1, 1);
  /* a drill starts at once: the switch (reason drill), drill.started */
  assert_int_equal(drill_create(f, 60000, &reason, &d), ENGINE_DRILL_OK);
  d = drill_get(f, d.id);
  assert_int_equal(d.state, DRILL_RUNNING);
  assert_int_equal(d.from_level, 1);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"drill\""), 1);
  assert_int_equal(count_events(f, "drill.started", NULL), 1);
  assert_int_equal(drill_create(f, 60000, &reason, &other), ENGINE_DRILL_CONFLICT);
  assert_string_equal(reason, "drill_running");
  /* level 1 healthy: no automatic failback while the drill holds level 2 */
  drill_tick(f, 1000);
  assert_int_equal(engine_site_changed(&f->env, f->site_id), 0);
  assert_int_equal(current_level(f), 2);
  assert_int_equal(count_events(f, "origin.failback_available", NULL), 0);
  /* a clean window starts a new one; the end switches back: passed */
  drill_report(f, 30, 1);
  drill_tick(f, 1000);
  d = drill_get(f, d.id);
  assert_int_equal(d.state, DRILL_RUNNING);
  assert_int_equal(d.window_requests, 0);
  assert_int_equal(d.requests, 30);
  drill_tick(f, 58000);
  d = drill_get(f, d.id);
  assert_int_equal(d.state, DRILL_FINISHED);
  assert_int_equal(d.result, DRILL_PASSED);
  assert_int_equal(current_level(f), 1);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"drill\""), 2);
  assert_int_equal(count_events(f, "drill.finished", "\"result\":\"passed\""), 1);
  /* a bad backup: over the ratio once min_requests are in: aborted, back at once */
  assert_int_equal(drill_create(f, 600000, &reason, &d), ENGINE_DRILL_OK);
  drill_report(f, 10, 5); /* under min_requests */
  drill_tick(f, 1000);
  assert_int_equal(drill_get(f, d.id).state, DRILL_RUNNING);
  drill_report(f, 10, 1);
  drill_tick(f, 1000);
  d = drill_get(f, d.id);
  assert_int_equal(d.result, DRILL_ABORTED);
  assert_int_equal(d.failures, 6);
  assert_int_equal(current_level(f), 1);
  /* every level down during a drill: an incident opens, which cancels it (no switch back) */
  assert_int_equal(drill_create(f, 600000, &reason, &d), ENGINE_DRILL_OK);
  assert_int_equal(current_level(f), 2);
  round2(f, 0, 0);
  round2(f, 0, 0);
  round2(f, 0, 0);
  drill_tick(f, 1000);
  d = drill_get(f, d.id);
  assert_int_equal(d.result, DRILL_CANCELLED);
  assert_non_null(strstr(d.why, "incident"));
  assert_int_equal(count_events(f, "incident.opened", NULL), 1);
  assert_int_equal(count_events(f, "level.switched", "\"reason\":\"drill\""), 5);
  assert_int_equal(drill_create(f, 600000, &reason, &d), ENGINE_DRILL_CONFLICT);
  assert_string_equal(reason, "incident_open");
}

/* Heartbeat deltas saturate a drill's sums; a site keeps at most DRILL_SCHEDULED_MAX scheduled
   drills (the next create is refused too_many_drills and stores nothing); finished drills past
   their retention are pruned with their figures, live ones stay. */
static void test_drill_bounds_and_prune(void **state) {
  struct fx *f = *state;
  struct drill_rec d, more, *list = NULL;
  struct drill_origin *o = NULL;
  struct store_tx *tx;
  const char *reason;
  int n = 0, no = 0;
  int64_t big = INT64_MAX / 2; /* a node's counters are bounded here */
  make_site(f, "auto", 2);
  round2(f, 1, 1);
  round2(f, 1, 1);
  assert_int_equal(drill_create(f, 60000, &reason, &d), ENGINE_DRILL_OK);
  for (int i = 0; i < 3; i++) {
    tx = store_health_begin(f->env.store);
    assert_non_null(tx);
    assert_int_equal(store_drill_observe_locked(tx, f->site_id, f->o2, big, 0, big, big), 0);
    assert_int_equal(store_health_commit(tx), 0);
  }
  d = drill_get(f, d.id);
  assert_true(d.requests == DRILL_SUM_MAX);
  assert_true(d.window_requests == DRILL_SUM_MAX);
  assert_int_equal(store_drill_origins(f->env.store, d.id, &o, &no), STORE_OK);
  assert_int_equal(no, 1);
  assert_true(o[0].requests == DRILL_SUM_MAX);
  assert_true(o[0].latency_sum_ms == DRILL_SUM_MAX);
  assert_true(o[0].latency_count == DRILL_SUM_MAX);
  free(o);
  o = NULL;
  drill_tick(f, 61000);
  d = drill_get(f, d.id);
  assert_int_equal(d.state, DRILL_FINISHED);
  /* the scheduled queue's bound */
  for (int i = 0; i < DRILL_SCHEDULED_MAX; i++) {
    assert_int_equal(drill_create_at(f, 60000, f->now + 3600000 + i, &reason, &more),
                     ENGINE_DRILL_OK);
    assert_int_equal(drill_get(f, more.id).state, DRILL_SCHEDULED);
  }
  assert_int_equal(store_drill_list(f->env.store, f->site_id, 0, 100, &list, &n), STORE_OK);
  free(list);
  list = NULL;
  assert_int_equal(n, DRILL_SCHEDULED_MAX + 1);
  assert_int_equal(drill_create_at(f, 60000, f->now + 7200000, &reason, &more),
                   ENGINE_DRILL_CONFLICT);
  assert_string_equal(reason, "too_many_drills");
  assert_int_equal(store_drill_list(f->env.store, f->site_id, 0, 100, &list, &n), STORE_OK);
  free(list);
  list = NULL;
  assert_int_equal(n, DRILL_SCHEDULED_MAX + 1);
  /* retention: not yet past it, then past it; the scheduled ones stay */
  assert_true(store_drill_prune(f->env.store, d.finished_at) == 0);
  assert_true(store_drill_prune(f->env.store, d.finished_at + 1) == 1);
  assert_int_equal(store_drill_get(f->env.store, d.id, &more), STORE_NOT_FOUND);
  assert_int_equal(store_drill_origins(f->env.store, d.id, &o, &no), STORE_OK);
  assert_int_equal(no, 0);
  free(o);
  assert_int_equal(store_drill_list(f->env.store, f->site_id, 0, 100, &list, &n), STORE_OK);
  free(list);
  assert_int_equal(n, DRILL_SCHEDULED_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tally_nodes),
      cmocka_unit_test(test_tally_checkpoints_and_control),
      cmocka_unit_test(test_node_deadline),
      cmocka_unit_test(test_pick_voters),
      cmocka_unit_test(test_checkpoint_parse),
      cmocka_unit_test_setup_teardown(test_round_with_node_votes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failover_and_auto_failback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failback_hold, setup, teardown),
      cmocka_unit_test_setup_teardown(test_manual_failback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_all_levels_unhealthy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failover_prefers_healthy_then_unknown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_enabled_origins_switches_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_manual_switch_validation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_manual_switch_pins_level, setup, teardown),
      cmocka_unit_test_setup_teardown(test_state_changes_logged_after_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fleet_flags_follow_the_switch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_keeps_state, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verdicts_pruned_and_next_probe, setup, teardown),
      cmocka_unit_test_setup_teardown(test_due_sites_order, setup, teardown),
      cmocka_unit_test(test_next_probe_ms),
      cmocka_unit_test(test_prober_wake),
      cmocka_unit_test_setup_teardown(test_own_interval_and_options_stored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verdicts_pruned_by_age, setup, teardown),
      cmocka_unit_test_setup_teardown(test_change_and_reevaluation_are_one_transaction, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reevaluate_all_repairs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reevaluation_keeps_the_record, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drill_pass_abort_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drill_bounds_and_prune, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
