/* Unit tests for controld/shadow and the engine's shadow step (docs/design.md, Shadow health
   policies): the origin machine and the comparison row by row, the totals, the switches since a
   time, the level step with a fake clock, and health_check_shadow's codec (health_check's rows). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine.h"
#include "json.h"
#include "shadow.h"
#include "site.h"

#define T0 1800000000000LL

static cJSON *parse(const char *text) {
  return json_parse(text, strlen(text));
}

static void test_origin_round_rows(void **state) {
  struct shadow_origin o;
  /* shadow, real, error, healthy_after, unhealthy_after -> health, compared, disagreements */
  static const struct {
    enum health_verdict shadow, real;
    enum health_state health;
    int64_t compared, disagreements;
    int changed;
  } rows[] = {
      {VERDICT_SUCCESS, VERDICT_SUCCESS, HEALTH_UNKNOWN, 1, 0, 0},
      {VERDICT_SUCCESS, VERDICT_SUCCESS, HEALTH_HEALTHY, 2, 0, 1}, /* healthy_after 2 */
      {VERDICT_FAILURE, VERDICT_SUCCESS, HEALTH_HEALTHY, 3, 1, 0}, /* disagreement */
      {VERDICT_FAILURE, VERDICT_NONE, HEALTH_HEALTHY, 3, 1, 0}, /* no real verdict: not compared */
      {VERDICT_NONE, VERDICT_FAILURE, HEALTH_HEALTHY, 3, 1, 0}, /* no shadow verdict: nothing */
      {VERDICT_FAILURE, VERDICT_SUCCESS, HEALTH_UNHEALTHY, 4, 2, 1}, /* unhealthy_after 3 */
      {VERDICT_FAILURE, VERDICT_FAILURE, HEALTH_UNHEALTHY, 5, 2, 0}, /* agreement */
  };
  (void)state;
  shadow_origin_init(&o, 1, 11, T0);
  assert_int_equal(o.health, HEALTH_UNKNOWN);
  assert_int_equal(o.health_changed_at, T0);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int64_t now = T0 + (int64_t)(i + 1) * 1000;
    int changed =
        shadow_origin_round(&o, rows[i].shadow, rows[i].real, "unexpected status 403", 2, 3, now);
    assert_int_equal(changed, rows[i].changed);
    assert_int_equal(o.health, rows[i].health);
    assert_int_equal(o.compared, rows[i].compared);
    assert_int_equal(o.disagreements, rows[i].disagreements);
    if (changed) assert_int_equal(o.health_changed_at, now);
  }
  assert_int_equal(o.healthy_since, 0); /* unhealthy now */
  assert_int_equal(o.last_verdict, VERDICT_FAILURE);
  assert_int_equal(o.last_real, VERDICT_FAILURE);
  assert_string_equal(o.last_error, "unexpected status 403");
  /* a success clears the evidence; becoming healthy sets healthy_since */
  shadow_origin_round(&o, VERDICT_SUCCESS, VERDICT_SUCCESS, "x", 1, 3, T0 + 99000);
  assert_int_equal(o.health, HEALTH_HEALTHY);
  assert_int_equal(o.healthy_since, T0 + 99000);
  assert_string_equal(o.last_error, "");
}

static void test_totals_and_switches_since(void **state) {
  struct shadow_origin o[3];
  struct shadow_totals t;
  struct shadow_switch sw[4];
  (void)state;
  memset(o, 0, sizeof o);
  shadow_totals(o, 3, &t);
  assert_int_equal(t.compared, 0);
  assert_true(t.agreement < 0); /* nothing compared */
  o[0].compared = 10;
  o[0].disagreements = 4;
  o[1].compared = 10;
  o[2].compared = 0;
  shadow_totals(o, 3, &t);
  assert_int_equal(t.compared, 20);
  assert_int_equal(t.disagreements, 4);
  assert_int_equal(t.agreements, 16);
  assert_true(t.agreement > 0.79 && t.agreement < 0.81);
  shadow_totals(o, 0, &t);
  assert_int_equal(t.compared, 0);
  memset(sw, 0, sizeof sw);
  sw[0].at = T0 + 300; /* newest first */
  sw[1].at = T0 + 200;
  sw[2].at = T0 + 100;
  sw[3].at = T0 - 1;
  assert_int_equal(shadow_switches_since(sw, 4, T0), 3);
  assert_int_equal(shadow_switches_since(sw, 4, T0 + 250), 1);
  assert_int_equal(shadow_switches_since(sw, 4, T0 + 400), 0);
  assert_int_equal(shadow_switches_since(sw, 0, 0), 0);
}

/* A site on level 1 with origins 11 (level 1) and 12 (level 2); its shadow: unhealthy after 2
   failures, healthy after 1 success. */
static void make_site(struct site_rec *s, struct origin_rec *o) {
  site_rec_defaults(s);
  s->id = 1;
  s->hc_enabled = 1;
  s->n_origins = 2;
  s->origins = o;
  memset(o, 0, 2 * sizeof *o);
  for (int i = 0; i < 2; i++) {
    o[i].id = 11 + i;
    o[i].site_id = 1;
    o[i].level = 1 + i;
    o[i].enabled = 1;
    o[i].health = HEALTH_HEALTHY;
    o[i].healthy_since = T0 - 60000;
  }
  site_hc_get(s, &s->shadow.hc);
  s->shadow.set = 1;
  s->shadow.hc.enabled = 1;
  s->shadow.hc.unhealthy_after = 2;
  s->shadow.hc.healthy_after = 1;
}

static int step(struct site_rec *s, struct shadow_site *ss, struct shadow_origin *so,
                enum health_verdict v11, enum health_verdict v12, int64_t now,
                struct shadow_switch *sw) {
  struct engine_shadow_verdict v[2];
  memset(v, 0, sizeof v);
  v[0].origin_id = 11;
  v[0].shadow = v11;
  v[0].real = VERDICT_SUCCESS;
  v[1].origin_id = 12;
  v[1].shadow = v12;
  v[1].real = VERDICT_SUCCESS;
  return engine_shadow_step(s, ss, so, v, 2, now, sw);
}

static void test_engine_step_would_switch_and_back(void **state) {
  struct site_rec s;
  struct origin_rec o[2];
  struct shadow_site ss;
  struct shadow_origin so[2];
  struct shadow_switch sw;
  (void)state;
  make_site(&s, o);
  memset(&ss, 0, sizeof ss);
  ss.site_id = 1;
  shadow_origin_init(&so[0], 1, 11, T0);
  shadow_origin_init(&so[1], 1, 12, T0);
  /* round 1: both healthy under the shadow (healthy_after 1): stay on the real level */
  assert_int_equal(step(&s, &ss, so, VERDICT_SUCCESS, VERDICT_SUCCESS, T0 + 1000, &sw), 0);
  assert_int_equal(ss.since, T0 + 1000);
  assert_int_equal(ss.current_level, 1);
  assert_int_equal(ss.rounds, 1);
  /* round 2: the first failure of 11: still healthy */
  assert_int_equal(step(&s, &ss, so, VERDICT_FAILURE, VERDICT_SUCCESS, T0 + 2000, &sw), 0);
  assert_int_equal(so[0].health, HEALTH_HEALTHY);
  /* round 3: unhealthy after 2: the shadow would fail over to level 2 */
  assert_int_equal(step(&s, &ss, so, VERDICT_FAILURE, VERDICT_SUCCESS, T0 + 3000, &sw), 1);
  assert_int_equal(so[0].health, HEALTH_UNHEALTHY);
  assert_int_equal(sw.at, T0 + 3000);
  assert_int_equal(sw.from_level, 1);
  assert_int_equal(sw.to_level, 2);
  assert_string_equal(sw.reason, "auto_failover");
  assert_true(sw.why[0] != '\0');
  assert_int_equal(ss.current_level, 2);
  assert_int_equal(so[0].disagreements, 2);
  assert_int_equal(so[1].disagreements, 0);
  /* the real record is untouched */
  assert_int_equal(s.current_level, 1);
  assert_int_equal(o[0].health, HEALTH_HEALTHY);
  assert_int_equal(s.hc_unhealthy_after, 3);
  /* round 4: no verdict at all: nothing moves, no round counted */
  assert_int_equal(step(&s, &ss, so, VERDICT_NONE, VERDICT_NONE, T0 + 4000, &sw), 0);
  assert_int_equal(ss.rounds, 3);
  assert_int_equal(ss.current_level, 2);
  /* round 5: 11 recovers (healthy_after 1): auto failback at once (hold 0) */
  assert_int_equal(step(&s, &ss, so, VERDICT_SUCCESS, VERDICT_SUCCESS, T0 + 5000, &sw), 1);
  assert_int_equal(sw.from_level, 2);
  assert_int_equal(sw.to_level, 1);
  assert_string_equal(sw.reason, "auto_failback");
  assert_int_equal(ss.current_level, 1);
}

static void test_engine_step_all_down_never_switches(void **state) {
  struct site_rec s;
  struct origin_rec o[2];
  struct shadow_site ss;
  struct shadow_origin so[2];
  struct shadow_switch sw;
  (void)state;
  make_site(&s, o);
  memset(&ss, 0, sizeof ss);
  shadow_origin_init(&so[0], 1, 11, T0);
  shadow_origin_init(&so[1], 1, 12, T0);
  for (int r = 1; r <= 4; r++)
    assert_int_equal(step(&s, &ss, so, VERDICT_FAILURE, VERDICT_FAILURE, T0 + r * 1000, &sw), 0);
  assert_int_equal(ss.current_level, 1);
  assert_int_equal(ss.all_unhealthy, 1); /* the shadow's own flag, no event anywhere */
}

static void test_codec_is_health_checks_rows(void **state) {
  struct site_shadow sh;
  struct field_err err;
  cJSON *obj;
  char *text;
  (void)state;
  memset(&sh, 0, sizeof sh);
  /* absent: unchanged; null: none */
  obj = parse("{}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), 0);
  assert_int_equal(sh.set, 0);
  cJSON_Delete(obj);
  assert_true(site_shadow_codec.is_default(&sh));
  assert_null(site_shadow_codec.to_text(&sh));
  /* health_check's bounds, named under health_check_shadow */
  obj = parse("{\"health_check_shadow\": {\"timeout_ms\": 50}}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), -1);
  assert_int_equal(err.status, 422);
  assert_string_equal(err.field, "health_check_shadow.timeout_ms");
  assert_int_equal(sh.set, 0); /* unchanged */
  cJSON_Delete(obj);
  obj = parse("{\"health_check_shadow\": [1]}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), -1);
  assert_string_equal(err.field, "health_check_shadow");
  cJSON_Delete(obj);
  /* set onto the defaults with enabled true, then merged */
  obj = parse("{\"health_check_shadow\": {\"path\": \"/s\", \"expected_codes\": [\"200\"]}}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), 0);
  cJSON_Delete(obj);
  assert_int_equal(sh.set, 1);
  assert_int_equal(sh.hc.enabled, 1);
  assert_string_equal(sh.hc.path, "/s");
  assert_int_equal(sh.hc.timeout_ms, 5000);
  assert_int_equal(sh.hc.opts.n_codes, 1);
  obj = parse("{\"health_check_shadow\": {\"unhealthy_after\": 5}}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), 0);
  cJSON_Delete(obj);
  assert_string_equal(sh.hc.path, "/s");
  assert_int_equal(sh.hc.unhealthy_after, 5);
  /* the column's text reads back the same */
  text = site_shadow_codec.to_text(&sh);
  assert_non_null(text);
  {
    struct site_shadow back;
    assert_int_equal(site_shadow_codec.from_text(text, &back), 0);
    assert_int_equal(back.set, 1);
    assert_string_equal(back.hc.path, "/s");
    assert_int_equal(back.hc.unhealthy_after, 5);
    assert_int_equal(back.hc.opts.n_codes, 1);
    assert_int_equal(site_shadow_codec.from_text(NULL, &back), 0);
    assert_int_equal(back.set, 0);
    assert_int_equal(site_shadow_codec.from_text("{\"timeout_ms\": 1}", &back), -1);
    assert_int_equal(back.set, 0);
  }
  free(text);
  obj = parse("{\"health_check_shadow\": null}");
  assert_int_equal(site_shadow_codec.apply(obj, &sh, &err), 0);
  cJSON_Delete(obj);
  assert_int_equal(sh.set, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_origin_round_rows),
      cmocka_unit_test(test_totals_and_switches_since),
      cmocka_unit_test(test_engine_step_would_switch_and_back),
      cmocka_unit_test(test_engine_step_all_down_never_switches),
      cmocka_unit_test(test_codec_is_health_checks_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
