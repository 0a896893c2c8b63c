/* Unit tests for common/health: tally, origin machine, level health, level choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "health.h"

#define NOW 1000000000LL

/* A view with the given levels set; every other level empty. */
static void view(struct health_site_view *v, int current, enum health_failback fb) {
  health_view_init(v);
  v->current_level = current;
  v->failback = fb;
}

static void set_level(struct health_site_view *v, int level, enum health_state s, int64_t since) {
  v->level[level] = s;
  v->healthy_since_ms[level] = s == HEALTH_HEALTHY ? since : -1;
}

static void check_why(const struct health_decision *d) {
  assert_true(d->why[0] != '\0');
  assert_true(strlen(d->why) < HEALTH_WHY_MAX);
}

/* ---- strings ---- */

static void test_strings(void **state) {
  enum health_state s;
  enum health_verdict v;
  enum health_source src;
  enum health_failback fb;
  (void)state;
  assert_string_equal(health_state_to_string(HEALTH_UNKNOWN), "unknown");
  assert_string_equal(health_state_to_string(HEALTH_HEALTHY), "healthy");
  assert_string_equal(health_state_to_string(HEALTH_UNHEALTHY), "unhealthy");
  assert_string_equal(health_state_to_string(HEALTH_EMPTY), "empty");
  assert_int_equal(health_state_from_string("healthy", &s), 0);
  assert_int_equal(s, HEALTH_HEALTHY);
  assert_int_equal(health_state_from_string("unhealthy", &s), 0);
  assert_int_equal(s, HEALTH_UNHEALTHY);
  assert_int_equal(health_state_from_string("unknown", &s), 0);
  assert_int_equal(s, HEALTH_UNKNOWN);
  assert_int_equal(health_state_from_string("empty", &s), 0); /* a level's state reads back */
  assert_int_equal(s, HEALTH_EMPTY);
  s = HEALTH_HEALTHY;
  assert_int_equal(health_state_from_string("Healthy", &s), -1);
  assert_int_equal(health_state_from_string(NULL, &s), -1);
  assert_int_equal(s, HEALTH_HEALTHY);

  assert_string_equal(health_verdict_to_string(VERDICT_SUCCESS), "success");
  assert_string_equal(health_verdict_to_string(VERDICT_FAILURE), "failure");
  assert_string_equal(health_verdict_to_string(VERDICT_NONE), "");
  assert_int_equal(health_verdict_from_string("failure", &v), 0);
  assert_int_equal(v, VERDICT_FAILURE);
  assert_int_equal(health_verdict_from_string("success", &v), 0);
  assert_int_equal(v, VERDICT_SUCCESS);
  assert_int_equal(health_verdict_from_string("", &v), 0);
  assert_int_equal(v, VERDICT_NONE);
  assert_int_equal(health_verdict_from_string("ok", &v), -1);

  assert_string_equal(health_source_to_string(SOURCE_NODES), "nodes");
  assert_string_equal(health_source_to_string(SOURCE_CHECKPOINTS), "checkpoints");
  assert_string_equal(health_source_to_string(SOURCE_CONTROL), "control");
  assert_int_equal(health_source_from_string("checkpoints", &src), 0);
  assert_int_equal(src, SOURCE_CHECKPOINTS);
  assert_int_equal(health_source_from_string("nodes", &src), 0);
  assert_int_equal(src, SOURCE_NODES);
  assert_int_equal(health_source_from_string("control", &src), 0);
  assert_int_equal(src, SOURCE_CONTROL);
  assert_int_equal(health_source_from_string("node", &src), -1);

  assert_int_equal(health_failback_from_string("manual", &fb), 0);
  assert_int_equal(fb, HEALTH_FAILBACK_MANUAL);
  assert_int_equal(health_failback_from_string("auto", &fb), 0);
  assert_int_equal(fb, HEALTH_FAILBACK_AUTO);
  assert_int_equal(health_failback_from_string("automatic", &fb), -1);
  assert_string_equal(health_failback_to_string(HEALTH_FAILBACK_MANUAL), "manual");
  assert_string_equal(health_action_to_string(HEALTH_SWITCH), "switch");
  assert_string_equal(health_action_to_string(HEALTH_STAY), "stay");
  assert_string_equal(health_reason_to_string(HEALTH_REASON_AUTO_FAILOVER), "auto_failover");
  assert_string_equal(health_reason_to_string(HEALTH_REASON_AUTO_FAILBACK), "auto_failback");
  assert_string_equal(health_reason_to_string(HEALTH_REASON_MANUAL), "manual");
  assert_string_equal(health_reason_to_string(HEALTH_REASON_NO_ENABLED_ORIGINS),
                      "no_enabled_origins");
  assert_string_equal(health_reason_to_string(HEALTH_REASON_NONE), "");
}

/* Every word an enum's to_string writes reads back to the same value (one name table each). */
static void test_strings_round_trip(void **state) {
  (void)state;
  for (int i = HEALTH_UNKNOWN; i <= HEALTH_EMPTY; i++) {
    enum health_state s = (enum health_state) - 1;
    assert_int_equal(health_state_from_string(health_state_to_string((enum health_state)i), &s), 0);
    assert_int_equal(s, i);
  }
  for (int i = VERDICT_NONE; i <= VERDICT_FAILURE; i++) {
    enum health_verdict v = (enum health_verdict) - 1;
    assert_int_equal(
        health_verdict_from_string(health_verdict_to_string((enum health_verdict)i), &v), 0);
    assert_int_equal(v, i);
  }
  for (int i = SOURCE_NODES; i <= SOURCE_CONTROL; i++) {
    enum health_source v = (enum health_source) - 1;
    assert_int_equal(health_source_from_string(health_source_to_string((enum health_source)i), &v),
                     0);
    assert_int_equal(v, i);
  }
  for (int i = HEALTH_FAILBACK_AUTO; i <= HEALTH_FAILBACK_MANUAL; i++) {
    enum health_failback v = (enum health_failback) - 1;
    assert_int_equal(
        health_failback_from_string(health_failback_to_string((enum health_failback)i), &v), 0);
    assert_int_equal(v, i);
  }
  /* out of range: the documented fallback word */
  assert_string_equal(health_state_to_string((enum health_state)99), "unknown");
  assert_string_equal(health_source_to_string((enum health_source) - 1), "control");
  assert_string_equal(health_reason_to_string((enum health_reason)42), "");
}

/* ---- vote tally ---- */

static void test_tally(void **state) {
  (void)state;
  assert_int_equal(health_tally(0, 0), VERDICT_NONE);
  assert_int_equal(health_tally(1, 0), VERDICT_NONE);
  assert_int_equal(health_tally(0, 1), VERDICT_NONE);
  assert_int_equal(health_tally(1, 1), VERDICT_NONE);
  assert_int_equal(health_tally(2, 2), VERDICT_NONE);
  assert_int_equal(health_tally(2, 0), VERDICT_SUCCESS);
  assert_int_equal(health_tally(0, 2), VERDICT_FAILURE);
  assert_int_equal(health_tally(2, 1), VERDICT_SUCCESS);
  assert_int_equal(health_tally(1, 2), VERDICT_FAILURE);
  assert_int_equal(health_tally(3, 0), VERDICT_SUCCESS);
  assert_int_equal(health_tally(0, 3), VERDICT_FAILURE);
  assert_int_equal(health_tally(-1, 3), VERDICT_NONE);
  assert_int_equal(health_tally(3, -1), VERDICT_NONE);
}

static void test_tally_with_checkpoints(void **state) {
  (void)state;
  /* one node vote alone decides nothing; a checkpoint vote added makes two */
  assert_int_equal(health_tally(1 + 0, 0 + 0), VERDICT_NONE);
  assert_int_equal(health_tally(0 + 0, 1 + 1), VERDICT_FAILURE);
  /* nodes split 1-1, two checkpoints say success: 3-1 */
  assert_int_equal(health_tally(1 + 2, 1 + 0), VERDICT_SUCCESS);
  /* nodes 2-1 success, checkpoints 0-2: 2-3 failure */
  assert_int_equal(health_tally(2 + 0, 1 + 2), VERDICT_FAILURE);
  /* nodes 1-0, checkpoints 0-1: 1-1 */
  assert_int_equal(health_tally(1 + 0, 0 + 1), VERDICT_NONE);
}

/* ---- origin machine ---- */

static void test_origin_unknown_to_healthy_after_two(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 5);
  assert_int_equal(o.state, HEALTH_UNKNOWN);
  assert_int_equal(o.changed_at_ms, 5);
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 10), 0);
  assert_int_equal(o.state, HEALTH_UNKNOWN);
  assert_int_equal(o.success_streak, 1);
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 20), 1);
  assert_int_equal(o.state, HEALTH_HEALTHY);
  assert_int_equal(o.changed_at_ms, 20);
}

static void test_origin_unknown_to_unhealthy_after_three(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 10), 0);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 20), 0);
  assert_int_equal(o.state, HEALTH_UNKNOWN);
  assert_int_equal(o.failure_streak, 2);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 30), 1);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
  assert_int_equal(o.changed_at_ms, 30);
  /* more failures: no further change */
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 40), 0);
  assert_int_equal(o.changed_at_ms, 30);
}

static void test_origin_streak_reset(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 1);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 2);
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 3), 0);
  assert_int_equal(o.failure_streak, 0);
  assert_int_equal(o.success_streak, 1);
  /* two failures again: still not three in a row */
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 4);
  assert_int_equal(o.success_streak, 0);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 5), 0);
  assert_int_equal(o.state, HEALTH_UNKNOWN);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 6), 1);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
}

static void test_origin_healthy_stays_below_three_failures(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 1);
  health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 2);
  assert_int_equal(o.state, HEALTH_HEALTHY);
  /* success on a healthy origin keeps it healthy, no change reported */
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 3), 0);
  assert_int_equal(o.state, HEALTH_HEALTHY);
  assert_int_equal(o.changed_at_ms, 2);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 4), 0);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 5), 0);
  assert_int_equal(o.state, HEALTH_HEALTHY);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 6), 1);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
  /* back: two successes */
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 7), 0);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 8), 1);
  assert_int_equal(o.state, HEALTH_HEALTHY);
  assert_int_equal(o.changed_at_ms, 8);
}

static void test_origin_no_verdict_changes_nothing(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 1);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 2);
  assert_int_equal(health_origin_apply(&o, VERDICT_NONE, 2, 3, 3), 0);
  assert_int_equal(o.failure_streak, 2);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 4), 1);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
}

static void test_origin_threshold_one_and_below(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  assert_int_equal(health_origin_apply(&o, VERDICT_FAILURE, 0, 0, 1), 1);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 1, 1, 2), 1);
  assert_int_equal(o.state, HEALTH_HEALTHY);
}

static void test_origin_streak_saturates(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  o.state = HEALTH_HEALTHY;
  o.success_streak = 2147483647;
  assert_int_equal(health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 1), 0);
  assert_int_equal(o.success_streak, 2147483647);
}

static void test_origin_suspect(void **state) {
  struct health_origin o;
  (void)state;
  health_origin_init(&o, 0);
  assert_false(health_origin_suspect(&o));
  health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 1);
  assert_true(health_origin_suspect(&o)); /* unknown with a streak */
  health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 2);
  assert_false(health_origin_suspect(&o)); /* healthy, successes agree */
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 3);
  assert_true(health_origin_suspect(&o)); /* healthy, a failure pending */
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 4);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 5);
  assert_int_equal(o.state, HEALTH_UNHEALTHY);
  assert_false(health_origin_suspect(&o));
  health_origin_apply(&o, VERDICT_SUCCESS, 2, 3, 6);
  assert_true(health_origin_suspect(&o)); /* unhealthy, a success pending */
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 7);
  assert_false(health_origin_suspect(&o));
  health_origin_init(&o, 8);
  health_origin_apply(&o, VERDICT_FAILURE, 2, 3, 9);
  assert_true(health_origin_suspect(&o)); /* unknown with a failure streak */
}

/* ---- level health ---- */

static void test_level_healthy_while_any_origin_healthy(void **state) {
  struct health_level_origin o[] = {
      {1, 1, HEALTH_UNHEALTHY, 0},
      {1, 1, HEALTH_HEALTHY, 100},
      {1, 1, HEALTH_UNKNOWN, 0},
  };
  (void)state;
  assert_int_equal(health_level_of(o, 3, 1), HEALTH_HEALTHY);
  assert_int_equal(health_level_healthy_since(o, 3, 1), 100);
}

static void test_level_unknown_mix(void **state) {
  struct health_level_origin o[] = {
      {1, 1, HEALTH_UNHEALTHY, 0},
      {1, 1, HEALTH_UNKNOWN, 0},
      {2, 1, HEALTH_UNHEALTHY, 0},
      {2, 1, HEALTH_UNHEALTHY, 0},
  };
  (void)state;
  assert_int_equal(health_level_of(o, 4, 1), HEALTH_UNKNOWN);
  assert_int_equal(health_level_of(o, 4, 2), HEALTH_UNHEALTHY);
  assert_int_equal(health_level_healthy_since(o, 4, 1), -1);
}

static void test_level_disabled_origins_ignored(void **state) {
  struct health_level_origin o[] = {
      {1, 0, HEALTH_HEALTHY, 0}, /* disabled: does not make the level healthy */
      {1, 1, HEALTH_UNHEALTHY, 0}, {2, 0, HEALTH_HEALTHY, 0}, {3, 1, HEALTH_HEALTHY, 500},
      {3, 0, HEALTH_HEALTHY, 100}, /* disabled: its earlier since does not count */
  };
  (void)state;
  assert_int_equal(health_level_of(o, 5, 1), HEALTH_UNHEALTHY);
  assert_int_equal(health_level_of(o, 5, 2), HEALTH_EMPTY);
  assert_int_equal(health_level_of(o, 5, 3), HEALTH_HEALTHY);
  assert_int_equal(health_level_of(o, 5, 4), HEALTH_EMPTY);
  assert_int_equal(health_level_healthy_since(o, 5, 3), 500);
}

static void test_level_healthy_since_earliest(void **state) {
  struct health_level_origin o[] = {
      {2, 1, HEALTH_HEALTHY, 900},
      {2, 1, HEALTH_HEALTHY, 300},
      {2, 1, HEALTH_UNHEALTHY, 10},
  };
  (void)state;
  assert_int_equal(health_level_healthy_since(o, 3, 2), 300);
}

/* ---- level health with a quorum (level_min_healthy) ---- */

/* One row: the states of a level's three enabled origins, the quorum, the expected health. */
struct quorum_row {
  enum health_state a, b, c;
  int min_healthy;
  enum health_state want;
};

static void test_level_quorum_rows(void **state) {
  static const struct quorum_row rows[] = {
      /* quorum 1 = the seed's rule: any healthy, all unhealthy, else unknown */
      {HEALTH_HEALTHY, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 1, HEALTH_HEALTHY},
      {HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 1, HEALTH_UNHEALTHY},
      {HEALTH_UNKNOWN, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 1, HEALTH_UNKNOWN},
      /* below 1 acts as 1 */
      {HEALTH_HEALTHY, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 0, HEALTH_HEALTHY},
      {HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, -3, HEALTH_UNHEALTHY},
      /* quorum 2 of 3 */
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_UNHEALTHY, 2, HEALTH_HEALTHY},
      {HEALTH_HEALTHY, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 2, HEALTH_UNHEALTHY},
      {HEALTH_HEALTHY, HEALTH_UNKNOWN, HEALTH_UNHEALTHY, 2, HEALTH_UNKNOWN},
      {HEALTH_UNKNOWN, HEALTH_UNKNOWN, HEALTH_UNHEALTHY, 2, HEALTH_UNKNOWN},
      {HEALTH_UNKNOWN, HEALTH_UNHEALTHY, HEALTH_UNHEALTHY, 2, HEALTH_UNHEALTHY},
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_HEALTHY, 2, HEALTH_HEALTHY},
      /* quorum 3 of 3 */
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_UNKNOWN, 3, HEALTH_UNKNOWN},
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_UNHEALTHY, 3, HEALTH_UNHEALTHY},
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_HEALTHY, 3, HEALTH_HEALTHY},
      /* more than the level has: all of them */
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_HEALTHY, 5, HEALTH_HEALTHY},
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_UNHEALTHY, 5, HEALTH_UNHEALTHY},
      {HEALTH_HEALTHY, HEALTH_HEALTHY, HEALTH_UNKNOWN, 5, HEALTH_UNKNOWN},
  };
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct health_level_origin o[] = {
        {1, 1, rows[i].a, 10},
        {1, 1, rows[i].b, 20},
        {1, 1, rows[i].c, 30},
        {2, 1, HEALTH_HEALTHY, 5}, /* another level: never counted */
    };
    enum health_state got = health_level_of_quorum(o, 4, 1, rows[i].min_healthy);
    if (got != rows[i].want) fail_msg("row %zu: got %d want %d", i, (int)got, (int)rows[i].want);
    if (rows[i].min_healthy <= 1)
      assert_int_equal(health_level_of(o, 4, 1), got); /* 1 is the seed's rule exactly */
  }
}

static void test_level_quorum_disabled_and_small_levels(void **state) {
  struct health_level_origin o[] = {
      {1, 1, HEALTH_HEALTHY, 10},
      {1, 0, HEALTH_HEALTHY, 20}, /* disabled: neither counts nor raises the bar */
      {2, 0, HEALTH_HEALTHY, 20},
  };
  (void)state;
  /* one enabled origin with quorum 2: it alone decides */
  assert_int_equal(health_level_of_quorum(o, 3, 1, 2), HEALTH_HEALTHY);
  o[0].state = HEALTH_UNHEALTHY;
  assert_int_equal(health_level_of_quorum(o, 3, 1, 2), HEALTH_UNHEALTHY);
  assert_int_equal(health_level_of_quorum(o, 3, 2, 2), HEALTH_EMPTY);
}

static void test_level_quorum_healthy_since(void **state) {
  struct health_level_origin o[] = {
      {1, 1, HEALTH_HEALTHY, 900},
      {1, 1, HEALTH_HEALTHY, 300},
      {1, 1, HEALTH_HEALTHY, 600},
      {1, 1, HEALTH_UNHEALTHY, 1},
  };
  (void)state;
  assert_int_equal(health_level_healthy_since_quorum(o, 4, 1, 1), 300);
  assert_int_equal(health_level_healthy_since_quorum(o, 4, 1, 2), 600);
  assert_int_equal(health_level_healthy_since_quorum(o, 4, 1, 3), 900);
  assert_int_equal(health_level_healthy_since_quorum(o, 4, 1, 4), -1); /* not healthy */
  o[1].healthy_since_ms = 900;                                         /* ties */
  assert_int_equal(health_level_healthy_since_quorum(o, 4, 1, 2), 900);
}

static void test_view_fill_quorum_switches(void **state) {
  struct health_site_view v;
  struct health_decision d;
  struct health_level_origin o[] = {
      {1, 1, HEALTH_HEALTHY, 0}, {1, 1, HEALTH_UNHEALTHY, 0}, {1, 1, HEALTH_UNHEALTHY, 0},
      {2, 1, HEALTH_HEALTHY, 0}, {2, 1, HEALTH_HEALTHY, 0},
  };
  (void)state;
  health_view_init(&v);
  assert_int_equal(v.level_min_healthy, 1);
  health_view_fill(&v, o, 5);
  assert_int_equal(health_decide(&v, 1000, &d), HEALTH_STAY); /* one healthy origin is enough */
  v.level_min_healthy = 2;
  health_view_fill(&v, o, 5);
  assert_int_equal(v.level[1], HEALTH_UNHEALTHY);
  assert_int_equal(health_decide(&v, 1000, &d), HEALTH_SWITCH);
  assert_int_equal(d.to_level, 2);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
}

static void test_view_fill_gaps(void **state) {
  struct health_site_view v;
  struct health_level_origin o[] = {
      {1, 1, HEALTH_UNHEALTHY, 0},
      {3, 1, HEALTH_HEALTHY, 42},
      {17, 1, HEALTH_HEALTHY, 0}, /* out of range: ignored */
  };
  (void)state;
  health_view_init(&v);
  v.current_level = 1;
  v.failback = HEALTH_FAILBACK_MANUAL;
  health_view_fill(&v, o, 3);
  assert_int_equal(v.current_level, 1);
  assert_int_equal(v.failback, HEALTH_FAILBACK_MANUAL);
  assert_int_equal(v.level[1], HEALTH_UNHEALTHY);
  assert_int_equal(v.level[2], HEALTH_EMPTY);
  assert_int_equal(v.level[3], HEALTH_HEALTHY);
  assert_int_equal(v.healthy_since_ms[3], 42);
  for (int l = 4; l <= HEALTH_MAX_LEVEL; l++)
    assert_int_equal(v.level[l], HEALTH_EMPTY);
}

/* ---- level choice ---- */

static void test_stay_on_healthy(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_HEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  assert_int_equal(health_decide(&v, NOW, &d), HEALTH_STAY);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_NONE);
  assert_false(d.all_unhealthy || d.raise_all_unhealthy || d.raise_recovered || d.incident_open);
  assert_false(d.failback_available || d.emit_failback_available);
  check_why(&d);
}

static void test_all_unknown_stays(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNKNOWN, 0);
  set_level(&v, 2, HEALTH_UNKNOWN, 0);
  set_level(&v, 3, HEALTH_UNKNOWN, 0);
  assert_int_equal(health_decide(&v, NOW, &d), HEALTH_STAY);
  assert_int_equal(d.to_level, 1);
  assert_false(d.all_unhealthy);
  assert_false(d.raise_all_unhealthy);
  assert_non_null(strstr(d.why, "unknown"));
  check_why(&d);
}

static void test_failover_to_next_healthy(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_HEALTHY, NOW - 1000);
  assert_int_equal(health_decide(&v, NOW, &d), HEALTH_SWITCH);
  assert_int_equal(d.to_level, 2);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
  assert_string_equal(d.why, "level 1 is unhealthy; switching to level 2 (healthy)");
}

static void test_failover_gap_levels_1_and_3(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 3, HEALTH_UNKNOWN, 0);
  assert_int_equal(health_decide(&v, NOW, &d), HEALTH_SWITCH);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
  check_why(&d);
}

static void test_failover_skips_unhealthy_levels(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  set_level(&v, 3, HEALTH_UNHEALTHY, 0);
  set_level(&v, 4, HEALTH_HEALTHY, 0);
  set_level(&v, 5, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 4);
  check_why(&d);
}

static void test_failover_prefers_healthy_over_nearer_unknown(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNKNOWN, 0);
  set_level(&v, 3, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
}

static void test_failover_to_unknown_when_no_healthy(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  set_level(&v, 3, HEALTH_UNKNOWN, 0);
  set_level(&v, 4, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
  assert_string_equal(d.why, "level 1 is unhealthy; switching to level 3 (unknown)");
  assert_false(d.all_unhealthy);
}

static void test_failover_lower_only_after_higher(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  /* manual mode: level 1 healthy below, level 4 only unknown above: above wins */
  view(&v, 3, HEALTH_FAILBACK_MANUAL);
  set_level(&v, 1, HEALTH_HEALTHY, 0);
  set_level(&v, 2, HEALTH_HEALTHY, 0);
  set_level(&v, 3, HEALTH_UNHEALTHY, 0);
  set_level(&v, 4, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 4);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
  /* and level 1 is reported as available for a manual failback */
  assert_true(d.failback_available);
  assert_int_equal(d.failback_level, 1);
  check_why(&d);

  /* nothing live above: the lowest healthy level below */
  set_level(&v, 4, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
  assert_false(d.failback_available);
  assert_non_null(strstr(d.why, "no level above it is live"));

  /* below: healthy before unknown */
  set_level(&v, 1, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 2);

  /* below, unknown only */
  set_level(&v, 2, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
}

static void test_failover_current_unhealthy_auto_failback_wins(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_HEALTHY, NOW - 5000);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  set_level(&v, 3, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILBACK);
  check_why(&d);

  /* the hold not yet met: failover up to level 3 instead */
  v.failback_hold_ms = 30000;
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILOVER);
}

static void test_all_unhealthy_stays_and_raises_once(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  set_level(&v, 4, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_int_equal(d.to_level, 2);
  assert_true(d.all_unhealthy);
  assert_true(d.raise_all_unhealthy);
  assert_false(d.raise_recovered);
  assert_true(d.incident_open);
  check_why(&d);

  /* next round, flag stored: no second event */
  v.all_unhealthy_raised = d.incident_open;
  health_decide(&v, NOW + 30000, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_true(d.all_unhealthy);
  assert_false(d.raise_all_unhealthy);
  assert_true(d.incident_open);
  check_why(&d);
}

static void test_recovered_raised_once(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  v.all_unhealthy_raised = 1;

  /* a level merely unknown: the incident goes on, no event, switch to the live level */
  set_level(&v, 2, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_false(d.raise_recovered);
  assert_false(d.raise_all_unhealthy);
  assert_true(d.incident_open);
  assert_int_equal(d.to_level, 2);

  /* level 2 healthy: recovered */
  set_level(&v, 2, HEALTH_HEALTHY, NOW);
  health_decide(&v, NOW, &d);
  assert_true(d.raise_recovered);
  assert_false(d.raise_all_unhealthy);
  assert_false(d.incident_open);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 2);
  check_why(&d);

  /* flag cleared: not raised again */
  v.all_unhealthy_raised = d.incident_open;
  v.current_level = d.to_level;
  health_decide(&v, NOW + 30000, &d);
  assert_false(d.raise_recovered);
  assert_false(d.incident_open);
  assert_int_equal(d.action, HEALTH_STAY);
}

static void test_all_unhealthy_raises_again_for_new_incident(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_true(d.raise_all_unhealthy);
  v.all_unhealthy_raised = d.incident_open;
  set_level(&v, 1, HEALTH_HEALTHY, NOW);
  health_decide(&v, NOW, &d);
  assert_true(d.raise_recovered);
  v.all_unhealthy_raised = d.incident_open;
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_true(d.raise_all_unhealthy);
}

static void test_no_enabled_origins_switch(void **state) {
  struct health_site_view v;
  struct health_decision d;
  struct health_level_origin o[] = {
      {1, 1, HEALTH_HEALTHY, 0},
      {2, 1, HEALTH_UNKNOWN, 0},
      {3, 1, HEALTH_HEALTHY, 0},
  };
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  health_view_fill(&v, o, 3);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);

  /* the operator disables level 1's only origin */
  o[0].enabled = 0;
  health_view_fill(&v, o, 3);
  assert_int_equal(v.level[1], HEALTH_EMPTY);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
  assert_int_equal(d.to_level, 3); /* healthy before unknown */
  assert_string_equal(d.why, "level 1 has no enabled origin; switching to level 3 (healthy)");
}

static void test_no_enabled_origins_order(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  /* current 2 emptied; 1 healthy below, 3 unknown above: above first */
  view(&v, 2, HEALTH_FAILBACK_MANUAL);
  set_level(&v, 1, HEALTH_HEALTHY, 0);
  set_level(&v, 3, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 3);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
  assert_true(d.failback_available);
  assert_int_equal(d.failback_level, 1);

  /* same in auto mode: the earlier healthy level is where failback would go anyway */
  v.failback = HEALTH_FAILBACK_AUTO;
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
  assert_false(d.failback_available);

  /* nothing live: any non-empty level, higher first */
  view(&v, 2, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 5, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 5);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
  assert_true(d.all_unhealthy);
  assert_true(d.raise_all_unhealthy);
  check_why(&d);

  /* then lower */
  set_level(&v, 5, HEALTH_EMPTY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
}

static void test_all_levels_empty_stays(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 1, HEALTH_FAILBACK_AUTO);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_int_equal(d.to_level, 1);
  assert_false(d.all_unhealthy);
  assert_false(d.raise_all_unhealthy);
  check_why(&d);
}

static void test_current_level_out_of_range(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2147483647, HEALTH_FAILBACK_AUTO);
  set_level(&v, 2, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 2);
  assert_int_equal(d.reason, HEALTH_REASON_NO_ENABLED_ORIGINS);
  v.current_level = -2147483647 - 1;
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 2);
  v.current_level = 0;
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 2);
  check_why(&d);
}

static void test_auto_failback_at_once(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 3, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_HEALTHY, NOW);
  set_level(&v, 2, HEALTH_HEALTHY, NOW - 100000);
  set_level(&v, 3, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 1); /* the first such level */
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILBACK);
  assert_false(d.failback_available);
  assert_false(d.emit_failback_available);
  assert_string_equal(d.why, "level 1 is healthy again; switching back from level 3");

  /* current level unknown: failback too */
  set_level(&v, 3, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILBACK);
}

static void test_auto_failback_ignores_unknown_earlier(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_AUTO);
  set_level(&v, 1, HEALTH_UNKNOWN, 0);
  set_level(&v, 2, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_string_equal(d.why, "level 2 is healthy; staying");
}

static void test_auto_failback_hold(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_AUTO);
  v.failback_hold_ms = 30000;
  set_level(&v, 1, HEALTH_HEALTHY, NOW - 3000);
  set_level(&v, 2, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_int_equal(d.to_level, 2);
  assert_string_equal(d.why, "staying on level 2: level 1 healthy for 3s, hold 30s");

  /* one ms short */
  health_decide(&v, NOW - 3000 + 29999, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  check_why(&d);

  /* elapsed exactly */
  health_decide(&v, NOW - 3000 + 30000, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 1);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILBACK);
  assert_string_equal(d.why, "level 1 healthy for 30s, hold 30s; switching back from level 2");

  /* healthy_since in the future counts as not yet healthy long enough */
  set_level(&v, 1, HEALTH_HEALTHY, NOW + 5000);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
}

static void test_auto_failback_hold_picks_first_qualifying(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 3, HEALTH_FAILBACK_AUTO);
  v.failback_hold_ms = 60000;
  set_level(&v, 1, HEALTH_HEALTHY, NOW - 1000);   /* hold still running */
  set_level(&v, 2, HEALTH_HEALTHY, NOW - 120000); /* hold met */
  set_level(&v, 3, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_SWITCH);
  assert_int_equal(d.to_level, 2);
  assert_int_equal(d.reason, HEALTH_REASON_AUTO_FAILBACK);
}

static void test_manual_failback_notice_once(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_MANUAL);
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  set_level(&v, 2, HEALTH_HEALTHY, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_false(d.failback_available);
  assert_false(d.emit_failback_available);
  assert_int_equal(d.failback_level, 0);
  v.failback_notified = d.failback_notified_next;

  /* level 1 recovers: stay, notify */
  set_level(&v, 1, HEALTH_HEALTHY, NOW);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_int_equal(d.to_level, 2);
  assert_true(d.failback_available);
  assert_int_equal(d.failback_level, 1);
  assert_true(d.emit_failback_available);
  assert_true(d.failback_notified_next);
  assert_non_null(strstr(d.why, "manual failback"));
  check_why(&d);
  v.failback_notified = d.failback_notified_next;

  /* next round: still available, no second notice */
  health_decide(&v, NOW + 30000, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_true(d.failback_available);
  assert_int_equal(d.failback_level, 1);
  assert_false(d.emit_failback_available);
  v.failback_notified = d.failback_notified_next;

  /* level 1 fails again, then recovers: a new recovery, a new notice */
  set_level(&v, 1, HEALTH_UNHEALTHY, 0);
  health_decide(&v, NOW + 60000, &d);
  assert_false(d.failback_available);
  assert_false(d.failback_notified_next);
  v.failback_notified = d.failback_notified_next;
  set_level(&v, 1, HEALTH_HEALTHY, NOW + 90000);
  health_decide(&v, NOW + 90000, &d);
  assert_true(d.emit_failback_available);
}

static void test_manual_failback_ignores_hold(void **state) {
  struct health_site_view v;
  struct health_decision d;
  (void)state;
  view(&v, 2, HEALTH_FAILBACK_MANUAL);
  v.failback_hold_ms = 600000;
  set_level(&v, 1, HEALTH_HEALTHY, NOW);
  set_level(&v, 2, HEALTH_UNKNOWN, 0);
  health_decide(&v, NOW, &d);
  assert_int_equal(d.action, HEALTH_STAY);
  assert_true(d.failback_available);
  assert_true(d.emit_failback_available);
}

static void test_why_non_empty_everywhere(void **state) {
  struct health_site_view v;
  struct health_decision d;
  const enum health_state states[] = {HEALTH_UNKNOWN, HEALTH_HEALTHY, HEALTH_UNHEALTHY,
                                      HEALTH_EMPTY};
  (void)state;
  /* every combination of 3 levels x 4 states x current 1..3 x mode x hold x flags */
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 4; c++)
        for (int cur = 1; cur <= 3; cur++)
          for (int mode = 0; mode < 2; mode++)
            for (int hold = 0; hold < 2; hold++)
              for (int flags = 0; flags < 4; flags++) {
                view(&v, cur, mode ? HEALTH_FAILBACK_MANUAL : HEALTH_FAILBACK_AUTO);
                v.failback_hold_ms = hold ? 30000 : 0;
                v.all_unhealthy_raised = flags & 1;
                v.failback_notified = (flags >> 1) & 1;
                set_level(&v, 1, states[a], NOW - 10000);
                set_level(&v, 2, states[b], NOW - 10000);
                set_level(&v, 3, states[c], NOW - 10000);
                health_decide(&v, NOW, &d);
                check_why(&d);
                /* invariants */
                if (d.action == HEALTH_STAY) {
                  assert_int_equal(d.to_level, cur);
                  assert_int_equal(d.reason, HEALTH_REASON_NONE);
                } else {
                  assert_int_not_equal(d.to_level, cur);
                  assert_int_not_equal(v.level[d.to_level], HEALTH_EMPTY);
                  assert_int_not_equal(d.reason, HEALTH_REASON_NONE);
                  assert_int_not_equal(d.reason, HEALTH_REASON_MANUAL);
                }
                /* a dead or empty level is never kept when a live one exists */
                int live = states[a] == HEALTH_HEALTHY || states[a] == HEALTH_UNKNOWN ||
                           states[b] == HEALTH_HEALTHY || states[b] == HEALTH_UNKNOWN ||
                           states[c] == HEALTH_HEALTHY || states[c] == HEALTH_UNKNOWN;
                enum health_state to = v.level[d.to_level];
                if (live) assert_true(to == HEALTH_HEALTHY || to == HEALTH_UNKNOWN);
                if (d.raise_all_unhealthy) assert_false(v.all_unhealthy_raised);
                if (d.raise_recovered) assert_true(v.all_unhealthy_raised);
                if (d.emit_failback_available) assert_false(v.failback_notified);
                if (!mode) assert_false(d.failback_available);
                assert_int_equal(d.failback_notified_next, d.failback_available);
              }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strings),
      cmocka_unit_test(test_strings_round_trip),
      cmocka_unit_test(test_tally),
      cmocka_unit_test(test_tally_with_checkpoints),
      cmocka_unit_test(test_origin_unknown_to_healthy_after_two),
      cmocka_unit_test(test_origin_unknown_to_unhealthy_after_three),
      cmocka_unit_test(test_origin_streak_reset),
      cmocka_unit_test(test_origin_healthy_stays_below_three_failures),
      cmocka_unit_test(test_origin_no_verdict_changes_nothing),
      cmocka_unit_test(test_origin_threshold_one_and_below),
      cmocka_unit_test(test_origin_streak_saturates),
      cmocka_unit_test(test_origin_suspect),
      cmocka_unit_test(test_level_healthy_while_any_origin_healthy),
      cmocka_unit_test(test_level_unknown_mix),
      cmocka_unit_test(test_level_disabled_origins_ignored),
      cmocka_unit_test(test_level_healthy_since_earliest),
      cmocka_unit_test(test_view_fill_gaps),
      cmocka_unit_test(test_stay_on_healthy),
      cmocka_unit_test(test_all_unknown_stays),
      cmocka_unit_test(test_failover_to_next_healthy),
      cmocka_unit_test(test_failover_gap_levels_1_and_3),
      cmocka_unit_test(test_failover_skips_unhealthy_levels),
      cmocka_unit_test(test_failover_prefers_healthy_over_nearer_unknown),
      cmocka_unit_test(test_failover_to_unknown_when_no_healthy),
      cmocka_unit_test(test_failover_lower_only_after_higher),
      cmocka_unit_test(test_failover_current_unhealthy_auto_failback_wins),
      cmocka_unit_test(test_all_unhealthy_stays_and_raises_once),
      cmocka_unit_test(test_recovered_raised_once),
      cmocka_unit_test(test_all_unhealthy_raises_again_for_new_incident),
      cmocka_unit_test(test_no_enabled_origins_switch),
      cmocka_unit_test(test_no_enabled_origins_order),
      cmocka_unit_test(test_all_levels_empty_stays),
      cmocka_unit_test(test_current_level_out_of_range),
      cmocka_unit_test(test_auto_failback_at_once),
      cmocka_unit_test(test_auto_failback_ignores_unknown_earlier),
      cmocka_unit_test(test_auto_failback_hold),
      cmocka_unit_test(test_auto_failback_hold_picks_first_qualifying),
      cmocka_unit_test(test_manual_failback_notice_once),
      cmocka_unit_test(test_manual_failback_ignores_hold),
      cmocka_unit_test(test_why_non_empty_everywhere),
      cmocka_unit_test(test_level_quorum_rows),
      cmocka_unit_test(test_level_quorum_disabled_and_small_levels),
      cmocka_unit_test(test_level_quorum_healthy_since),
      cmocka_unit_test(test_view_fill_quorum_switches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
