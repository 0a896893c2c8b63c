/* Unit tests for controld/fleet (a site's state flags, pure) and controld/store_fleet (the flag
   columns, the summary counts, filtered pages, the metrics walks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fleet.h"
#include "log.h"
#include "store.h"
#include "store_fleet.h"
#include "store_health.h"
#include "store_sites.h"

#define T0 1800000000000LL

/* A site with origins on the given levels (0 ends the list), all enabled, health unknown. */
static void site_with(struct site_rec *s, const int *levels) {
  int n = 0;
  site_rec_defaults(s);
  while (levels[n])
    n++;
  s->n_origins = n;
  s->origins = calloc((size_t)(n ? n : 1), sizeof *s->origins);
  assert_non_null(s->origins);
  for (int i = 0; i < n; i++) {
    s->origins[i].level = levels[i];
    s->origins[i].enabled = 1;
    s->origins[i].weight = 1;
    s->origins[i].port = 8000 + i;
    snprintf(s->origins[i].address, sizeof s->origins[i].address, "10.0.0.%d", i + 1);
    s->origins[i].scheme = SCHEME_HTTP;
    s->origins[i].health = HEALTH_UNKNOWN;
  }
  s->current_level = levels[0] ? levels[0] : 1;
}

static void set_health(struct site_rec *s, int i, const char *h) {
  assert_int_equal(health_state_from_string(h, &s->origins[i].health), 0);
  s->origins[i].health_changed_at = T0 - 600000;
  if (strcmp(h, "healthy") == 0) s->origins[i].healthy_since = T0 - 600000;
}

/* The flags of s at now from its outlook, as the engine stores them. */
static unsigned state_of(const struct site_rec *s, int64_t now) {
  struct outlook ol;
  engine_outlook(s, now, &ol);
  return fleet_state_of(s, &ol);
}

static void test_state_primary_and_backup(void **state) {
  static const int lv[] = {1, 2, 0};
  struct site_rec s;
  (void)state;
  site_with(&s, lv);
  assert_int_equal(state_of(&s, T0), 0);
  s.current_level = 2;
  assert_int_equal(state_of(&s, T0) & FLEET_ON_BACKUP, FLEET_ON_BACKUP);
  /* the first level disabled: level 2 is now the first non-empty level, so the primary */
  s.origins[0].enabled = 0;
  assert_int_equal(state_of(&s, T0) & FLEET_ON_BACKUP, 0);
  assert_int_equal(fleet_first_level(&s), 2);
  /* no enabled origin at all: nothing to be on a backup of */
  s.origins[1].enabled = 0;
  assert_int_equal(fleet_first_level(&s), 0);
  assert_int_equal(state_of(&s, T0) & FLEET_ON_BACKUP, 0);
  site_rec_fini(&s);
}

static void test_state_paused_and_all_down(void **state) {
  static const int one[] = {1, 0};
  static const int two[] = {1, 2, 0};
  struct site_rec s;
  (void)state;
  site_with(&s, one);
  assert_int_equal(state_of(&s, T0), 0); /* checks off: neither paused nor down */
  s.hc_enabled = 1;
  assert_int_equal(state_of(&s, T0), FLEET_PAUSED);
  set_health(&s, 0, "unhealthy");
  /* paused checks do not count the stale unhealthy state */
  assert_int_equal(state_of(&s, T0), FLEET_PAUSED);
  site_rec_fini(&s);

  site_with(&s, two);
  s.hc_enabled = 1;
  set_health(&s, 0, "unhealthy");
  set_health(&s, 1, "unhealthy");
  assert_int_equal(state_of(&s, T0), FLEET_ALL_DOWN);
  s.current_level = 2;
  assert_int_equal(state_of(&s, T0), FLEET_ALL_DOWN | FLEET_ON_BACKUP);
  /* the same states with checks turned off: no verdict counts */
  s.hc_enabled = 0;
  assert_int_equal(state_of(&s, T0), FLEET_ON_BACKUP);
  site_rec_fini(&s);
}

static void test_state_failback_available(void **state) {
  static const int two[] = {1, 2, 0};
  struct site_rec s;
  (void)state;
  site_with(&s, two);
  s.hc_enabled = 1;
  s.failback = HEALTH_FAILBACK_MANUAL;
  s.current_level = 2;
  set_health(&s, 0, "healthy");
  set_health(&s, 1, "healthy");
  assert_int_equal(state_of(&s, T0), FLEET_ON_BACKUP | FLEET_FAILBACK_AVAILABLE);
  set_health(&s, 0, "unhealthy");
  assert_int_equal(state_of(&s, T0), FLEET_ON_BACKUP);
  /* auto failback never reports it (it switches instead) */
  set_health(&s, 0, "healthy");
  s.failback = HEALTH_FAILBACK_AUTO;
  assert_int_equal(state_of(&s, T0) & FLEET_FAILBACK_AVAILABLE, 0);
  /* ... unless the operator pinned the level by hand */
  s.manual_pin = 1;
  assert_int_equal(state_of(&s, T0) & FLEET_FAILBACK_AVAILABLE, FLEET_FAILBACK_AVAILABLE);
  site_rec_fini(&s);
}

/* fleet_state_of takes the health rules' answer from the outlook it is given; the site gives
   only its levels. */
static void test_state_reads_the_outlook(void **state) {
  static const int two[] = {1, 2, 0};
  struct site_rec s;
  struct outlook ol;
  (void)state;
  site_with(&s, two);
  memset(&ol, 0, sizeof ol);
  assert_int_equal(fleet_state_of(&s, &ol), 0);
  ol.hc_paused = 1;
  assert_int_equal(fleet_state_of(&s, &ol), FLEET_PAUSED);
  ol.hc_paused = 0;
  ol.decision.all_unhealthy = 1;
  assert_int_equal(fleet_state_of(&s, &ol), 0); /* all down counts only with active checks */
  ol.hc_active = 1;
  assert_int_equal(fleet_state_of(&s, &ol), FLEET_ALL_DOWN);
  ol.decision.failback_available = 1;
  s.current_level = 2;
  assert_int_equal(fleet_state_of(&s, &ol),
                   FLEET_ALL_DOWN | FLEET_FAILBACK_AVAILABLE | FLEET_ON_BACKUP);
  site_rec_fini(&s);
}

static void test_state_names(void **state) {
  (void)state;
  assert_int_equal(fleet_state_parse("on_backup"), FLEET_ON_BACKUP);
  assert_int_equal(fleet_state_parse("all_down"), FLEET_ALL_DOWN);
  assert_int_equal(fleet_state_parse("failback_available"), FLEET_FAILBACK_AVAILABLE);
  assert_int_equal(fleet_state_parse("paused"), FLEET_PAUSED);
  assert_int_equal(fleet_state_parse("all_levels_unhealthy"), 0); /* a summary key, not a filter */
  assert_int_equal(fleet_state_parse(""), 0);
  assert_int_equal(fleet_state_parse(NULL), 0);
  assert_int_equal(fleet_state_parse("on_backup "), 0);
  for (int i = 0; i < FLEET_NSTATES; i++) {
    assert_int_equal(fleet_states[i].flag, 1u << i);
    assert_non_null(fleet_states[i].summary);
  }
}

/* ---- store ---- */

struct fx {
  char dir[64];
  char path[128];
  struct store *st;
  int64_t ids[40];
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  log_init("test_fleet", LOG_TEXT, LOG_ERROR);
  snprintf(f->dir, sizeof f->dir, "/tmp/cdnca-test-fleet-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
  f->st = store_open(f->path);
  if (!f->st) return -1;
  /* 40 sites "Site-00".."Site-39" (www.s00.test ...), two origins each */
  for (int i = 0; i < 40; i++) {
    static const int lv[] = {1, 2, 0};
    struct site_rec s;
    char conflict[64];
    site_with(&s, lv);
    snprintf(s.name, sizeof s.name, "Site-%02d", i);
    s.n_hostnames = 1;
    snprintf(s.hostnames[0], sizeof s.hostnames[0], "www.s%02d.test", i);
    if (store_site_create(f->st, &s, conflict, sizeof conflict) != STORE_OK) return -1;
    f->ids[i] = s.id;
    site_rec_fini(&s);
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  char p[160];
  store_close(&f->st);
  snprintf(p, sizeof p, "%s-wal", f->path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", f->path);
  unlink(p);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void set_flags(struct fx *f, int i, unsigned flags) {
  struct store_tx *tx;
  assert_non_null(tx = store_health_begin(f->st));
  assert_int_equal(store_fleet_set_locked(tx, f->ids[i], flags), 0);
  assert_int_equal(store_health_commit(tx), 0);
}

/* The ids of a filtered listing, walked page by page with `next`-style paging. */
static int list_all(struct fx *f, unsigned state, const char *q, int page, int64_t *out) {
  int64_t after = 0;
  int total = 0;
  for (int guard = 0; guard < 100; guard++) {
    struct site_rec *arr = NULL;
    int n = 0;
    assert_int_equal(store_fleet_site_list(f->st, state, q, after, page, &arr, &n), STORE_OK);
    for (int i = 0; i < n; i++) {
      out[total++] = arr[i].id;
      assert_true(arr[i].n_hostnames == 1 && arr[i].n_origins == 2); /* full records */
      site_rec_fini(&arr[i]);
    }
    free(arr);
    if (n < page) return total;
    after = out[total - 1];
  }
  fail_msg("paging did not end");
  return -1;
}

static void test_store_summary_and_lists(void **state) {
  struct fx *f = *state;
  struct fleet_summary fs;
  int64_t got[64];
  int n;
  for (int i = 0; i < 10; i++)
    set_flags(f, i, FLEET_ON_BACKUP);
  set_flags(f, 10, FLEET_ALL_DOWN);
  set_flags(f, 11, FLEET_ALL_DOWN | FLEET_ON_BACKUP);
  set_flags(f, 12, FLEET_PAUSED);
  set_flags(f, 13, FLEET_FAILBACK_AVAILABLE | FLEET_ON_BACKUP);
  set_flags(f, 14, FLEET_ON_BACKUP);
  set_flags(f, 14, 0); /* back on the primary */
  assert_int_equal(store_fleet_summary(f->st, T0, &fs), 0);
  assert_int_equal(fs.sites, 40);
  assert_int_equal(fs.on_backup, 12);
  assert_int_equal(fs.on_primary, 28);
  assert_int_equal(fs.all_down, 2);
  assert_int_equal(fs.failback_available, 1);
  assert_int_equal(fs.paused, 1);
  assert_int_equal(fs.nodes_online, 0);
  assert_int_equal(fs.nodes_lagging, 0);

  n = list_all(f, FLEET_ON_BACKUP, NULL, 5, got);
  assert_int_equal(n, 12);
  for (int i = 0; i < 10; i++)
    assert_int_equal(got[i], f->ids[i]);
  assert_int_equal(got[10], f->ids[11]);
  assert_int_equal(got[11], f->ids[13]);
  n = list_all(f, FLEET_ALL_DOWN, NULL, 1, got);
  assert_int_equal(n, 2);
  assert_int_equal(got[0], f->ids[10]);
  n = list_all(f, FLEET_PAUSED, NULL, 100, got);
  assert_int_equal(n, 1);
  assert_int_equal(got[0], f->ids[12]);
  /* q: name (any case) or hostname substring, combined with a state */
  n = list_all(f, 0, "site-0", 3, got);
  assert_int_equal(n, 10);
  n = list_all(f, 0, "S1", 100, got); /* "Site-1x" by name and "www.s1x.test" by hostname */
  assert_int_equal(n, 10);
  n = list_all(f, 0, "www.s39.", 100, got);
  assert_int_equal(n, 1);
  assert_int_equal(got[0], f->ids[39]);
  n = list_all(f, FLEET_ON_BACKUP, "site-1", 100, got);
  assert_int_equal(n, 2);            /* 11 and 13 */
  n = list_all(f, 0, "%", 100, got); /* no LIKE wildcards */
  assert_int_equal(n, 0);
  n = list_all(f, 0, "site_0", 100, got);
  assert_int_equal(n, 0);
  n = list_all(f, 0, "\\", 100, got);
  assert_int_equal(n, 0);
  n = list_all(f, FLEET_ALL_DOWN, "S1", 100, got); /* a state and q: 10 and 11 */
  assert_int_equal(n, 2);
  n = list_all(f, 0, "nothing", 100, got);
  assert_int_equal(n, 0);
  n = list_all(f, 0, "", 7, got);
  assert_int_equal(n, 40);
  {
    /* by last change: created one after the other, so newest (highest id) first; a state and q
       filter the same way; after= continues below the given site */
    struct site_rec *arr = NULL;
    int m = 0;
    assert_int_equal(store_fleet_site_list_changed(f->st, 0, NULL, 0, 100, &arr, &m), STORE_OK);
    assert_int_equal(m, 40);
    for (int i = 0; i < m; i++)
      assert_int_equal(arr[i].id, f->ids[39 - i]);
    for (int i = 0; i < m; i++)
      site_rec_fini(&arr[i]);
    free(arr);
    assert_int_equal(
        store_fleet_site_list_changed(f->st, FLEET_ON_BACKUP, "site-1", 0, 100, &arr, &m),
        STORE_OK);
    assert_int_equal(m, 2);
    assert_int_equal(arr[0].id, f->ids[13]);
    assert_int_equal(arr[1].id, f->ids[11]);
    for (int i = 0; i < m; i++)
      site_rec_fini(&arr[i]);
    free(arr);
    assert_int_equal(store_fleet_site_list_changed(f->st, 0, NULL, f->ids[5], 100, &arr, &m),
                     STORE_OK);
    assert_int_equal(m, 5);
    assert_int_equal(arr[0].id, f->ids[4]);
    for (int i = 0; i < m; i++)
      site_rec_fini(&arr[i]);
    free(arr);
  }
}

struct walk {
  int n;
  int64_t last;
  unsigned states[64];
  int stop_at;
};

static int on_site(void *arg, const struct fleet_site_row *row) {
  struct walk *w = arg;
  assert_true(row->id > w->last);
  assert_true(strncmp(row->name, "Site-", 5) == 0);
  assert_int_equal(row->current_level, 1);
  w->last = row->id;
  w->states[w->n++] = row->state;
  return w->stop_at && w->n >= w->stop_at;
}

static int on_origin(void *arg, const struct fleet_origin_row *row) {
  struct walk *w = arg;
  assert_true(row->site_id >= w->last);
  assert_string_equal(row->health, "unknown");
  assert_true(row->level == 1 || row->level == 2);
  w->last = row->site_id;
  w->n++;
  return 0;
}

static void test_store_walks(void **state) {
  struct fx *f = *state;
  struct walk w;
  set_flags(f, 1, FLEET_ON_BACKUP | FLEET_PAUSED);
  memset(&w, 0, sizeof w);
  assert_int_equal(store_fleet_each_site(f->st, 1000, on_site, &w), 0);
  assert_int_equal(w.n, 40);
  assert_int_equal(w.states[0], 0);
  assert_int_equal(w.states[1], FLEET_ON_BACKUP | FLEET_PAUSED);
  memset(&w, 0, sizeof w);
  assert_int_equal(store_fleet_each_site(f->st, 5, on_site, &w), 0);
  assert_int_equal(w.n, 5);
  memset(&w, 0, sizeof w);
  w.stop_at = 3;
  assert_int_equal(store_fleet_each_site(f->st, 1000, on_site, &w), 0);
  assert_int_equal(w.n, 3);
  memset(&w, 0, sizeof w);
  assert_int_equal(store_fleet_each_origin(f->st, 4, on_origin, &w), 0);
  assert_int_equal(w.n, 8);
  assert_int_equal(w.last, f->ids[3]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state_primary_and_backup),
      cmocka_unit_test(test_state_paused_and_all_down),
      cmocka_unit_test(test_state_failback_available),
      cmocka_unit_test(test_state_reads_the_outlook),
      cmocka_unit_test(test_state_names),
      cmocka_unit_test_setup_teardown(test_store_summary_and_lists, setup, teardown),
      cmocka_unit_test_setup_teardown(test_store_walks, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
