/* fuzz_sitecfg — libFuzzer target: noded's published-config parser, snapshot apply (onto nothing
 * and onto a base set, as a delta would be) and the config.json round trip: parse -> apply ->
 * serialize -> load -> serialize must give the same text. Host lookups must agree with the set. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "fuzz_check.h"
#include "log.h"
#include "sitecfg.h"

/* The set a delta publication is applied onto. */
static const char BASE_SET[] =
    "{\"seq\":5,\"full\":true,\"deleted\":[],\"sites\":["
    "{\"id\":1,\"name\":\"shop\",\"hostnames\":[\"shop.example.com\",\"www.shop.example.com\"],"
    "\"config_version\":3,\"current_level\":1,\"origins\":["
    "{\"id\":10,\"level\":1,\"address\":\"127.0.0.1\",\"port\":8080,\"scheme\":\"http\","
    "\"host_header\":null,\"weight\":2},"
    "{\"id\":11,\"level\":2,\"address\":\"origin.shop.test\",\"port\":443,\"scheme\":\"https\","
    "\"host_header\":\"origin.shop.test\",\"weight\":1}]},"
    "{\"id\":3,\"name\":\"blog\",\"hostnames\":[\"blog.test\"],\"config_version\":1,"
    "\"current_level\":1,\"origins\":[]}]}";

/* The snapshot's indexes are sorted and every hostname resolves to a site that has it. */
static void check_set(const struct sitecfg_set *s) {
  for (int i = 0; i < s->n_sites; i++) {
    const struct sitecfg_site *site = s->sites[i];
    FUZZ_CHECK(i == 0 || s->sites[i - 1]->id < site->id);
    FUZZ_CHECK(sitecfg_find(s, site->id) == site);
    FUZZ_CHECK(site->n_hostnames >= 1 && site->n_hostnames <= SITECFG_MAX_HOSTNAMES);
    FUZZ_CHECK(site->n_origins >= 0 && site->n_origins <= SITECFG_MAX_ORIGINS);
    for (int h = 0; h < site->n_hostnames; h++) {
      const char *name = site->hostnames[h];
      const struct sitecfg_site *owner = sitecfg_lookup(s, name, strlen(name));
      int has = 0;
      FUZZ_CHECK(owner != NULL);
      FUZZ_CHECK(owner->id <= site->id);
      for (int k = 0; k < owner->n_hostnames; k++)
        has |= strcmp(owner->hostnames[k], name) == 0;
      FUZZ_CHECK(has);
    }
    for (int o = 0; o < site->n_origins; o++) {
      const struct sitecfg_origin *org = &site->origins[o];
      FUZZ_CHECK(org->address != NULL);
      FUZZ_CHECK(org->port >= 1 && org->port <= 65535);
      FUZZ_CHECK(org->weight >= 1 && org->weight <= 100);
      FUZZ_CHECK(org->level >= 1 && org->level <= SITECFG_MAX_LEVEL);
      FUZZ_CHECK(sitecfg_origin_same(org, org));
    }
  }
  for (int i = 1; i < s->n_hosts; i++)
    FUZZ_CHECK(strcmp(s->hosts[i - 1].name, s->hosts[i].name) < 0);
}

/* serialize(s) must load back and serialize to the same text. */
static void round_trip(const struct sitecfg_set *s) {
  struct buf a, b;
  struct sitecfg_set *t;
  char err[256];
  buf_init(&a, 0);
  buf_init(&b, 0);
  check_set(s);
  FUZZ_CHECK(sitecfg_serialize(s, &a) == 0);
  err[0] = '\0';
  t = sitecfg_load(a.data, a.len, err, sizeof err);
  if (!t) fprintf(stderr, "serialized set does not load: %s\n%.*s\n", err, (int)a.len, a.data);
  FUZZ_CHECK(t != NULL);
  FUZZ_CHECK(sitecfg_serialize(t, &b) == 0);
  if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
    fprintf(stderr, "round trip differs:\n first: %.*s\nsecond: %.*s\n", (int)a.len, a.data,
            (int)b.len, b.data);
  FUZZ_CHECK(t->seq == s->seq && t->n_sites == s->n_sites && t->n_hosts == s->n_hosts);
  FUZZ_CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
  sitecfg_set_unref(t);
  buf_fini(&a);
  buf_fini(&b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  log_init("fuzz_sitecfg", LOG_TEXT, LOG_ERROR); /* duplicate hostnames warn on every input */
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  struct sitecfg_update *u = NULL;
  struct sitecfg_set *base, *s1 = NULL, *s2 = NULL;
  char err[256];
  err[0] = '\0';
  base = sitecfg_load(BASE_SET, sizeof BASE_SET - 1, err, sizeof err);
  FUZZ_CHECK(base != NULL);
  /* the input as a visitor Host header against the base set: any answer, no crash */
  (void)sitecfg_lookup(base, (const char *)data, size);
  if (sitecfg_parse((const char *)data, size, &u, err, sizeof err) < 0) {
    FUZZ_CHECK(u == NULL);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0');
    goto out;
  }
  FUZZ_CHECK(u != NULL);
  s1 = sitecfg_apply(NULL, u);
  FUZZ_CHECK(s1 != NULL);
  round_trip(s1);
  s2 = sitecfg_apply(base, u);
  FUZZ_CHECK(s2 != NULL);
  FUZZ_CHECK(s2->seq == u->seq);
  for (int i = 0; i < u->n_deleted; i++)
    FUZZ_CHECK(sitecfg_find(s2, u->deleted[i]) == NULL);
  round_trip(s2);
  check_set(base); /* applying never changes the current set */
out:
  sitecfg_set_unref(s2);
  sitecfg_set_unref(s1);
  sitecfg_update_free(&u);
  sitecfg_set_unref(base);
  return 0;
}
