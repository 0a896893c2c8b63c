/* test_ctlset — the controld replica list: parsing --controld, which outcome rotates, the shared
   capped jittered backoff, its reset on success, stale reports, and the /healthz probe slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ctlset.h"

static void test_parse_single_and_list(void **state) {
  struct ctlset s;
  char err[256];
  (void)state;
  /* the single-URL form keeps working, trailing '/' removed */
  assert_int_equal(ctlset_parse(&s, "http://127.0.0.1:7400/", err, sizeof err), 0);
  assert_int_equal(s.n, 1);
  assert_string_equal(s.url[0], "http://127.0.0.1:7400");
  assert_int_equal(s.cur, 0);
  /* a list, spaces around items ignored */
  assert_int_equal(
      ctlset_parse(&s, "http://a:1, https://b.example:8443/ ,http://[::1]:7400", err, sizeof err),
      0);
  assert_int_equal(s.n, 3);
  assert_string_equal(s.url[0], "http://a:1");
  assert_string_equal(s.url[1], "https://b.example:8443");
  assert_string_equal(s.url[2], "http://[::1]:7400");
  /* eight is the most */
  assert_int_equal(ctlset_parse(&s,
                                "http://a,http://b,http://c,http://d,http://e,http://f,"
                                "http://g,http://h",
                                err, sizeof err),
                   0);
  assert_int_equal(s.n, CTLSET_MAX);
}

static void test_parse_refuses(void **state) {
  static const struct {
    const char *list, *want;
  } bad[] = {
      {"", "required"},
      {"ftp://a", "'ftp://a' (URL 1) is not an http:// or https:// URL"},
      {"http://a,", "URL 2 of the list is empty"},
      {",http://a", "URL 1 of the list is empty"},
      {"http://a,,http://b", "URL 2 of the list is empty"},
      {"http://a,b:7400", "'b:7400' (URL 2) is not an http:// or https:// URL"},
      {"http://", "not an http:// or https:// URL"},
      {"http://a,http://a/", "listed twice (URLs 1 and 2)"},
      {"http://a b", "URL 1 contains a space or a control character"},
      {"http://a,http://b,http://c,http://d,http://e,http://f,http://g,http://h,http://i",
       "more than 8 URLs"},
  };
  struct ctlset s;
  char err[256];
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    assert_int_equal(ctlset_parse(&s, bad[i].list, err, sizeof err), -1);
    if (!strstr(err, bad[i].want) || strncmp(err, "option controld: ", 17) != 0) {
      fprintf(stderr, "list '%s': got '%s', want '%s'\n", bad[i].list, err, bad[i].want);
      fail();
    }
  }
  {
    char longurl[CTLSET_URL_MAX + 20];
    memset(longurl, 'a', sizeof longurl - 1);
    memcpy(longurl, "http://", 7);
    longurl[sizeof longurl - 1] = '\0';
    assert_int_equal(ctlset_parse(&s, longurl, err, sizeof err), -1);
    assert_non_null(strstr(err, "too long"));
  }
}

static void test_classify(void **state) {
  (void)state;
  assert_int_equal(ctlset_classify(0, 0), CTLSET_DOWN);
  assert_int_equal(ctlset_classify(0, 200), CTLSET_DOWN);
  assert_int_equal(ctlset_classify(1, 502), CTLSET_AWAY);
  assert_int_equal(ctlset_classify(1, 503), CTLSET_AWAY);
  assert_int_equal(ctlset_classify(1, 504), CTLSET_AWAY);
  /* a revoked token (401), a refusal (403), a late vote (409), a server error (500) are answers:
     they never rotate (a 401 stops the loops instead of cycling through the replicas) */
  static const long answered[] = {200, 204, 304, 400, 401, 403, 404, 409, 429, 500, 501};
  for (size_t i = 0; i < sizeof answered / sizeof *answered; i++)
    assert_int_equal(ctlset_classify(1, answered[i]), CTLSET_ANSWERED);
}

static void test_backoff_capped_jittered(void **state) {
  (void)state;
  for (uint32_t rnd = 0; rnd < 5000; rnd += 37) {
    int64_t prev_hi = 0;
    for (int f = 1; f < 40; f++) {
      int64_t d = ctlset_backoff_ms(f, rnd), hi = 500;
      for (int i = 1; i < f && hi < 30000; i++)
        hi *= 2;
      if (hi > 30000) hi = 30000;
      assert_true(d >= hi / 2 && d <= hi);
      assert_true(hi >= prev_hi);
      prev_hi = hi;
    }
  }
  assert_int_equal(ctlset_backoff_ms(1, 0), 250);
  assert_int_equal(ctlset_backoff_ms(1, 250), 500);
  assert_true(ctlset_backoff_ms(1000, 0xffffffffu) <= 30000);
}

static void test_rotation_round_robin(void **state) {
  struct ctlset s;
  char err[256];
  uint64_t gen;
  int idx;
  int64_t now = 1000;
  (void)state;
  assert_int_equal(ctlset_parse(&s, "http://a,http://b,http://c", err, sizeof err), 0);
  assert_string_equal(ctlset_current(&s, &idx, &gen), "http://a");
  assert_int_equal(ctlset_wait_ms(&s, now), 0);
  /* a transport error on a: next is b, after backoff(1) in [250, 500] */
  assert_int_equal(ctlset_report(&s, gen, CTLSET_DOWN, now, 0), 1);
  assert_string_equal(ctlset_current(&s, &idx, &gen), "http://b");
  assert_int_equal(idx, 1);
  assert_int_equal(s.failures, 1);
  assert_int_equal(ctlset_wait_ms(&s, now), 250);
  assert_int_equal(ctlset_wait_ms(&s, now + 100), 150);
  assert_int_equal(ctlset_wait_ms(&s, now + 250), 0);
  /* a 503 from b: c, after backoff(2) */
  now += 250;
  assert_int_equal(ctlset_report(&s, gen, CTLSET_AWAY, now, 0), 1);
  assert_string_equal(ctlset_current(&s, &idx, &gen), "http://c");
  assert_int_equal(ctlset_wait_ms(&s, now), 500);
  /* c away too: round robin back to a, backoff keeps growing */
  now += 500;
  assert_int_equal(ctlset_report(&s, gen, CTLSET_DOWN, now, 0), 1);
  assert_string_equal(ctlset_current(&s, &idx, &gen), "http://a");
  assert_int_equal(ctlset_wait_ms(&s, now), 1000);
  assert_int_equal(s.switches, 3);
  /* a answers: it stays current, the backoff ends at once */
  assert_int_equal(ctlset_report(&s, gen, CTLSET_ANSWERED, now + 10, 0), 0);
  assert_int_equal(ctlset_wait_ms(&s, now + 10), 0);
  assert_int_equal(s.failures, 0);
  assert_string_equal(ctlset_current(&s, NULL, NULL), "http://a");
}

static void test_single_url_never_switches(void **state) {
  struct ctlset s;
  char err[256];
  uint64_t gen;
  int64_t now = 0;
  (void)state;
  assert_int_equal(ctlset_parse(&s, "http://only", err, sizeof err), 0);
  for (int f = 1; f <= 12; f++) {
    ctlset_current(&s, NULL, &gen);
    assert_int_equal(ctlset_report(&s, gen, CTLSET_DOWN, now, 0xffffffffu), 0);
    assert_int_equal(s.failures, f);
    now += ctlset_wait_ms(&s, now);
  }
  /* capped: the twelfth wait is at most 30 s */
  assert_int_equal(s.switches, 0);
  ctlset_current(&s, NULL, &gen);
  ctlset_report(&s, gen, CTLSET_DOWN, now, 0xffffffffu);
  assert_true(ctlset_wait_ms(&s, now) <= CTLSET_BACKOFF_CAP_MS);
  assert_true(ctlset_wait_ms(&s, now) >= CTLSET_BACKOFF_CAP_MS / 2);
}

/* Two loops fail on the same replica at once: only the first moves on, so the second does not
   skip the next replica; a success seen by a call begun long ago still ends the backoff. */
static void test_stale_reports(void **state) {
  struct ctlset s;
  char err[256];
  uint64_t g_sync, g_tasks, g;
  int64_t now = 5000;
  (void)state;
  assert_int_equal(ctlset_parse(&s, "http://a,http://b,http://c", err, sizeof err), 0);
  ctlset_current(&s, NULL, &g_sync);
  ctlset_current(&s, NULL, &g_tasks);
  assert_int_equal(ctlset_report(&s, g_sync, CTLSET_DOWN, now, 0), 1);
  assert_int_equal(ctlset_report(&s, g_tasks, CTLSET_DOWN, now, 0), 0);
  assert_string_equal(ctlset_current(&s, NULL, &g), "http://b");
  assert_int_equal(s.failures, 1);
  /* the long-poll begun on a before all that comes back with an answer: backoff over */
  assert_int_equal(ctlset_report(&s, g_sync, CTLSET_ANSWERED, now + 5, 0), 0);
  assert_int_equal(ctlset_wait_ms(&s, now + 5), 0);
  assert_int_equal(s.failures, 0);
  /* the current replica is still b: an answer does not move it */
  assert_string_equal(ctlset_current(&s, NULL, NULL), "http://b");
}

/* The catch-up rule: after a long outage the backoff step is up to 30 s, but the first call that
   succeeds (e.g. a heartbeat) ends it for every loop at once. */
static void test_success_resets_backoff(void **state) {
  struct ctlset s;
  char err[256];
  uint64_t gen;
  int64_t now = 0;
  (void)state;
  assert_int_equal(ctlset_parse(&s, "http://a", err, sizeof err), 0);
  while (now < 60000) { /* a 60 s outage */
    ctlset_current(&s, NULL, &gen);
    ctlset_report(&s, gen, CTLSET_DOWN, now, 0x7fffffffu);
    now += ctlset_wait_ms(&s, now);
  }
  ctlset_current(&s, NULL, &gen);
  ctlset_report(&s, gen, CTLSET_DOWN, now, 0x7fffffffu);
  assert_true(ctlset_wait_ms(&s, now) >= 15000);
  /* controld is back 1 s later: a heartbeat gets an answer, nobody waits any more */
  ctlset_report(&s, gen, CTLSET_ANSWERED, now + 1000, 0);
  assert_int_equal(ctlset_wait_ms(&s, now + 1000), 0);
  /* and the next failure starts from the first step again */
  ctlset_current(&s, NULL, &gen);
  ctlset_report(&s, gen, CTLSET_DOWN, now + 2000, 0x7fffffffu);
  assert_true(ctlset_wait_ms(&s, now + 2000) <= 500);
}

static void test_probe_slot(void **state) {
  struct ctlset s;
  char err[256];
  uint64_t gen;
  int64_t now = 0;
  (void)state;
  assert_int_equal(ctlset_parse(&s, "http://a,http://b", err, sizeof err), 0);
  /* nothing failed: no probe */
  assert_int_equal(ctlset_probe_claim(&s, now, 0), 0);
  /* short backoffs are just waited out */
  for (int f = 1; f <= 2; f++) {
    ctlset_current(&s, NULL, &gen);
    ctlset_report(&s, gen, CTLSET_DOWN, now, 0xffffffffu);
    assert_int_equal(ctlset_probe_claim(&s, now + CTLSET_PROBE_EVERY_MS, 0), 0);
    now += ctlset_wait_ms(&s, now);
  }
  /* a long one (failure 4: 2..4 s, here 4 s): probing is worth it after 500 ms */
  for (int f = 3; f <= 4; f++) {
    ctlset_current(&s, NULL, &gen);
    ctlset_report(&s, gen, CTLSET_DOWN, now, f == 4 ? 2000 : 0);
    if (f < 4) now += ctlset_wait_ms(&s, now);
  }
  assert_int_equal(ctlset_wait_ms(&s, now), 4000);
  assert_int_equal(ctlset_probe_claim(&s, now + 100, 0), 0); /* not yet due */
  assert_int_equal(ctlset_probe_claim(&s, now + 500, 0), 1);
  /* one loop has the slot: the other does not probe too */
  assert_int_equal(ctlset_probe_claim(&s, now + 500, 0), 0);
  assert_int_equal(ctlset_probe_claim(&s, now + 999, 0), 0);
  assert_int_equal(ctlset_probe_claim(&s, now + 1000, 0), 1);
  /* within the last second of the backoff nobody probes */
  assert_int_equal(ctlset_probe_claim(&s, now + 3100, 0), 0);
  /* a probe that answered 200 ends the backoff; the failure count stays */
  ctlset_current(&s, NULL, &gen);
  ctlset_reachable(&s, gen, now + 1200);
  assert_int_equal(ctlset_wait_ms(&s, now + 1200), 0);
  assert_int_equal(s.failures, 4);
  /* a failure from a call begun before the probe's answer is stale, and so is a probe answer
     begun before the latest failure */
  ctlset_report(&s, gen, CTLSET_DOWN, now, 0);
  assert_int_equal(s.failures, 4);
  ctlset_current(&s, NULL, &gen);
  ctlset_report(&s, gen, CTLSET_DOWN, now + 1300, 0xffffffffu);
  assert_int_equal(s.failures, 5);
  ctlset_reachable(&s, gen, now + 1400); /* gen moved on with the report */
  assert_true(ctlset_wait_ms(&s, now + 1400) > 0);
  /* a replica that answers 503 is not probed: backing off is what a busy one needs */
  ctlset_current(&s, NULL, &gen);
  ctlset_report(&s, gen, CTLSET_AWAY, now + 1500, 0xffffffffu);
  assert_true(ctlset_wait_ms(&s, now + 1500) > CTLSET_PROBE_MIN_WAIT_MS);
  assert_int_equal(ctlset_probe_claim(&s, now + 3000, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_single_and_list),
      cmocka_unit_test(test_parse_refuses),
      cmocka_unit_test(test_classify),
      cmocka_unit_test(test_backoff_capped_jittered),
      cmocka_unit_test(test_rotation_round_robin),
      cmocka_unit_test(test_single_url_never_switches),
      cmocka_unit_test(test_stale_reports),
      cmocka_unit_test(test_success_resets_backoff),
      cmocka_unit_test(test_probe_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
