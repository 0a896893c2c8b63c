/* test_incident — the incident rules (controld/incident.c, docs/design.md#incidents), row by row:
   open, absorb, reopen within the quiet time, mitigate, unmitigate, resolve after the quiet time,
   manual failback left on the backup, all levels down, a switch during it, the operator's
   resolution, and the propagation and impact figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "incident.h"

#define QUIET 300000

static struct incident_view view(int level, int healthy, int failed, int all) {
  struct incident_view v = {level, healthy, failed, all};
  return v;
}

/* An outage of level 1: opens on the failed origin, is mitigated by the switch to 2, is resolved
   QUIET after the failback with the origin healthy, not before. */
static void test_outage_then_auto_failback(void **state) {
  struct incident_rec r;
  struct incident_view v;
  (void)state;
  memset(&r, 0, sizeof r);
  assert_int_equal(
      incident_trigger_at(&r, 0, 7, "shop", INCIDENT_TRIGGER_ORIGIN, 1, 900, 1000, QUIET),
      INCIDENT_OPENED);
  assert_int_equal(r.state, INCIDENT_OPEN);
  assert_int_equal(r.opened_level, 1);
  assert_int_equal(r.first_failure_at, 900);
  assert_string_equal(r.levels_served, "1");
  r.id = 3;
  /* the switch in the same evaluation triggers again: absorbed */
  assert_int_equal(
      incident_trigger_at(&r, 1, 7, "shop", INCIDENT_TRIGGER_SWITCH, 1, 0, 1000, QUIET),
      INCIDENT_SAME);
  incident_switched(&r, 2, 1000);
  assert_string_equal(r.levels_served, "1,2");
  assert_int_equal(r.switched_at, 1000);
  v = view(2, 1, 1, 0);
  assert_int_equal(incident_evaluate(&r, &v, 1000, QUIET), INCIDENT_MITIGATED_AT);
  assert_int_equal(r.mitigated_at, 1000);
  assert_int_equal(incident_evaluate(&r, &v, 5000, QUIET), INCIDENT_SAME);
  /* failback: on level 1 again, the failed origin healthy: the quiet time starts */
  incident_switched(&r, 1, 60000);
  assert_string_equal(r.levels_served, "1,2");
  assert_int_equal(r.switched_at, 1000); /* the first switch stays */
  v = view(1, 1, 0, 0);
  assert_int_equal(incident_evaluate(&r, &v, 60000, QUIET), INCIDENT_SAME);
  assert_int_equal(r.clear_since, 60000);
  assert_int_equal(incident_evaluate(&r, &v, 60000 + QUIET - 1, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &v, 60000 + QUIET, QUIET), INCIDENT_RESOLVED_AT);
  assert_int_equal(r.state, INCIDENT_RESOLVED);
  assert_int_equal(r.resolved_at, 60000 + QUIET);
  {
    struct incident_figures f;
    incident_figures(&r, &f);
    assert_int_equal(f.detect_ms, 100);
    assert_int_equal(f.switch_ms, 0);
    assert_int_equal(f.mitigate_ms, 0);
    assert_int_equal(f.resolve_ms, 59000 + QUIET);
  }
  /* resolved: evaluations change nothing */
  assert_int_equal(incident_evaluate(&r, &v, 10 * QUIET, QUIET), INCIDENT_SAME);
}

/* A flap inside the quiet time: the clear time starts again, and a trigger shortly after the
   resolution reopens the same incident; one after the quiet time opens a new one. */
static void test_flap_inside_quiet_time(void **state) {
  struct incident_rec r;
  struct incident_view clear = view(1, 1, 0, 0), bad = view(1, 0, 1, 0);
  (void)state;
  memset(&r, 0, sizeof r);
  incident_trigger_at(&r, 0, 1, "a", INCIDENT_TRIGGER_ORIGIN, 1, 0, 1000, QUIET);
  r.id = 1;
  assert_int_equal(r.first_failure_at, 1000); /* unknown: the opening */
  assert_int_equal(incident_evaluate(&r, &clear, 2000, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &bad, 3000, QUIET), INCIDENT_SAME); /* flap */
  assert_int_equal(r.clear_since, 0);
  assert_int_equal(incident_evaluate(&r, &clear, 4000, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &clear, 2000 + QUIET, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &clear, 4000 + QUIET, QUIET), INCIDENT_RESOLVED_AT);
  assert_int_equal(incident_trigger_at(&r, 1, 1, "a", INCIDENT_TRIGGER_ORIGIN, 1, 0,
                                       4000 + 2 * QUIET - 1, QUIET),
                   INCIDENT_REOPENED);
  assert_int_equal(r.id, 1);
  assert_int_equal(r.state, INCIDENT_OPEN);
  assert_int_equal(r.reopened, 1);
  assert_int_equal(r.resolved_at, 0);
  assert_int_equal(incident_evaluate(&r, &clear, 5000 + 2 * QUIET, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &clear, 5000 + 3 * QUIET, QUIET), INCIDENT_RESOLVED_AT);
  assert_int_equal(
      incident_trigger_at(&r, 1, 1, "a", INCIDENT_TRIGGER_ORIGIN, 1, 0, 5000 + 4 * QUIET, QUIET),
      INCIDENT_OPENED);
  assert_int_equal(r.id, 0);
  assert_int_equal(r.reopened, 0);
}

/* Manual failback: the backup level healthy and the primary recovered, the incident stays
   mitigated until the operator switches back. */
static void test_manual_failback_stays_mitigated(void **state) {
  struct incident_rec r;
  struct incident_view on_backup = view(2, 1, 0, 0);
  (void)state;
  memset(&r, 0, sizeof r);
  incident_trigger_at(&r, 0, 1, "a", INCIDENT_TRIGGER_ORIGIN, 1, 0, 0, QUIET);
  r.id = 1;
  incident_switched(&r, 2, 10);
  assert_int_equal(incident_evaluate(&r, &on_backup, 10, QUIET), INCIDENT_MITIGATED_AT);
  for (int64_t t = 10; t < 100 * QUIET; t += QUIET / 2)
    assert_int_equal(incident_evaluate(&r, &on_backup, t, QUIET), INCIDENT_SAME);
  assert_int_equal(r.state, INCIDENT_MITIGATED);
  incident_switched(&r, 1, 100 * QUIET);
  struct incident_view back = view(1, 1, 0, 0);
  assert_int_equal(incident_evaluate(&r, &back, 100 * QUIET, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &back, 101 * QUIET, QUIET), INCIDENT_RESOLVED_AT);
}

/* Every level down: opens (trigger all_levels_unhealthy), not mitigated while all are down, back
   to open when the level serving it fails too, not resolved while a failed origin is down. */
static void test_all_levels_down(void **state) {
  struct incident_rec r;
  struct incident_view all = view(1, 0, 2, 1), backup = view(2, 1, 1, 0),
                       backup_down = view(2, 0, 2, 0), back = view(1, 1, 1, 0);
  (void)state;
  memset(&r, 0, sizeof r);
  assert_int_equal(incident_trigger_at(&r, 0, 1, "a", INCIDENT_TRIGGER_ALL_DOWN, 1, 0, 0, QUIET),
                   INCIDENT_OPENED);
  assert_int_equal(r.trigger, INCIDENT_TRIGGER_ALL_DOWN);
  r.id = 1;
  assert_int_equal(incident_evaluate(&r, &all, 0, QUIET), INCIDENT_SAME);
  incident_switched(&r, 2, 5);
  assert_int_equal(incident_evaluate(&r, &backup, 5, QUIET), INCIDENT_MITIGATED_AT);
  assert_int_equal(incident_evaluate(&r, &backup_down, 6, QUIET), INCIDENT_UNMITIGATED);
  assert_int_equal(r.state, INCIDENT_OPEN);
  assert_int_equal(r.mitigated_at, 5); /* the first mitigation is kept */
  /* on level 1 again but an origin that failed is still down: no resolution */
  assert_int_equal(incident_evaluate(&r, &back, 7, QUIET), INCIDENT_SAME);
  assert_int_equal(incident_evaluate(&r, &back, 7 + 2 * QUIET, QUIET), INCIDENT_SAME);
  assert_int_equal(r.state, INCIDENT_OPEN);
}

/* A site that opened on a backup level resolves on an earlier one; an operator resolves an
   active incident once. */
static void test_earlier_level_and_operator(void **state) {
  struct incident_rec r;
  struct incident_view earlier = view(1, 1, 0, 0);
  (void)state;
  memset(&r, 0, sizeof r);
  incident_trigger_at(&r, 0, 1, "a", INCIDENT_TRIGGER_ORIGIN, 2, 0, 0, 0);
  r.id = 1;
  assert_int_equal(incident_evaluate(&r, &earlier, 1, 0), INCIDENT_RESOLVED_AT); /* quiet 0 */
  assert_int_equal(incident_resolve_by(&r, "ops", 2), -1);
  memset(&r, 0, sizeof r);
  incident_trigger_at(&r, 0, 1, "a", INCIDENT_TRIGGER_SWITCH, 1, 0, 0, QUIET);
  assert_int_equal(incident_resolve_by(&r, "ops", 50), 0);
  assert_int_equal(r.state, INCIDENT_RESOLVED);
  assert_string_equal(r.resolved_by, "ops");
  assert_int_equal(incident_resolve_by(&r, "ops", 60), -1);
  assert_int_equal(r.resolved_at, 50);
}

/* The name tables round-trip through the field table's words. */
static void test_names(void **state) {
  (void)state;
  assert_string_equal(incident_state_names[INCIDENT_MITIGATED], "mitigated");
  assert_string_equal(incident_trigger_names[INCIDENT_TRIGGER_ALL_DOWN], "all_levels_unhealthy");
  assert_non_null(fields_find(incident_fields, "state"));
  assert_int_equal(fields_find(incident_fields, "state")->nchoices, INCIDENT_STATES);
  assert_int_equal(fields_find(incident_fields, "trigger")->nchoices, INCIDENT_TRIGGERS);
}

static void test_propagation_and_totals(void **state) {
  struct applied_row a[] = {
      {.seq = 5, .published_at = 1000, .node_id = 1, .applied_at = 1120, .node_name = "fra-1"},
      {.seq = 5, .published_at = 1000, .node_id = 2, .applied_at = 1320, .node_name = "fra-3"},
      {.seq = 5, .published_at = 1000, .node_id = 3, .applied_at = 1050, .node_name = "ams-1"},
      {.seq = 9, .published_at = 9000, .node_id = 1, .applied_at = 9010, .node_name = "fra-1"},
  };
  struct incident_prop p;
  (void)state;
  incident_propagation(a, 4, 5, 1000, &p);
  assert_int_equal(p.applied, 3);
  assert_int_equal(p.p50_ms, 120);
  assert_int_equal(p.max_ms, 320);
  assert_string_equal(p.slowest, "fra-3");
  assert_int_equal(p.last_applied_at, 1320);
  incident_propagation(a, 4, 7, 5000, &p);
  assert_int_equal(p.applied, 0);
  assert_int_equal(p.p50_ms, -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_outage_then_auto_failback),
      cmocka_unit_test(test_flap_inside_quiet_time),
      cmocka_unit_test(test_manual_failback_stays_mitigated),
      cmocka_unit_test(test_all_levels_down),
      cmocka_unit_test(test_earlier_level_and_operator),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_propagation_and_totals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
